--- A small test runner for headless Neovim, driven through the real main loop.
---
--- Cases run one after another inside a coroutine.  Waiting (`H.sleep`,
--- `H.wait`) yields back to Neovim's event loop, so typed keys (`H.keys`, which
--- uses `nvim_input`) go through mappings, Insert mode and autocommands exactly
--- as when a user types them, and LSP messages arrive meanwhile.
---
--- Results are written as JSON to `$FIMLSP_NVIM_RESULTS`:
--- `{ cases = { {name, ok, error, data, ms}, ... }, finished = true }`; pytest
--- reads them.  A watchdog writes what it has and quits if a run hangs.
local H = {}

local uv = vim.uv or vim.loop

local cases = {} ---@type {name: string, fn: fun(t: table)}[]
local results = {} ---@type table[]
local runner ---@type thread?

--- Register a case; `fn(t)` gets assertion helpers and a `t.data` table whose
--- contents end up in the results (for checks on the Python side).
function H.case(name, fn)
  table.insert(cases, { name = name, fn = fn })
end

local function resume(co)
  local ok, err = coroutine.resume(co)
  if not ok then
    -- Errors inside cases are caught by xpcall; this is the runner itself failing.
    H.finish("runner crashed: " .. tostring(err))
  end
end

--- Give the event loop `ms` milliseconds.
function H.sleep(ms)
  local co = assert(coroutine.running(), "H.sleep outside a case")
  vim.defer_fn(function()
    resume(co)
  end, ms)
  coroutine.yield()
end

--- Wait until `cond()` is truthy (checked every 10 ms); fail after `timeout_ms`.
---@return any the value of cond()
function H.wait(cond, timeout_ms, what)
  local deadline = uv.hrtime() + (timeout_ms or 10000) * 1e6
  while true do
    local value = cond()
    if value then
      return value
    end
    if uv.hrtime() > deadline then
      error(("timed out after %d ms waiting for %s"):format(timeout_ms or 10000, what or "a condition"), 2)
    end
    H.sleep(10)
  end
end

--- Type keys (`<Tab>`, `<Esc>`, `A`, ...) as a user would.
function H.keys(keys)
  vim.api.nvim_input(keys)
end

--- Assertion helpers handed to each case.
local function new_t()
  local t = { data = {} }
  function t.ok(cond, msg)
    if not cond then
      error(msg or "assertion failed", 2)
    end
    return cond
  end
  function t.eq(actual, expected, msg)
    if not vim.deep_equal(actual, expected) then
      error(
        ("%sexpected %s, got %s"):format(msg and (msg .. ": ") or "", vim.inspect(expected), vim.inspect(actual)),
        2
      )
    end
  end
  return t
end

local function write(extra)
  local path = assert(vim.env.FIMLSP_NVIM_RESULTS, "set $FIMLSP_NVIM_RESULTS")
  local doc = vim.tbl_extend("force", { cases = results, finished = false }, extra or {})
  local file = assert(io.open(path, "w"))
  file:write(vim.json.encode(doc))
  file:close()
end

local finished = false

--- Write the results and quit Neovim (stopping the language servers first).
function H.finish(problem)
  if finished then
    return
  end
  finished = true
  write({ finished = problem == nil, problem = problem })
  local clients = vim.lsp.get_clients()
  for _, client in ipairs(clients) do
    pcall(function()
      if vim.fn.has("nvim-0.11") == 1 then
        client:stop()
      else
        client.stop()
      end
    end)
  end
  vim.wait(3000, function()
    return #vim.lsp.get_clients() == 0
  end, 20)
  vim.cmd("qall!")
end

--- Run every case whose name matches `$FIMLSP_NVIM_ONLY` (a Lua pattern; all if unset).
---@param setup fun()? called (inside the coroutine) before the first case
function H.run(setup)
  local watchdog_ms = tonumber(vim.env.FIMLSP_NVIM_TIMEOUT_MS) or 120000
  vim.defer_fn(function()
    H.finish(("watchdog: the run took more than %d ms"):format(watchdog_ms))
  end, watchdog_ms)
  local only = vim.env.FIMLSP_NVIM_ONLY
  runner = coroutine.create(function()
    if setup then
      local ok, err = xpcall(setup, debug.traceback)
      if not ok then
        H.finish("setup failed: " .. tostring(err))
        return
      end
    end
    for _, case in ipairs(cases) do
      if not only or only == "" or case.name:match(only) then
        local t = new_t()
        local started = uv.hrtime()
        local ok, err = xpcall(case.fn, debug.traceback, t)
        table.insert(results, {
          name = case.name,
          ok = ok,
          error = not ok and tostring(err) or nil,
          data = t.data,
          ms = math.floor((uv.hrtime() - started) / 1e6),
        })
        write() -- keep what we have if a later case hangs
      end
    end
    H.finish()
  end)
  resume(runner)
end

return H
