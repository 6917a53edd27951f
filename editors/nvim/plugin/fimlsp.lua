-- fimlsp's user commands, available before `require("fimlsp").setup()`; the
-- server itself starts only once setup() ran (see :help fimlsp-setup).
if vim.g.loaded_fimlsp then
  return
end
vim.g.loaded_fimlsp = true

if vim.fn.has("nvim-0.10") ~= 1 then
  vim.api.nvim_echo({ { "fimlsp needs Neovim 0.10 or newer", "WarningMsg" } }, true, {})
  return
end

require("fimlsp.commands").create()
