--- Inline completion for Neovim without `vim.lsp.inline_completion` (before 0.12):
--- requests `textDocument/inlineCompletion` itself and shows the answer as ghost
--- text (extmarks: inline virtual text for the first line, virtual lines below
--- for the rest).
---
--- Each buffer has one state.  A suggestion is tied to the buffer's changedtick
--- and the cursor at the moment of the request (its "key"): a response whose key
--- no longer matches is dropped, because showing it would offer text for a place
--- the user has left.  Typing the suggestion's own text keeps it (shows the rest)
--- without a new request; anything else clears it and, after a pause
--- (debounce), asks again, cancelling the request still in flight.
local util = require("fimlsp.util")

local api = vim.api
local uv = vim.uv or vim.loop

local M = {}

local ns = api.nvim_create_namespace("fimlsp.ghost")

--- `InlineCompletionTriggerKind`: the user asked (1) or typing asked (2).
M.INVOKED, M.AUTOMATIC = 1, 2

--- Counters for tests and curious users: how often each thing happened.
M.stats = { requests = 0, responses = 0, dropped = 0, shown = 0, accepted = 0, cancelled = 0 }

--- Options from `setup()` (`inline` table); set by `M.configure`.
local opts = { auto_trigger = true, debounce_ms = 100, hide_during_popup = true }

--- Whether completions are on at all; a function so that init.lua owns the flag.
local enabled = function()
  return true
end

---@class fimlsp.Item
---@field text string   what to insert at the anchor (what the user typed already is cut off)
---@field end_row integer  the item replaces anchor..(end_row, end_col), normally empty
---@field end_col integer
---@field snippet string?  the snippet to expand instead of `text`, for snippet items

---@class fimlsp.Shown
---@field key string    changedtick and cursor the suggestion belongs to
---@field row integer   anchor (the cursor), 0-based row and byte column
---@field col integer
---@field prefix string the anchor line before the anchor
---@field suffix string the anchor line after the anchor
---@field line_count integer

---@class fimlsp.GhostState
---@field bufnr integer
---@field client_id integer
---@field seq integer         the number of the latest request; older answers are stale
---@field timer uv.uv_timer_t?
---@field inflight {client_id: integer, id: integer, seq: integer}?
---@field last_key string?    key of the last request, dismissal or acceptance
---@field items fimlsp.Item[]?
---@field index integer
---@field shown fimlsp.Shown?
---@field augroup integer

---@type table<integer, fimlsp.GhostState>
local states = {}

--- The changedtick and cursor, as one comparable string.
---@return string, integer, integer
local function current_key(bufnr)
  local cursor = api.nvim_win_get_cursor(0)
  local row, col = cursor[1] - 1, cursor[2]
  return ("%d:%d:%d"):format(api.nvim_buf_get_changedtick(bufnr), row, col), row, col
end

--- Whether this buffer is the one being edited in Insert mode now.
local function editing(bufnr)
  return api.nvim_buf_is_valid(bufnr) and api.nvim_get_current_buf() == bufnr and util.in_insert()
end

local function stop_timer(st)
  if st.timer then
    st.timer:stop()
  end
end

--- Cancel the request in flight; its answer, if it still comes, is stale.
local function cancel_inflight(st)
  local inflight = st.inflight
  st.inflight = nil
  st.seq = st.seq + 1
  if inflight then
    local client = vim.lsp.get_client_by_id(inflight.client_id)
    if client then
      pcall(util.cancel, client, inflight.id)
    end
    M.stats.cancelled = M.stats.cancelled + 1
  end
end

--- Remove the ghost text and forget the suggestion; stop asking for one.
local function clear(st)
  stop_timer(st)
  cancel_inflight(st)
  st.items, st.shown, st.index = nil, nil, 1
  if api.nvim_buf_is_valid(st.bufnr) then
    api.nvim_buf_clear_namespace(st.bufnr, ns, 0, -1)
  end
end

--- Text as the screen shows it: tabs in virtual text would show as "^I".
local function display(text)
  if not text:find("\t", 1, true) then
    return text
  end
  local ts = vim.bo.tabstop > 0 and vim.bo.tabstop or 8
  return (text:gsub("\t", string.rep(" ", ts)))
end

