--- Inline completion through Neovim's own `vim.lsp.inline_completion` (0.12+).
---
--- Neovim then requests, debounces and draws the suggestion itself; this module
--- only turns it on for fimlsp's client and maps the plugin's actions onto the
--- public API: `enable()`, `get()` (accept, optionally with `on_accept`) and
--- `select()` (cycle).  The API has no "dismiss" and no "is a suggestion
--- shown": dismissing turns the feature off and on again for the buffer (which
--- drops the suggestion), and visibility is read from the extmarks of the
--- namespace that Neovim draws in.
local util = require("fimlsp.util")

local api = vim.api

local M = {}

--- The namespace `vim.lsp.inline_completion` draws in (an implementation detail,
--- only used to tell whether a suggestion is visible).
local BUILTIN_NAMESPACE = "nvim.lsp.inline_completion"

--- Whether this Neovim has the API (0.12 and newer).
function M.available()
  local ok, ic = pcall(function()
    return vim.lsp.inline_completion
  end)
  return ok and type(ic) == "table" and type(ic.enable) == "function" and type(ic.get) == "function"
end

local attached = {} ---@type table<integer, integer> bufnr -> client id

--- The API's scope: a buffer (or a client, never both).  A client alone is not
--- enough, buffers start disabled; so this also enables other servers' inline
--- completions in the buffer, if any offer them.
local function filter(bufnr)
  return { bufnr = bufnr }
end

--- Turn the built-in inline completion on for fimlsp in `bufnr`.
---@param bufnr integer
---@param client vim.lsp.Client
function M.attach(bufnr, client)
  attached[bufnr] = client.id
  vim.lsp.inline_completion.enable(true, filter(bufnr))
end

function M.detach(bufnr)
  if attached[bufnr] and api.nvim_buf_is_valid(bufnr) then
    pcall(vim.lsp.inline_completion.enable, false, filter(bufnr))
  end
  attached[bufnr] = nil
end

function M.attached(bufnr)
  return attached[bufnr] ~= nil
end

local function resolve(bufnr)
  return (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
end

--- Whether Neovim shows a suggestion in `bufnr`.
function M.visible(bufnr)
  bufnr = resolve(bufnr)
  local ns = api.nvim_get_namespaces()[BUILTIN_NAMESPACE]
  if not ns or not attached[bufnr] then
    return false
  end
  return #api.nvim_buf_get_extmarks(bufnr, ns, 0, -1, { limit = 1 }) > 0
end

--- The item's text still to insert at the cursor (without what was typed of it).
---@param item table vim.lsp.inline_completion.Item
---@return string?
local function remaining_text(bufnr, item)
  local insert = item.insert_text
  if type(insert) ~= "string" then
    return nil -- snippets are accepted whole
  end
  local cursor = api.nvim_win_get_cursor(0)
  local row, col = cursor[1] - 1, cursor[2]
  local range = item.range
  if range and range.start then
    local typed = util.text_between(bufnr, range.start.row, range.start.col, row, col)
    if insert:sub(1, #typed) ~= typed then
      return nil
    end
    return insert:sub(#typed + 1)
  end
  return insert
end

--- Insert only the next word or line of `item` at the cursor.
local function accept_part(bufnr, item, what)
  local text = remaining_text(bufnr, item)
  if not text or text == "" then
    return
  end
  local part
  if what == "word" then
    local space = text:match("^%s*")
    local rest = text:sub(#space + 1)
    part = space .. (rest:match("^[%w_\128-\255]+") or rest:match("^[^%w_%s\128-\255]+") or "")
  else
    part = text:match("^[^\n]*")
    if part == "" then
      part = "\n" .. text:sub(2):match("^[^\n]*")
    end
  end
  local cursor = api.nvim_win_get_cursor(0)
  local row, col = cursor[1] - 1, cursor[2]
  local lines = vim.split(part, "\n", { plain = true })
  api.nvim_buf_set_text(bufnr, row, col, row, col, lines)
  api.nvim_win_set_cursor(0, { row + #lines, (#lines == 1 and col or 0) + #lines[#lines] })
end

--- Accept the suggestion (what = "all"), or its next word or line.  Safe in
--- `expr` mappings: Neovim applies it after the mapping returns.
---@return boolean accepted
function M.accept(bufnr, what)
  bufnr = resolve(bufnr)
  if not attached[bufnr] then
    return false
  end
  local ic = vim.lsp.inline_completion
  if what == nil or what == "all" then
    return ic.get({ bufnr = bufnr }) and true or false
  end
  return ic.get({
    bufnr = bufnr,
    on_accept = function(item)
      accept_part(bufnr, item, what)
    end,
  }) and true or false
end

--- Drop the shown suggestion (the API has no call for it: off and on again).
function M.dismiss(bufnr)
  bufnr = resolve(bufnr)
  if not M.visible(bufnr) then
    return false
  end
  pcall(vim.lsp.inline_completion.enable, false, filter(bufnr))
  pcall(vim.lsp.inline_completion.enable, true, filter(bufnr))
  return true
end

function M.cycle(bufnr, count)
  bufnr = resolve(bufnr)
  if not M.visible(bufnr) then
    return false
  end
  vim.lsp.inline_completion.select({ bufnr = bufnr, count = count })
  return true
end

--- Neovim requests by itself while typing; there is no public call to ask now.
function M.trigger(_)
  return false
end

--- The shown suggestion is Neovim's; the plugin cannot read it.
function M.current(_)
  return nil
end

--- Turn the built-in completion off (or back on) in every attached buffer.
function M.clear_all()
  for bufnr in pairs(attached) do
    M.dismiss(bufnr)
  end
end

function M.set_enabled(on)
  for bufnr in pairs(attached) do
    if api.nvim_buf_is_valid(bufnr) then
      pcall(vim.lsp.inline_completion.enable, on, filter(bufnr))
    end
  end
end

return M
