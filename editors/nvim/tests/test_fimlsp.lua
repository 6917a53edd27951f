--- End-to-end tests of the fimlsp plugin in a headless Neovim, against the real
--- server and a tiny real model.  Run by tests/test_nvim.py, which reads the
--- results; by hand:
---
---   FIMLSP_NVIM_RESULTS=/tmp/r.json FIMLSP_NVIM_MODEL=/path/tiny.gguf \
---   FIMLSP_NVIM_PYTHON=$(which python) FIMLSP_NVIM_WORKDIR=/tmp/w \
---   nvim --headless --clean --cmd 'set rtp^=editors/nvim' -c 'luafile editors/nvim/tests/test_fimlsp.lua'
---
--- Keys are typed with `nvim_input`, so they go through the plugin's mappings
--- and autocommands as a user's keys would.  Cases that need a response to
--- arrive after the buffer moved on set 'eventignore' so that the plugin's
--- autocommands do not cancel the request first: that is the race the stale
--- check exists for.
local here = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h")
local H = dofile(here .. "/harness.lua")

local api = vim.api
local case, wait, sleep, keys = H.case, H.wait, H.sleep, H.keys

local workdir = assert(vim.env.FIMLSP_NVIM_WORKDIR, "set $FIMLSP_NVIM_WORKDIR")
local READY_MS = 60000 -- loading the tiny model takes a second or two, more on a busy machine
local GHOST_MS = 20000 -- a completion takes well under a second; leave room for slow CI

local fimlsp, ghost ---@module "fimlsp", "fimlsp.ghost"

-- ------------------------------------------------------------------ helpers

local function client()
  return vim.lsp.get_clients({ name = "fimlsp" })[1]
end

local function request_sync(c, method, params)
  if vim.fn.has("nvim-0.11") == 1 then
    return c:request_sync(method, params, 5000, 0)
  end
  return c.request_sync(method, params, 5000, 0)
end