--- Draw the current item at the anchor.
local function render(st)
  api.nvim_buf_clear_namespace(st.bufnr, ns, 0, -1)
  local item = st.items and st.items[st.index]
  local shown = st.shown
  if not item or not shown then
    return
  end
  local lines = vim.split(item.text, "\n", { plain = true })
  local extmark = { hl_mode = "combine", right_gravity = false }
  local counter = #st.items > 1 and (" (%d/%d)"):format(st.index, #st.items) or nil
  local virt_lines = {}
  for i = 2, #lines do
    table.insert(virt_lines, { { display(lines[i]), "FimlspGhost" } })
  end
  if #virt_lines > 0 then
    if counter then
      table.insert(virt_lines[#virt_lines], { counter, "FimlspGhostCounter" })
    end
    extmark.virt_lines = virt_lines
  end
  local first = { { display(lines[1]), "FimlspGhost" } }
  if counter and #virt_lines == 0 then
    table.insert(first, { counter, "FimlspGhostCounter" })
  end
  extmark.virt_text = first
  extmark.virt_text_pos = "inline"
  api.nvim_buf_set_extmark(st.bufnr, ns, shown.row, shown.col, extmark)
end

--- Remember where the suggestion is anchored (the cursor now) and draw it.
local function anchor_and_render(st)
  local key, row, col = current_key(st.bufnr)
  local line = api.nvim_buf_get_lines(st.bufnr, row, row + 1, false)[1] or ""
  st.shown = {
    key = key,
    row = row,
    col = col,
    prefix = line:sub(1, col),
    suffix = line:sub(col + 1),
    line_count = api.nvim_buf_line_count(st.bufnr),
  }
  st.index = math.min(math.max(st.index or 1, 1), #st.items)
  render(st)
end

--- What the user typed since the suggestion was anchored, if the buffer differs
--- from the anchored one only by text typed at the anchor.
---@return string?
local function typed_since_anchor(st, row, col)
  local s = st.shown
  if not s or row < s.row then
    return nil
  end
  if api.nvim_buf_line_count(st.bufnr) - s.line_count ~= row - s.row then
    return nil
  end
  local lines = api.nvim_buf_get_lines(st.bufnr, s.row, row + 1, false)
  local first, last = lines[1], lines[#lines]
  if first == nil or first:sub(1, s.col) ~= s.prefix or last:sub(col + 1) ~= s.suffix then
    return nil
  end
  if #lines == 1 then
    return col >= s.col and first:sub(s.col + 1, col) or nil
  end
  lines[1] = first:sub(s.col + 1)
  lines[#lines] = last:sub(1, col)
  return table.concat(lines, "\n")
end

--- Keep the suggestion while the user types its own text: show what is left.
---@return boolean kept
local function follow(st, row, col)
  local typed = typed_since_anchor(st, row, col)
  if typed == nil or typed == "" then
    return false
  end
  local kept = {}
  local current = st.items[st.index]
  local index = 1
  for _, item in ipairs(st.items) do
    local plain = not item.snippet and item.end_row == st.shown.row and item.end_col == st.shown.col
    if plain and #item.text > #typed and item.text:sub(1, #typed) == typed then
      table.insert(kept, {
        text = item.text:sub(#typed + 1),
        end_row = row,
        end_col = col,
      })
      if item == current then
        index = #kept
      end
    end
  end
  if #kept == 0 then
    return false
  end
  st.items, st.index = kept, index
  anchor_and_render(st)
  return true
end

--- Turn the server's items into ones anchored at the cursor (row, col).
---@return fimlsp.Item[]
local function normalize(bufnr, client, result, row, col)
  local raw = result and (result.items or result) or {}
  local items = {}
  for _, it in ipairs(raw) do
    local insert = it.insertText
    local snippet = nil
    if type(insert) == "table" then -- StringValue: { kind = "snippet", value = ... }
      snippet = insert.value
      -- Shown without its tab stops; expanded by vim.snippet when accepted.
      insert = tostring(snippet or "")
        :gsub("%${%d+:([^}]*)}", "%1")
        :gsub("%${%d+}", "")
        :gsub("%$%d+", "")
    end
    if type(insert) == "string" then
      -- Neovim's lines end in "\n" only; a "\r" would be inserted as a literal ^M.
      -- Python reads "\r\n", "\r" and "\n" alike, so the code means the same.
      insert = insert:gsub("\r\n?", "\n")
    end
    if type(insert) == "string" and insert ~= "" then
      local srow, scol, erow, ecol = row, col, row, col
      if type(it.range) == "table" then
        srow, scol = util.to_bytes(bufnr, it.range.start, client.offset_encoding)
        erow, ecol = util.to_bytes(bufnr, it.range["end"], client.offset_encoding)
      end
      local before = srow < row or (srow == row and scol <= col)
      local after = erow > row or (erow == row and ecol >= col)
      if before and after then
        -- The item may start before the cursor, with what the user typed already.
        local typed = util.text_between(bufnr, srow, scol, row, col)
        if insert:sub(1, #typed) == typed and not (snippet and typed ~= "") then
          local text = insert:sub(#typed + 1)
          if text ~= "" then
            table.insert(items, { text = text, end_row = erow, end_col = ecol, snippet = snippet })
          end
        end
      end
    end
  end
  return items
end

--- Handle the answer to request number `seq`, made at `key`.
local function on_response(bufnr, seq, key, err, result)
  M.stats.responses = M.stats.responses + 1
  local st = states[bufnr]
  if not st or st.seq ~= seq then
    M.stats.dropped = M.stats.dropped + 1 -- superseded or cancelled
    return
  end
  st.inflight = nil
  if err then
    if err.code ~= -32800 then -- RequestCancelled is expected while typing
      vim.lsp.log.warn("fimlsp: inline completion failed: " .. tostring(err.message))
    end
    return
  end
  if not editing(bufnr) or current_key(bufnr) ~= key or not enabled() then
    M.stats.dropped = M.stats.dropped + 1 -- the buffer or the cursor changed meanwhile
    return
  end
  local client = vim.lsp.get_client_by_id(st.client_id)
  if not client then
    return
  end
  local _, row, col = current_key(bufnr)
  local items = normalize(bufnr, client, result, row, col)
  if #items == 0 then
    return
  end
  st.items, st.index = items, 1
  anchor_and_render(st)
  M.stats.shown = M.stats.shown + 1
end

--- Ask the server for a completion at the cursor now.
---@param bufnr integer?
---@param kind integer? `M.INVOKED` or `M.AUTOMATIC` (default)
---@return boolean sent
function M.request(bufnr, kind)
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  local st = states[bufnr]
  if not st or not editing(bufnr) or not enabled() then
    return false
  end
  local client = vim.lsp.get_client_by_id(st.client_id)
  if not client then
    return false
  end
  stop_timer(st)
  cancel_inflight(st)
  local key = current_key(bufnr)
  st.last_key = key
  local seq = st.seq
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  params.context = { triggerKind = kind or M.AUTOMATIC }
  local ok, id = util.request(client, "textDocument/inlineCompletion", params, function(err, result)
    on_response(bufnr, seq, key, err, result)
  end, bufnr)
  if ok and id then
    st.inflight = { client_id = client.id, id = id, seq = seq }
    M.stats.requests = M.stats.requests + 1
  end
  return ok and true or false
end

--- Ask after `debounce_ms` without further changes.
local function schedule(st)
  cancel_inflight(st)
  if not st.timer then
    st.timer = uv.new_timer()
  end
  local bufnr = st.bufnr
  st.timer:stop()
  st.timer:start(
    opts.debounce_ms,
    0,
    vim.schedule_wrap(function()
      if states[bufnr] == st then
        M.request(bufnr, M.AUTOMATIC)
      end
    end)
  )
end

--- React to an edit or a cursor move in Insert mode.
local function on_change(bufnr, event)
  local st = states[bufnr]
  if not st then
    return
  end
  -- InsertEnter runs before the mode reads "i"; the request checks it later.
  local inserting = event == "InsertEnter" or util.in_insert()
  if not inserting or api.nvim_get_current_buf() ~= bufnr or not enabled() then
    clear(st)
    return
  end
  if opts.hide_during_popup and vim.fn.pumvisible() == 1 then
    clear(st)
    return
  end
  local key, row, col = current_key(bufnr)
  if st.shown then
    if st.shown.key == key or follow(st, row, col) then
      return
    end
    clear(st)
  elseif key == st.last_key and event ~= "InsertEnter" then
    return -- nothing new since the last request (or dismissal, or acceptance)
  end
  st.last_key = key
  if opts.auto_trigger then
    schedule(st)
  end
end

--- Start showing completions from `client` in `bufnr`.
---@param bufnr integer
---@param client vim.lsp.Client
function M.attach(bufnr, client)
  if states[bufnr] then
    states[bufnr].client_id = client.id
    return
  end
  local group = api.nvim_create_augroup("fimlsp.ghost." .. bufnr, { clear = true })
  local st = { bufnr = bufnr, client_id = client.id, seq = 0, index = 1, augroup = group }
  states[bufnr] = st
  for _, event in ipairs({ "InsertEnter", "TextChangedI", "TextChangedP", "CursorMovedI" }) do
    api.nvim_create_autocmd(event, {
      group = group,
      buffer = bufnr,
      desc = "fimlsp: update the inline completion",
      callback = function()
        on_change(bufnr, event)
      end,
    })
  end
  api.nvim_create_autocmd({ "InsertLeave", "BufLeave" }, {
    group = group,
    buffer = bufnr,
    desc = "fimlsp: clear the inline completion",
    callback = function()
      clear(st)
      st.last_key = nil
    end,
  })
  api.nvim_create_autocmd({ "BufWipeout", "BufUnload" }, {
    group = group,
    buffer = bufnr,
    callback = function()
      M.detach(bufnr)
    end,
  })
end

--- Stop showing completions in `bufnr`.
function M.detach(bufnr)
  local st = states[bufnr]
  if not st then
    return
  end
  clear(st)
  if st.timer then
    st.timer:close()
    st.timer = nil
  end
  pcall(api.nvim_del_augroup_by_id, st.augroup)
  states[bufnr] = nil
end

--- Whether `bufnr` has completions from this renderer.
function M.attached(bufnr)
  return states[bufnr] ~= nil
end

local function state_of(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  return states[bufnr]
end

--- Whether ghost text is shown in `bufnr`.
function M.visible(bufnr)
  local st = state_of(bufnr)
  return st ~= nil and st.shown ~= nil and st.items ~= nil
end

--- The suggestion shown in `bufnr`: { text, index, count, row, col }, or nil.
function M.current(bufnr)
  local st = state_of(bufnr)
  if not st or not st.shown or not st.items then
    return nil
  end
  return {
    text = st.items[st.index].text,
    index = st.index,
    count = #st.items,
    row = st.shown.row,
    col = st.shown.col,
  }
end

--- The leading whitespace and the word after it (or a run of punctuation).
local function next_word(text)
  local space = text:match("^%s*")
  local rest = text:sub(#space + 1)
  local word = rest:match("^[%w_\128-\255]+") or rest:match("^[^%w_%s\128-\255]+") or ""
  return space .. word
end

--- The rest of the line (or, at a line end, the line break and the next line).
local function next_line(text)
  local line = text:match("^[^\n]*")
  if line ~= "" then
    return line
  end
  return "\n" .. (text:sub(2):match("^[^\n]*"))
end

--- Insert `text` at the cursor, replacing up to (end_row, end_col); cursor after it.
local function insert_at_cursor(st, text, end_row, end_col)
  local win = api.nvim_get_current_win()
  local shown = st.shown
  local lines = vim.split(text, "\n", { plain = true })
  api.nvim_buf_set_text(st.bufnr, shown.row, shown.col, end_row, end_col, lines)
  local last_row = shown.row + #lines - 1
  local last_col = (#lines == 1 and shown.col or 0) + #lines[#lines]
  api.nvim_win_set_cursor(win, { last_row + 1, last_col })
end

--- Accept the suggestion, or its next word or line.
---@param bufnr integer?
---@param what "all"|"word"|"line"|nil
---@return boolean accepted
function M.accept(bufnr, what)
  local st = state_of(bufnr)
  if not st or not st.shown or not st.items or not editing(st.bufnr) then
    return false
  end
  local item = st.items[st.index]
  local part = item.text
  if what == "word" then
    part = next_word(item.text)
  elseif what == "line" then
    part = next_line(item.text)
  end
  M.stats.accepted = M.stats.accepted + 1
  if item.snippet or part == item.text then
    -- The whole suggestion: no new request until the user goes on typing.
    local shown = st.shown
    clear(st)
    if item.snippet then
      api.nvim_buf_set_text(st.bufnr, shown.row, shown.col, item.end_row, item.end_col, { "" })
      api.nvim_win_set_cursor(0, { shown.row + 1, shown.col })
      vim.snippet.expand(item.snippet)
    else
      st.shown = shown
      insert_at_cursor(st, item.text, item.end_row, item.end_col)
      st.shown = nil
    end
    st.last_key = current_key(st.bufnr)
    return true
  end
  -- Part of it: the rest stays shown, as if the user had typed the part.
  insert_at_cursor(st, part, st.shown.row, st.shown.col)
  local _, row, col = current_key(st.bufnr)
  if not follow(st, row, col) then
    clear(st)
    st.last_key = current_key(st.bufnr)
  end
  return true
end

--- Hide the suggestion; none comes back until the user edits or moves.
function M.dismiss(bufnr)
  local st = state_of(bufnr)
  if not st or not st.shown then
    if st then
      clear(st) -- also stop a request on its way
    end
    return false
  end
  clear(st)
  st.last_key = current_key(st.bufnr)
  return true
end

--- Show the next (count > 0) or previous suggestion, wrapping around.
function M.cycle(bufnr, count)
  local st = state_of(bufnr)
  if not st or not st.shown or not st.items then
    return false
  end
  st.index = (st.index - 1 + (count or 1)) % #st.items + 1
  render(st)
  return true
end

--- Ask for a completion now, whatever `auto_trigger` says.
function M.trigger(bufnr)
  local st = state_of(bufnr)
  if not st then
    return false
  end
  clear(st)
  return M.request(st.bufnr, M.INVOKED)
end

--- Clear ghost text in every buffer (completions turned off).
function M.clear_all()
  for _, st in pairs(states) do
    clear(st)
  end
end

--- Take the options of `setup()` and the function that tells whether completions are on.
---@param inline table
---@param is_enabled fun(): boolean
function M.configure(inline, is_enabled)
  opts = vim.tbl_extend("force", opts, inline or {})
  enabled = is_enabled or enabled
end

M.namespace = ns

return M
