--- fimlsp for Neovim: syntax-guaranteed fill-in-the-middle completion for Python.
---
--- `setup()` starts one `fimlsp --stdio` server for all Python buffers (through
--- `vim.lsp.start`, which works from 0.10 on) and shows its inline completions
--- as ghost text: with Neovim's `vim.lsp.inline_completion` where it exists
--- (0.12+), otherwise with the plugin's own renderer (`fimlsp.ghost`).
local config = require("fimlsp.config")
local status = require("fimlsp.status")
local util = require("fimlsp.util")

local api = vim.api

local M = {}

--- The resolved options; nil until `setup()`.
---@type fimlsp.Options?
M.options = nil

--- Whether completions are on (`:FimlspEnable` / `:FimlspDisable`).
local enabled = true

local group = api.nvim_create_augroup("fimlsp", { clear = true })

--- The renderer in use: Neovim's (0.12+) or the plugin's.
local function backend()
  local builtin = require("fimlsp.builtin")
  if M.options and M.options.inline.builtin and builtin.available() then
    return builtin
  end
  return require("fimlsp.ghost")
end

--- Name of the renderer in use, "builtin" or "ghost" (for `:checkhealth`).
function M.renderer()
  return backend() == require("fimlsp.ghost") and "ghost" or "builtin"
end

local function define_highlights()
  api.nvim_set_hl(0, "FimlspGhost", { link = "Comment", default = true })
  api.nvim_set_hl(0, "FimlspGhostCounter", { link = "NonText", default = true })
end

-- ------------------------------------------------------------------ keymaps

local ACTIONS = {
  accept = function(b)
    return b.accept(0, "all")
  end,
  accept_word = function(b)
    return b.accept(0, "word")
  end,
  accept_line = function(b)
    return b.accept(0, "line")
  end,
  dismiss = function(b)
    return b.dismiss(0)
  end,
  next = function(b)
    return b.cycle(0, 1)
  end,
  prev = function(b)
    return b.cycle(0, -1)
  end,
  trigger = function(b)
    return b.trigger(0)
  end,
}

--- Run a keymap action in the current buffer; used by the mappings' `<Cmd>`.
---@param action string
function M._run(action)
  local run = ACTIONS[action]
  return run ~= nil and run(backend()) or false
end

--- Insert-mode mappings for `bufnr`.  Each is an `expr` mapping: when there is
--- nothing for it to do it returns its own key, so <Tab> still inserts a tab.
--- The work itself runs from `<Cmd>`, outside the textlock of `expr` mappings.
local function set_keymaps(bufnr)
  for action, lhs in pairs(M.options.keymaps or {}) do
    if ACTIONS[action] and type(lhs) == "string" and lhs ~= "" then
      vim.keymap.set("i", lhs, function()
        local b = backend()
        local applies = action == "trigger" and b == require("fimlsp.ghost") or b.visible(0)
        if enabled and applies then
          return ("<Cmd>lua require('fimlsp')._run(%q)<CR>"):format(action)
        end
        return lhs
      end, { buffer = bufnr, expr = true, replace_keycodes = true, desc = "fimlsp: " .. action })
    end
  end
end

-- ------------------------------------------------------------------ client

--- The client configuration for `vim.lsp.start`.
local function client_config(bufnr)
  local opts = M.options
  local capabilities = vim.lsp.protocol.make_client_capabilities()
  -- Tell the server (0.12 says so itself) that inline completions are shown.
  capabilities.textDocument = capabilities.textDocument or {}
  capabilities.textDocument.inlineCompletion = capabilities.textDocument.inlineCompletion
    or { dynamicRegistration = false }
  if opts.capabilities then
    capabilities = vim.tbl_deep_extend("force", capabilities, opts.capabilities)
  end
  local settings = config.payload(opts.settings, enabled)
  local root = vim.fs.root(bufnr, opts.root_markers) or vim.fn.getcwd()
  return {
    name = util.CLIENT_NAME,
    cmd = opts.cmd,
    cmd_env = opts.cmd_env,
    root_dir = root,
    capabilities = capabilities,
    init_options = settings,
    settings = { fimlsp = settings },
    handlers = { [status.NOTIFICATION] = status.handler },
    on_attach = function(client, b)
      M._attach(client, b)
    end,
    on_exit = function()
      vim.schedule(function()
        if #util.clients() == 0 then
          status.reset()
        end
      end)
    end,
  }
