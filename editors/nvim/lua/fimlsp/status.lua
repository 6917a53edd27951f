--- What the server last said through `fimlsp/status`, for statuslines and
--- `:FimlspStatus`.
---
--- The server sends the notification when the model's state changes (params:
--- `state`, `message`) and after every completion (params: `uri`, `state`,
--- `stopReason`, `tokens`, timings, `lineMode`, `complete`, ...).  We keep the
--- latest of each kind, so that a statusline can show both "ready" and the
--- figures of the last completion.
local M = {}

--- The notification the server sends after each completion and state change.
M.NOTIFICATION = "fimlsp/status"
--- The request that returns what the server holds (counters, memory, a document's hash).
M.SERVER_STATUS = "fimlsp/serverStatus"

--- The server's model states (`lsp_server.status.EngineState`, in the same order).
M.ENGINE_STATES = { "idle", "loading", "ready", "error", "disabled", "unavailable" }

--- Why a completion request ended (`lsp_server.status.StopReason`, in the same order).
M.STOP_REASONS = {
  "eos",
  "connected",
  "steered",
  "repeats_right",
  "likeliest_end",
  "unsure_line",
  "witness",
  "max_tokens",
  "no_viable_token",
  "deadline",
  "cancelled",
  "checked_prefix",
  "heuristic_cut",
  "reused",
  "no_middle_fits",
  "too_large",
  "no_model",
  "disabled",
}

--- What the statusline says instead of figures after these stop reasons.
local REASON_LINES = {
  no_middle_fits = "fimlsp: no fit",
  cancelled = "fimlsp: ready",
  reused = "fimlsp: reused",
}

--- Server state: one of `M.ENGINE_STATES` (nil before the first word).
---@type {state: string?, message: string?}
M.server = {}

--- The last completion's figures (a copy of the notification's params).
---@type table?
M.last = nil

--- Latest completion figures per document URI.
---@type table<string, table>
M.by_uri = {}

--- Forget everything (the server was stopped or restarted).
function M.reset()
  M.server = {}
  M.last = nil
  M.by_uri = {}
end

--- Handler for the `fimlsp/status` notification.
function M.handler(_, params, _)
  if type(params) ~= "table" then
    return
  end
  local changed_state = false
  if params.tokens ~= nil or params.stopReason ~= nil then
    M.last = params
    if type(params.uri) == "string" then
      M.by_uri[params.uri] = params
    end
  end
  if params.state ~= nil and params.stopReason == nil then
    -- A state change (completion statuses also carry a state, but a stale one
    -- is no news).
    changed_state = params.state ~= M.server.state or params.message ~= M.server.message
    M.server = { state = params.state, message = params.message }
  end
  -- Statuslines redraw on this event; other plugins may listen too.
  vim.schedule(function()
    vim.api.nvim_exec_autocmds("User", { pattern = "FimlspStatus", modeline = false, data = params })
    if changed_state then
      pcall(vim.cmd.redrawstatus)
    end
  end)
end

local function round(x)
  return math.floor((tonumber(x) or 0) + 0.5)
end

--- One short line for a statusline, e.g. "fimlsp: 12 tok 85ms" or "fimlsp: loading".
--- Empty when no server runs.
---@param enabled boolean whether the plugin shows completions
---@return string
function M.line(enabled)
  local state = M.server.state
  if state == nil then
    return ""
  end
  if not enabled or state == "disabled" then
    return "fimlsp: off"
  end
  if state ~= "ready" then
    return "fimlsp: " .. state
  end
  local last = M.last
  if not last then
    return "fimlsp: ready"
  end
  local quiet = REASON_LINES[last.stopReason]
  if quiet then
    return quiet
  end
  return ("fimlsp: %d tok %dms"):format(round(last.tokens), round(last.elapsedMs))
end

--- Lines that describe the state in full, for `:FimlspStatus`.
---@param enabled boolean
---@param server_status table? the answer to `fimlsp/serverStatus`, if any
---@return string[]
function M.describe(enabled, server_status)
  local lines = {}
  local state = M.server.state or (server_status and server_status.state)
  if state == nil then
    table.insert(lines, "fimlsp: no server is running (open a Python file)")
    return lines
  end
  table.insert(
    lines,
    ("fimlsp: %s%s"):format(state, enabled and "" or " (completions off in this Neovim)")
  )
  local message = M.server.message or (server_status and server_status.message)
  if message and message ~= "" then
    table.insert(lines, "  model: " .. message)
  end
  local last = M.last
  if last then
    local parts = {
      ("stop %s"):format(tostring(last.stopReason)),
      ("%s tokens"):format(tostring(last.tokens or 0)),
    }
    if last.timeToFirstTokenMs then
      table.insert(parts, ("first token %.0f ms"):format(last.timeToFirstTokenMs))
    end
    if last.tokensPerSecond then
      table.insert(parts, ("%.1f tok/s"):format(last.tokensPerSecond))
    end
    if last.parserUsPerToken then
      table.insert(parts, ("parser %.1f us/tok"):format(last.parserUsPerToken))
    end
    if last.elapsedMs then
      table.insert(parts, ("%.0f ms in all"):format(last.elapsedMs))
    end
    if last.lineMode then
      table.insert(parts, last.lineMode .. "-line")
    end
    if last.complete ~= nil then
      table.insert(parts, last.complete and "complete" or "incomplete")
    end
    table.insert(lines, "  last completion: " .. table.concat(parts, ", "))
    if last.message and last.message ~= "" then
      table.insert(lines, "  note: " .. last.message)
    end
  end
  if server_status then
    table.insert(
      lines,
      ("  server: %s documents, %s served, %s cancelled, %s queued, %.0f MB"):format(
        tostring(server_status.documents),
        tostring(server_status.served),
        tostring(server_status.cancelled),
        tostring(server_status.queuedJobs),
        (tonumber(server_status.rssMb) or 0) + (tonumber(server_status.engineRssMb) or 0)
      )
    )
  end
  return lines
end

return M
