--- Options of the plugin and the server settings they carry.
---
--- The plugin's own options (command, keymaps, ghost text) are kept apart from
--- `settings`, which go to the server unchanged: as `initializationOptions` and
--- as section `fimlsp` of `workspace/configuration`.  The server ignores (and
--- reports) bad values; we check them here as well so that `:checkhealth`
--- can point at a typo before the server even starts.
local M = {}

--- Defaults for `require("fimlsp").setup()`.
---@class fimlsp.Options
M.defaults = {
  --- How to start the server; one process serves every Python buffer.
  cmd = { "fimlsp", "--stdio" },
  --- Extra environment for the server process (for example `FIMLSP_CACHE_DIR`).
  cmd_env = nil,
  --- File types that get the server.
  filetypes = { "python" },
  --- Files that mark a project root (the server's workspace folder).
  root_markers = { "pyproject.toml", "setup.py", "setup.cfg", ".git" },
  --- Server settings, camelCase as in the server's documentation.
  settings = {},
  inline = {
    --- Use Neovim's own `vim.lsp.inline_completion` where it exists (0.12+).
    builtin = true,
    --- Ask for a completion by itself while typing (the plugin's renderer).
    auto_trigger = true,
    --- Wait this long after the last keystroke before asking (milliseconds).
    debounce_ms = 100,
    --- Hide ghost text while the completion popup menu is open.
    hide_during_popup = true,
  },
  --- Insert-mode keys; `false` leaves a key unmapped.  Each key falls back to
  --- its usual meaning when no ghost text is shown.
  keymaps = {
    accept = "<Tab>",
    accept_word = "<M-w>",
    accept_line = "<M-l>",
    dismiss = "<C-]>",
    next = "<M-]>",
    prev = "<M-[>",
    trigger = "<M-\\>",
  },
  --- Called as `on_attach(client, bufnr)` after the plugin's own attach.
  on_attach = nil,
  --- Extra client capabilities, merged into Neovim's defaults.
  capabilities = nil,
}

--- Every server setting and a check of its value (mirrors lsp_server/settings.py).
local function int_in(low, high)
  return function(v)
    return type(v) == "number" and v == math.floor(v) and v >= low and v <= high,
      ("an integer in %d..%d"):format(low, high)
  end
end

local function one_of(...)
  local choices = { ... }
  return function(v)
    return vim.tbl_contains(choices, v), "one of " .. table.concat(choices, ", ")
  end
end

local function optional_string(v)
  return v == nil or v == vim.NIL or type(v) == "string", "a string"
end

local function boolean(v)
  return type(v) == "boolean", "true or false"
end

M.server_settings = {
  enable = boolean,
  model = optional_string,
  modelRepo = optional_string,
  modelFile = optional_string,
  gpuLayers = function(v)
    return v == nil or v == vim.NIL or v == -1 or int_in(0, 100000)(v), "-1 (all) or 0..100000"
  end,
  contextSize = int_in(256, 1048576),
  threads = int_in(0, 512),
  maxTokens = int_in(1, 4096),
  deadlineMs = int_in(50, 600000),
  topK = int_in(1, 1048576),
  mode = one_of("constrained", "unconstrained", "checked", "heuristic"),
  lineMode = one_of("auto", "single", "multi"),
  pythonVersion = one_of("auto", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14", "3.15"),
  maxDocumentChars = int_in(1, 2147483648),
  stayInside = boolean,
  witnessEnding = boolean,
  knownNames = boolean,
  projectContext = boolean,
  projectContextShare = function(v)
    return type(v) == "number" and v >= 0 and v <= 1, "a number in 0..1"
  end,
  apiKey = optional_string,
  serverApi = one_of("auto", "llama.cpp", "openai"),
  modelVocab = optional_string,
}

--- Problems with server settings, as readable lines (empty when all is well).
---@param settings table
---@return string[]
function M.check_settings(settings)
  local problems = {}
  for key, value in pairs(settings or {}) do
    local check = M.server_settings[key]
    if not check then
      table.insert(problems, ("unknown setting %q"):format(tostring(key)))
    else
      local ok, expected = check(value)
      if not ok then
        table.insert(problems, ("setting %s = %s: expected %s"):format(key, vim.inspect(value), expected))
      end
    end
  end
  table.sort(problems)
  return problems
end

--- The settings as the server gets them: a copy whose `enable` follows the
--- plugin's on/off state (`:FimlspEnable` must win over `enable = false` given
--- to setup()), and a JSON object even when empty (an empty Lua table would be
--- sent as `[]`, which the server rejects).
---@param settings table
---@param enabled boolean
---@return table
function M.payload(settings, enabled)
  local out = vim.deepcopy(settings or {})
  out.enable = nil
  if not enabled then
    out.enable = false
  end
  if next(out) == nil then
    return vim.empty_dict()
  end
  return out
end

--- Options merged over the defaults.  `settings = { fimlsp = {...} }` (the shape
--- of `vim.lsp.config`) is accepted as well as the flat table.
---@param user table|nil
---@return fimlsp.Options
function M.resolve(user)
  user = vim.deepcopy(user or {})
  local settings = user.settings or {}
  if type(settings.fimlsp) == "table" then
    settings = settings.fimlsp
  end
  user.settings = nil
  -- Lists replace the defaults instead of merging index by index.
  local opts = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), user)
  for _, key in ipairs({ "cmd", "filetypes", "root_markers" }) do
    if user[key] ~= nil then
      opts[key] = user[key]
    end
  end
  opts.settings = settings
  if type(opts.cmd) == "string" then
    opts.cmd = { opts.cmd, "--stdio" }
  end
  return opts
end

return M