end

--- Called when the server is attached to a buffer.
function M._attach(client, bufnr)
  backend().attach(bufnr, client)
  set_keymaps(bufnr)
  if M.options.on_attach then
    M.options.on_attach(client, bufnr)
  end
end

local warned_missing = false

--- Start the server for `bufnr` (or attach the running one).
---@param bufnr integer?
---@return integer? client_id
function M.start(bufnr)
  if not M.options then
    return nil
  end
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  if vim.bo[bufnr].buftype ~= "" or not vim.tbl_contains(M.options.filetypes, vim.bo[bufnr].filetype) then
    return nil
  end
  if vim.fn.executable(M.options.cmd[1]) ~= 1 then
    if not warned_missing then
      warned_missing = true
      vim.notify(
        ("fimlsp: %q is not executable; install the server or set `cmd` (:help fimlsp-requirements)"):format(
          M.options.cmd[1]
        ),
        vim.log.levels.WARN
      )
    end
    return nil
  end
  return vim.lsp.start(client_config(bufnr), {
    bufnr = bufnr,
    -- One server for every Python buffer: each process holds a model in memory.
    reuse_client = function(client, conf)
      return client.name == conf.name and not util.is_stopped(client)
    end,
  })
end

-- ------------------------------------------------------------------ settings

--- Send the current settings to the running servers.
local function push_settings()
  local settings = config.payload(M.options.settings, enabled)
  for _, client in ipairs(util.clients()) do
    client.settings = { fimlsp = settings }
    if client.config then
      client.config.settings = client.settings
    end
    util.notify(client, "workspace/didChangeConfiguration", { settings = client.settings })
  end
end

--- Change server settings at run time, e.g. `configure({ mode = "checked" })`.
---@param settings table camelCase server settings, merged into the current ones
function M.configure(settings)
  if not M.options then
    error("fimlsp: call require('fimlsp').setup() first")
  end
  M.options.settings = vim.tbl_extend("force", M.options.settings, settings or {})
  if settings and settings.enable ~= nil then
    M.set_enabled(settings.enable) -- sends the settings too
  else
    push_settings()
  end
end

--- Turn completions on or off (in this Neovim and in the server).
---@param on boolean
function M.set_enabled(on)
  enabled = on and true or false
  if not enabled then
    backend().clear_all()
  end
  local builtin = require("fimlsp.builtin")
  if backend() == builtin then
    builtin.set_enabled(enabled)
  end
  if M.options then
    push_settings()
  end
end

function M.enable()
  M.set_enabled(true)
end

function M.disable()
  M.set_enabled(false)
end

function M.toggle()
  M.set_enabled(not enabled)
end

function M.is_enabled()
  return enabled
end

--- Stop the server and start a fresh one for the open Python buffers.
function M.restart()
  local clients = util.clients()
  local buffers = {}
  for _, client in ipairs(clients) do
    for bufnr in pairs(client.attached_buffers or {}) do
      buffers[bufnr] = true
    end
    util.stop(client)
  end
  for _, bufnr in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_loaded(bufnr) and vim.tbl_contains(M.options.filetypes, vim.bo[bufnr].filetype) then
      buffers[bufnr] = true
    end
  end
  local waited = 0
  local timer = assert((vim.uv or vim.loop).new_timer())
  timer:start(
    50,
    50,
    vim.schedule_wrap(function()
      waited = waited + 50
      local running = #util.clients() > 0
      if running and waited < 5000 then
        return
      end
      timer:stop()
      timer:close()
      for _, c in ipairs(running and util.clients() or {}) do
        util.stop(c, true) -- it did not stop in time
      end
      status.reset()
      for bufnr in pairs(buffers) do
        if api.nvim_buf_is_valid(bufnr) then
          M.start(bufnr)
        end
      end
    end)
  )