--- `fimlsp/serverStatus` (with the current buffer's document).
local function server_status()
  local c = assert(client(), "no fimlsp client")
  local response = request_sync(c, "fimlsp/serverStatus", { uri = vim.uri_from_bufnr(0) })
  return response and response.result
end

local function wait_state(state)
  return wait(function()
    local s = server_status()
    return s and s.state == state and s
  end, READY_MS, "server state " .. state)
end

local function buffer_text(bufnr)
  return table.concat(api.nvim_buf_get_lines(bufnr or 0, 0, -1, false), "\n") .. "\n"
end

local function normal_mode()
  if api.nvim_get_mode().mode ~= "n" then
    keys("<Esc>")
    wait(function()
      return api.nvim_get_mode().mode == "n"
    end, 2000, "Normal mode")
  end
end

local opened = 0

--- Edit a new file with `lines` and wait until the server has it.
local function open(name, lines)
  normal_mode()
  opened = opened + 1
  local path = ("%s/%02d_%s.py"):format(workdir, opened, name)
  vim.fn.writefile(lines, path)
  vim.cmd.edit(vim.fn.fnameescape(path))
  local bufnr = api.nvim_get_current_buf()
  wait(function()
    return #vim.lsp.get_clients({ name = "fimlsp", bufnr = bufnr }) > 0
  end, READY_MS, "the client to attach")
  return bufnr
end

--- Enter Insert mode with the cursor at (1-based row, byte col).
local function insert_at(row, col)
  normal_mode()
  api.nvim_win_set_cursor(0, { row, col })
  keys("i")
  wait(function()
    return api.nvim_get_mode().mode == "i"
  end, 2000, "Insert mode")
end

--- Enter Insert mode at the end of line `row`.
local function append_at(row)
  normal_mode()
  api.nvim_win_set_cursor(0, { row, 0 })
  keys("A")
  wait(function()
    return api.nvim_get_mode().mode == "i"
  end, 2000, "Insert mode")
end

local function marks(bufnr)
  return api.nvim_buf_get_extmarks(bufnr or 0, ghost.namespace, 0, -1, { details = true })
end

local function wait_ghost(bufnr)
  return wait(function()
    return ghost.current(bufnr or 0)
  end, GHOST_MS, "ghost text")
end

local function wait_no_ghost(bufnr)
  wait(function()
    return not ghost.visible(bufnr or 0) and #marks(bufnr) == 0
  end, 2000, "the ghost text to go")
end

local function cursor()
  local c = api.nvim_win_get_cursor(0)
  return { c[1] - 1, c[2] }
end

--- The buffer text as it will be once `text` is inserted at 0-based (row, col).
local function with_inserted(bufnr, row, col, text)
  local lines = api.nvim_buf_get_lines(bufnr, 0, -1, false)
  local line = lines[row + 1]
  local new = vim.split(line:sub(1, col) .. text .. line:sub(col + 1), "\n", { plain = true })
  local out = {}
  vim.list_extend(out, lines, 1, row)
  vim.list_extend(out, new)
  vim.list_extend(out, lines, row + 2, #lines)
  return table.concat(out, "\n") .. "\n"
end

local function stats()
  return vim.deepcopy(ghost.stats)
end

--- Ask for a completion with the plugin's autocommands off, run `change`, and
--- wait for the answer.
local function request_then(bufnr, change)
  vim.o.eventignore = "all"
  local ok, before, after = pcall(function()
    append_at(2)
    local before = stats()
    local cleared = #marks(bufnr) == 0
    assert(ghost.request(bufnr), "request not sent")
    change()
    wait(function()
      return ghost.stats.responses > before.responses
    end, GHOST_MS, "the response")
    sleep(50)
    local after = stats()
    assert(cleared, "ghost text before the request")
    return before, after
  end)
  vim.o.eventignore = ""
  if not ok then
    error(before, 0)
  end
  return before, after
end

local F_LINES = { "def f(x):", "    return (x +", "", "print(f(1))" }

-- ------------------------------------------------------------------ setup

local function setup()
  fimlsp = require("fimlsp")
  ghost = require("fimlsp.ghost")
  fimlsp.setup({
    cmd = { assert(vim.env.FIMLSP_NVIM_PYTHON), "-m", "lsp_server.cli", "--stdio" },
    settings = {
      model = assert(vim.env.FIMLSP_NVIM_MODEL),
      deadlineMs = 8000,
      maxTokens = 48,
      -- the random-weight test model writes arbitrary names, which knownNames refuses
      knownNames = false,
    },
    -- The plugin's renderer everywhere; builtin_renderer tries Neovim's (0.12+).
    inline = { builtin = false, debounce_ms = 30 },
  })
end

-- ------------------------------------------------------------------ cases

case("unit_helpers", function(t)
  local util = require("fimlsp.util")
  local line = "a\195\169\240\159\152\128b" -- "aé😀b": 1, 2 and 4 bytes
  t.eq(util.byte_col(line, 2, "utf-16"), 3, "after é in UTF-16")
  t.eq(util.byte_col(line, 4, "utf-16"), 7, "after the emoji in UTF-16 (a surrogate pair)")
  t.eq(util.byte_col(line, 3, "utf-32"), 7, "after the emoji in UTF-32")
  t.eq(util.byte_col(line, 3, "utf-8"), 3, "UTF-8 columns are bytes")
  t.eq(util.byte_col(line, 99, "utf-16"), #line, "past the end")
  local config = require("fimlsp.config")
  t.eq(config.check_settings({ maxTokens = 48, mode = "checked", pythonVersion = "3.8" }), {})
  t.eq(#config.check_settings({ maxTokenz = 1, mode = "fast", threads = -1 }), 3)
  local opts = config.resolve({ settings = { fimlsp = { model = "m.gguf" } }, cmd = { "x" } })
  t.eq(opts.settings, { model = "m.gguf" }, "settings = { fimlsp = ... } is unwrapped")
  t.eq(opts.cmd, { "x" }, "cmd replaces the default list")
  t.eq(opts.keymaps.accept, "<Tab>")
  t.eq(vim.json.encode(config.payload({}, true)), "{}", "no settings: an empty object, not []")
  t.eq(config.payload({ maxTokens = 8 }, false), { maxTokens = 8, enable = false })
  t.eq(config.payload({ enable = false }, true), vim.empty_dict(), ":FimlspEnable wins")
end)

case("plugin_loaded", function(t)
  for _, name in ipairs({ "FimlspStatus", "FimlspEnable", "FimlspDisable", "FimlspToggle", "FimlspRestart" }) do
    t.eq(vim.fn.exists(":" .. name), 2, name .. " is defined")
  end
  t.eq(vim.g.loaded_fimlsp, true, "plugin/fimlsp.lua was sourced")
  t.ok(fimlsp.options, "setup() ran")
  t.eq(fimlsp.renderer(), "ghost", "inline.builtin = false: the plugin's renderer")
end)

case("server_starts", function(t)
  local bufnr = open("start", F_LINES)
  local s = wait_state("ready")
  local c = client()
  t.data.encoding = c.offset_encoding
  t.data.document = s.document
  t.eq(#vim.lsp.get_clients({ name = "fimlsp" }), 1, "one server")
  t.eq(s.document.sha256, vim.fn.sha256(buffer_text(bufnr)), "the server has the buffer's text")
  -- The state arrives with fimlsp/status.
  wait(function()
    return fimlsp.status() == "fimlsp: ready"
  end, 5000, "status() to say ready")
  -- A second Python buffer reuses the server.
  open("second", { "x = 1" })
  t.eq(#vim.lsp.get_clients({ name = "fimlsp" }), 1, "still one server")
end)

case("ghost_text_appears", function(t)
  local bufnr = open("ghost", F_LINES)
  append_at(2)
  local cur = wait_ghost(bufnr)
  local m = marks(bufnr)
  t.eq(#m, 1, "one extmark")
  local row, col, details = m[1][2], m[1][3], m[1][4]
  t.eq({ row, col }, { 1, #F_LINES[2] }, "at the cursor")
  t.eq({ cur.row, cur.col }, { 1, #F_LINES[2] })
  t.eq(details.virt_text_pos, "inline")
  local lines = vim.split(cur.text, "\n", { plain = true })
  t.eq(details.virt_text[1][1], lines[1], "first line inline")
  t.eq(details.virt_text[1][2], "FimlspGhost")
  t.eq(#(details.virt_lines or {}), #lines - 1, "other lines below")
  t.eq(buffer_text(bufnr), table.concat(F_LINES, "\n") .. "\n", "ghost text is not in the buffer")
  t.eq(server_status().document.sha256, vim.fn.sha256(buffer_text(bufnr)))
  t.data.before = buffer_text(bufnr)
  t.data.text = cur.text
end)

case("accept_inserts", function(t)
  local bufnr = api.nvim_get_current_buf()
  local cur = t.ok(ghost.current(bufnr), "ghost text from the previous case")
  local expected = with_inserted(bufnr, cur.row, cur.col, cur.text)
  local accepted = ghost.stats.accepted
  keys("<Tab>")
  wait(function()
    return ghost.stats.accepted > accepted
  end, 2000, "the accept")
  wait_no_ghost(bufnr)
  t.eq(buffer_text(bufnr), expected, "the suggestion is inserted at the cursor")
  local lines = vim.split(cur.text, "\n", { plain = true })
  local end_col = (#lines == 1 and cur.col or 0) + #lines[#lines]
  t.eq(cursor(), { cur.row + #lines - 1, end_col }, "the cursor is after it")
  t.eq(api.nvim_get_mode().mode, "i", "still in Insert mode")
  t.data.after = buffer_text(bufnr)
  -- The server's copy follows (didChange).
  wait(function()
    return server_status().document.sha256 == vim.fn.sha256(buffer_text(bufnr))
  end, 5000, "the server to have the new text")
  -- No new suggestion pops up for the position just accepted.
  sleep(200)
  t.ok(not ghost.visible(bufnr), "no new ghost text without typing")
end)

case("tab_falls_back", function(t)
  local bufnr = api.nvim_get_current_buf()
  t.ok(not ghost.visible(bufnr), "no ghost text")
  local row = cursor()[1]
  local before = api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1]
  keys("<Tab>")
  wait(function()
    return api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] ~= before
  end, 2000, "<Tab> to do its usual work")
  local after = api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1]
  t.data.before, t.data.after = before, after
  t.ok(after:sub(1, #before) == before, "text was added at the end of the line")
  t.ok(after:sub(#before + 1):match("^%s+$"), "whitespace was added: " .. vim.inspect(after))
end)

case("dismiss_clears", function(t)
  local bufnr = open("dismiss", F_LINES)
  append_at(2)
  wait_ghost(bufnr)
  keys("<C-]>")
  wait_no_ghost(bufnr)
  t.eq(buffer_text(bufnr), table.concat(F_LINES, "\n") .. "\n", "buffer unchanged")
  t.eq(api.nvim_get_mode().mode, "i", "still in Insert mode")
  local requests = ghost.stats.requests
  sleep(300)
  t.ok(not ghost.visible(bufnr), "it does not come back by itself")
  t.eq(ghost.stats.requests, requests, "no new request without an edit")
  -- Typing asks again.
  keys("<Space>")
  wait_ghost(bufnr)
end)

case("leaving_insert_clears", function(t)
  local bufnr = open("leave", F_LINES)
  append_at(2)
  wait_ghost(bufnr)
  keys("<Esc>")
  wait(function()
    return api.nvim_get_mode().mode == "n"
  end, 2000, "Normal mode")
  wait_no_ghost(bufnr)
  t.eq(buffer_text(bufnr), table.concat(F_LINES, "\n") .. "\n", "buffer unchanged")
end)

case("stale_response_after_edit_is_dropped", function(t)
  local bufnr = open("stale_edit", F_LINES)
  local before, after = request_then(bufnr, function()
    -- An edit elsewhere: the changedtick moves, the cursor stays.
    api.nvim_buf_set_lines(bufnr, -1, -1, false, { "# edited" })
  end)
  t.eq(after.dropped, before.dropped + 1, "the response is dropped")
  t.eq(after.shown, before.shown, "nothing is shown")
  t.eq(#marks(bufnr), 0, "no extmark")
  t.data.stats = { before = before, after = after }
end)

case("stale_response_after_cursor_move_is_dropped", function(t)
  local bufnr = open("stale_cursor", F_LINES)
  local before, after = request_then(bufnr, function()
    api.nvim_win_set_cursor(0, { 1, 0 })
  end)
  t.eq(after.dropped, before.dropped + 1, "the response is dropped")
  t.eq(after.shown, before.shown, "nothing is shown")
  t.eq(#marks(bufnr), 0, "no extmark")
end)

case("newer_request_wins", function(t)
  local bufnr = open("newer", F_LINES)
  local before, after = request_then(bufnr, function()
    ghost.request(bufnr) -- cancels the first
  end)
  wait_ghost(bufnr)
  sleep(300)
  after = stats()
  t.eq(after.requests, before.requests + 2)
  t.eq(after.cancelled, before.cancelled + 1, "the first request is cancelled")
  t.eq(after.shown, before.shown + 1, "only the newer answer is shown")
  t.eq(#marks(bufnr), 1, "one extmark")
end)

case("typing_along_and_accept_word", function(t)
  local lines = { 's = ("é" +', "" }
  local bufnr = open("along", lines)
  append_at(1)
  local cur = wait_ghost(bufnr)
  t.data.text = cur.text
  t.eq({ cur.row, cur.col }, { 0, #lines[1] }, "anchored after the multibyte é")
  local expected = with_inserted(bufnr, 0, #lines[1], cur.text)
  local first = cur.text:sub(1, 1)
  t.ok(first:match("^[%w_ ()%[%]+.,:]$"), "a plain first character: " .. vim.inspect(cur.text))
  t.ok(#cur.text >= 2, "long enough to type along: " .. vim.inspect(cur.text))
  local requests = ghost.stats.requests
  keys(first == " " and "<Space>" or first)
  local rest = wait(function()
    local now = ghost.current(bufnr)
    return now and now.text ~= cur.text and now
  end, 2000, "the rest of the suggestion")
  t.eq(rest.text, cur.text:sub(2), "the rest stays shown")
  t.eq({ rest.row, rest.col }, { 0, #lines[1] + 1 }, "anchored at the new cursor")
  t.eq(ghost.stats.requests, requests, "no request for typing along")
  -- Accept the next word, then the rest.
  local word = rest.text:match("^%s*[%w_\128-\255]+") or rest.text:match("^%s*[^%w_%s\128-\255]+")
  keys("<M-w>")
  wait(function()
    local line = api.nvim_buf_get_lines(bufnr, 0, 1, false)[1]
    return line == lines[1] .. first .. word
  end, 2000, "the word to be inserted")
  if #word < #rest.text then
    local left = wait_ghost(bufnr)
    t.eq(left.text, rest.text:sub(#word + 1), "the rest after the word")
    keys("<Tab>")
    wait_no_ghost(bufnr)
  end
  t.eq(buffer_text(bufnr), expected, "typed, word and rest give the suggestion")
  t.data.after = buffer_text(bufnr)
end)

case("multi_line_ghost_text", function(t)
  -- "else:" cannot follow on the line: the middle needs a line break.
  local lines = { "if x:else:", "    pass" }
  local bufnr = open("multi", lines)
  insert_at(1, 5)
  local cur = wait_ghost(bufnr)
  t.data.text = cur.text
  t.ok(cur.text:find("\n", 1, true), "a multi-line suggestion: " .. vim.inspect(cur.text))
  local parts = vim.split(cur.text, "\n", { plain = true })
  local details = marks(bufnr)[1][4]
  t.eq(details.virt_text[1][1], parts[1], "first line inline")
  t.eq(#details.virt_lines, #parts - 1, "one virtual line per further line")
  for i = 2, #parts do
    t.eq(details.virt_lines[i - 1][1][1], parts[i], "virtual line " .. (i - 1))
  end
  -- Next/previous with a single suggestion keep it.
  keys("<M-]>")
  sleep(50)
  t.eq(ghost.current(bufnr).text, cur.text, "cycling one suggestion keeps it")
  -- Accept the first line, then the rest.
  local expected = with_inserted(bufnr, 0, 5, cur.text)
  keys("<M-l>")
  wait(function()
    local now = ghost.current(bufnr)
    return now and now.text ~= cur.text
  end, 2000, "the rest after the first line")
  if parts[1] ~= "" then
    t.eq(api.nvim_buf_get_lines(bufnr, 0, 1, false)[1], "if x:" .. parts[1] .. "else:", "the first line")
  else -- at a line end, the line break and the next line
    t.eq(api.nvim_buf_get_lines(bufnr, 0, 2, false), { "if x:", parts[2] .. "else:" }, "the next line")
  end
  keys("<Tab>")
  wait_no_ghost(bufnr)
  t.eq(buffer_text(bufnr), expected, "line by line gives the same text")
  t.data.after = buffer_text(bufnr)
end)

case("status", function(t)
  local line = fimlsp.status()
  t.ok(line:match("^fimlsp: "), "status(): " .. line)
  local data = fimlsp.status_data()
  t.eq(data.server.state, "ready")
  local last = t.ok(data.last, "figures of the last completion")
  for _, key in ipairs({ "uri", "stopReason", "tokens", "timeToFirstTokenMs", "tokensPerSecond", "elapsedMs" }) do
    t.ok(last[key] ~= nil, "fimlsp/status has " .. key)
  end
  local out = api.nvim_exec2("FimlspStatus", { output = true }).output
  t.ok(out:find("fimlsp: ready", 1, true), ":FimlspStatus: " .. out)
  t.ok(out:find("last completion", 1, true), ":FimlspStatus: " .. out)
  t.ok(out:find("documents", 1, true), ":FimlspStatus asks the server: " .. out)
  t.data.status = line
  t.data.command = out
end)

case("disable_and_enable", function(t)
  local bufnr = open("toggle", F_LINES)
  vim.cmd("FimlspDisable")
  wait_state("disabled")
  t.eq(fimlsp.status(), "fimlsp: off")
  local requests = ghost.stats.requests
  append_at(2)
  keys("<Space>")
  sleep(300)
  t.eq(ghost.stats.requests, requests, "no requests while disabled")
  t.ok(not ghost.visible(bufnr))
  normal_mode()
  vim.cmd("FimlspEnable")
  wait_state("ready")
  append_at(2)
  wait_ghost(bufnr)
end)

case("checkhealth", function(t)
  normal_mode()
  vim.cmd("checkhealth fimlsp")
  local text = table.concat(api.nvim_buf_get_lines(0, 0, -1, false), "\n")
  t.data.health = text
  vim.cmd("bwipeout!")
  t.ok(text:find("OK Neovim 0.", 1, true), "the Neovim section")
  t.ok(text:find("setup() was called", 1, true), "the setup section")
  t.ok(text:find("model ready", 1, true), "the server's state")
  t.ok(text:find("server version: fimlsp", 1, true), "the server's version")
  t.ok(not text:find("ERROR"), "no errors")
end)

case("help_tags", function(t)
  -- Build the tags in a copy: the plugin's own doc/ stays untouched.
  local root = workdir .. "/help"
  vim.fn.mkdir(root .. "/doc", "p")
  local source = vim.api.nvim_get_runtime_file("doc/fimlsp.txt", false)[1]
  t.ok(source, "doc/fimlsp.txt on the runtimepath")
  vim.fn.writefile(vim.fn.readfile(source), root .. "/doc/fimlsp.txt")
  vim.cmd("helptags " .. vim.fn.fnameescape(root .. "/doc"))
  vim.opt.runtimepath:prepend(root)
  local doc = table.concat(vim.fn.readfile(source), "\n")
  local missing = {}
  local checked = 0
  for tag in doc:gmatch("|([^|%s]+)|") do
    if tag:match("^fimlsp") or tag:match("^:Fimlsp") then
      checked = checked + 1
      if not pcall(vim.cmd.help, tag) then
        table.insert(missing, tag)
      end
    end
  end
  t.eq(missing, {}, "every |fimlsp...| reference has a tag")
  t.ok(checked >= 5, "the help refers to its own sections")
  vim.cmd.help("fimlsp")
  t.ok(api.nvim_buf_get_name(0):match("fimlsp%.txt$"), ":help fimlsp opens the plugin's help")
  for _, tag in ipairs({ "fimlsp-setup", "fimlsp-settings", "fimlsp-keymaps", ":FimlspStatus", "fimlsp.status()" }) do
    t.ok(pcall(vim.cmd.help, tag), "tag " .. tag)
  end
  vim.cmd("helpclose")
end)

case("restart_with_utf16", function(t)
  local old = client()
  -- Offer only UTF-16 this time, so that columns after é and 😀 differ from bytes.
  fimlsp.options.capabilities = { general = { positionEncodings = { "utf-16" } } }
  vim.cmd("FimlspRestart")
  local new = wait(function()
    local c = client()
    return c and c.id ~= old.id and c
  end, READY_MS, "a new client")
  t.eq(new.offset_encoding, "utf-16")
  local lines = { 's = "😀é" + (len("é") +', "" }
  local bufnr = open("utf16", lines)
  wait_state("ready")
  append_at(1)
  local cur = wait_ghost(bufnr)
  t.eq({ cur.row, cur.col }, { 0, #lines[1] }, "anchored at the cursor")
  local expected = with_inserted(bufnr, 0, #lines[1], cur.text)
  keys("<Tab>")
  wait_no_ghost(bufnr)
  t.eq(buffer_text(bufnr), expected)
  t.data.after = buffer_text(bufnr)
  t.data.text = cur.text
end)

case("builtin_renderer", function(t)
  local builtin = require("fimlsp.builtin")
  if not builtin.available() then
    t.data.skipped = "this Neovim has no vim.lsp.inline_completion (it arrived in 0.12)"
    return
  end
  normal_mode()
  local old = client()
  fimlsp.options.inline.builtin = true
  vim.cmd("FimlspRestart")
  wait(function()
    local c = client()
    return c and c.id ~= old.id and c
  end, READY_MS, "a new client")
  t.eq(fimlsp.renderer(), "builtin")
  local bufnr = open("builtin", F_LINES)
  wait_state("ready")
  append_at(2)
  wait(function()
    return builtin.visible(bufnr)
  end, GHOST_MS, "Neovim's ghost text")
  t.eq(#marks(bufnr), 0, "the plugin draws nothing itself")
  local before = buffer_text(bufnr)
  keys("<Tab>")
  wait(function()
    return buffer_text(bufnr) ~= before
  end, 5000, "the accept")
  t.data.after = buffer_text(bufnr)
end)

H.run(setup)
