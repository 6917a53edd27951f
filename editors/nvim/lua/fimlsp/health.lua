--- `:checkhealth fimlsp`: is Neovim new enough, was setup() called, can the
--- server start, are the settings valid, and what does the running server say.
local M = {}

local health = vim.health

--- The server command with `--version` instead of the transport flags.
local function version_command(cmd)
  local out = {}
  for _, arg in ipairs(cmd) do
    if arg ~= "--stdio" and arg ~= "--tcp" then
      table.insert(out, arg)
    end
  end
  table.insert(out, "--version")
  return out
end

local function check_neovim()
  health.start("Neovim")
  local v = vim.version()
  local version = ("%d.%d.%d"):format(v.major, v.minor, v.patch)
  if vim.fn.has("nvim-0.10") ~= 1 then
    health.error("Neovim " .. version .. " is too old", { "fimlsp needs Neovim 0.10 or newer" })
    return false
  end
  health.ok("Neovim " .. version)
  local fimlsp = require("fimlsp")
  if require("fimlsp.builtin").available() then
    if fimlsp.options and not fimlsp.options.inline.builtin then
      health.info("vim.lsp.inline_completion exists, but `inline.builtin = false`: the plugin draws the ghost text")
    else
      health.ok("inline completion: Neovim's vim.lsp.inline_completion")
    end
  else
    health.ok("inline completion: the plugin's ghost text (vim.lsp.inline_completion arrives in 0.12)")
  end
  return true
end

local function check_setup()
  health.start("setup")
  local fimlsp = require("fimlsp")
  local opts = fimlsp.options
  if not opts then
    health.error("setup() was not called", { 'Add require("fimlsp").setup({}) to your configuration' })
    return nil
  end
  health.ok("setup() was called; file types: " .. table.concat(opts.filetypes, ", "))
  if not fimlsp.is_enabled() then
    health.warn("completions are turned off", { ":FimlspEnable turns them on" })
  end
  local problems = require("fimlsp.config").check_settings(opts.settings)
  if #problems == 0 then
    health.ok("settings: " .. vim.inspect(opts.settings, { newline = " ", indent = "" }))
  else
    for _, problem in ipairs(problems) do
      health.warn(problem, { "See :help fimlsp-settings" })
    end
  end
  local maps = {}
  for action, lhs in pairs(opts.keymaps or {}) do
    if type(lhs) == "string" and lhs ~= "" then
      table.insert(maps, ("%s=%s"):format(action, lhs))
    end
  end
  table.sort(maps)
  health.info("insert-mode keys: " .. (#maps > 0 and table.concat(maps, " ") or "none"))
  return opts
end

local function check_server(opts)
  health.start("server")
  local cmd = opts.cmd
  if type(cmd) ~= "table" or type(cmd[1]) ~= "string" then
    health.error("`cmd` must be a list of strings, got " .. vim.inspect(cmd))
    return
  end
  if vim.fn.executable(cmd[1]) ~= 1 then
    health.error(("%q is not executable"):format(cmd[1]), {
      "Install the server from the fimlsp repository: pip install '/path/to/fimlsp[default-model]'",
      'Or point `cmd` at it: cmd = { "/path/to/venv/bin/fimlsp", "--stdio" }',
    })
    return
  end
  health.ok("command: " .. table.concat(cmd, " "))
  local ok, result = pcall(function()
    return vim.system(version_command(cmd), { text = true }):wait(15000)
  end)
  if ok and result.code == 0 then
    health.ok("server version: " .. vim.trim(result.stdout or ""))
  else
    local why = ok and vim.trim((result.stderr or "") .. " (exit " .. tostring(result.code) .. ")") or tostring(result)
    health.warn("`" .. table.concat(version_command(cmd), " ") .. "` failed: " .. why)
  end

  local util = require("fimlsp.util")
  local status = require("fimlsp.status")
  local clients = util.clients()
  if #clients == 0 then
    health.info("no server is running now; it starts with the first Python buffer")
    return
  end
  local client = clients[1]
  health.ok(("running: client %d, %d buffer(s), position encoding %s"):format(
    client.id,
    vim.tbl_count(client.attached_buffers or {}),
    tostring(client.offset_encoding)
  ))
  local response = util.request_sync(client, status.SERVER_STATUS, {}, 3000)
  local s = response and response.result
  if not s then
    health.warn("the server did not answer fimlsp/serverStatus in time")
    return
  end
  local line = ("model %s: %s"):format(tostring(s.state), tostring(s.message))
  if s.state == "ready" then
    health.ok(line)
  elseif s.state == "loading" then
    health.info(line)
  elseif s.state == "disabled" then
    health.warn(line, { ":FimlspEnable turns completions on" })
  else
    health.error(line, {
      "Check the model settings (model, modelRepo, modelFile): see :help fimlsp-settings",
      "The default model needs the server's extra: pip install '/path/to/fimlsp[default-model]'",
      "A model by name needs its extra, e.g. qwen2.5-coder-0.5b: pip install '/path/to/fimlsp[qwen-0-5b]' (see :help fimlsp-models)",
    })
  end
  health.info(("%s documents, %s requests served, %s cancelled, %.0f MB resident"):format(
    tostring(s.documents),
    tostring(s.served),
    tostring(s.cancelled),
    (tonumber(s.rssMb) or 0) + (tonumber(s.engineRssMb) or 0)
  ))
end

function M.check()
  if not check_neovim() then
    return
  end
  local opts = check_setup()
  if opts then
    check_server(opts)
  end
end

return M