end

-- ------------------------------------------------------------------ status

--- A short status for statuslines: "fimlsp: ready", "fimlsp: 12 tok 85ms", ...
--- Empty when no server runs.  Redraw on `User FimlspStatus`.
---@return string
function M.status()
  return status.line(enabled)
end

--- The raw status: { server = {state, message}, last = <last fimlsp/status of a completion> }.
function M.status_data()
  return { server = status.server, last = status.last, enabled = enabled }
end

--- Ask the server for `fimlsp/serverStatus` (counters, memory) and wait a little.
---@param bufnr integer?
---@return table?
function M.server_status(bufnr)
  local client = util.clients()[1]
  if not client then
    return nil
  end
  local params = {}
  if bufnr then
    params.uri = vim.uri_from_bufnr(bufnr)
  end
  local response = util.request_sync(client, status.SERVER_STATUS, params, 2000)
  return response and response.result or nil
end

--- Print the state of the server and of the last completion (`:FimlspStatus`).
function M.show_status()
  local lines = status.describe(enabled, M.server_status())
  local chunks = {}
  for i, line in ipairs(lines) do
    table.insert(chunks, { line .. (i < #lines and "\n" or "") })
  end
  api.nvim_echo(chunks, true, {})
end

-- ------------------------------------------------------------------ actions

--- Whether a suggestion is shown in the current buffer.
function M.visible()
  return backend().visible(0)
end

--- Accept the whole suggestion; returns whether there was one.
function M.accept()
  return M._run("accept")
end

function M.accept_word()
  return M._run("accept_word")
end

function M.accept_line()
  return M._run("accept_line")
end

function M.dismiss()
  return M._run("dismiss")
end

function M.next()
  return M._run("next")
end

function M.prev()
  return M._run("prev")
end

--- Ask for a completion now (the plugin's renderer only).
function M.trigger()
  return M._run("trigger")
end

-- ------------------------------------------------------------------ setup

--- Configure the plugin and start the server for Python buffers.
---@param user table? see `:help fimlsp-options`
function M.setup(user)
  if vim.fn.has("nvim-0.10") ~= 1 then
    vim.notify("fimlsp needs Neovim 0.10 or newer", vim.log.levels.ERROR)
    return
  end
  local opts = config.resolve(user)
  for _, problem in ipairs(config.check_settings(opts.settings)) do
    vim.notify("fimlsp: " .. problem, vim.log.levels.WARN)
  end
  M.options = opts
  require("fimlsp.commands").create()
  enabled = opts.settings.enable ~= false
  require("fimlsp.ghost").configure(opts.inline, function()
    return enabled
  end)
  define_highlights()

  api.nvim_clear_autocmds({ group = group })
  api.nvim_create_autocmd("FileType", {
    group = group,
    pattern = opts.filetypes,
    desc = "fimlsp: start the completion server",
    callback = function(args)
      M.start(args.buf)
    end,
  })
  api.nvim_create_autocmd("ColorScheme", {
    group = group,
    desc = "fimlsp: ghost text highlights",
    callback = define_highlights,
  })
  api.nvim_create_autocmd("LspDetach", {
    group = group,
    desc = "fimlsp: stop showing completions",
    callback = function(args)
      local client = vim.lsp.get_client_by_id(args.data.client_id)
      if client and client.name == util.CLIENT_NAME then
        backend().detach(args.buf)
      end
    end,
  })
  -- Buffers opened before setup() (lazy loading) get the server too.
  for _, bufnr in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_loaded(bufnr) and vim.tbl_contains(opts.filetypes, vim.bo[bufnr].filetype) then
      M.start(bufnr)
    end
  end
end

return M
