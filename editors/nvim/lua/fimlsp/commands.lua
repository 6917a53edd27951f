--- The user commands (`:FimlspStatus`, `:FimlspEnable`, ...).
---
--- plugin/fimlsp.lua creates them at startup so that they exist before
--- `setup()` and can say what is missing; `setup()` creates them again for
--- installs that put the plugin on 'runtimepath' too late for plugin/ files.
local M = {}

--- Run `fn(fimlsp)`, or tell the user to call setup() first.
local function with_setup(fn)
  return function()
    local fimlsp = require("fimlsp")
    if not fimlsp.options then
      vim.notify("fimlsp: call require('fimlsp').setup() first", vim.log.levels.WARN)
      return
    end
    fn(fimlsp)
  end
end

local commands = {
  FimlspStatus = {
    function()
      require("fimlsp").show_status()
    end,
    "Show the state of the fimlsp server and of the last completion",
  },
  FimlspEnable = {
    with_setup(function(m)
      m.enable()
    end),
    "Turn fimlsp completions on",
  },
  FimlspDisable = {
    with_setup(function(m)
      m.disable()
    end),
    "Turn fimlsp completions off",
  },
  FimlspToggle = {
    with_setup(function(m)
      m.toggle()
    end),
    "Turn fimlsp completions on or off",
  },
  FimlspRestart = {
    with_setup(function(m)
      m.restart()
    end),
    "Restart the fimlsp server",
  },
}

--- Create (or re-create) every command.
function M.create()
  for name, spec in pairs(commands) do
    vim.api.nvim_create_user_command(name, spec[1], { desc = spec[2], force = true })
  end
end

return M
