--- Small helpers that hide the differences between Neovim 0.10 and later.
---
--- Neovim 0.11 turned the client's functions into methods (`client:request`)
--- and deprecated the 0.10 form (`client.request`); calling the wrong one
--- either breaks or warns, so every call goes through here.
local M = {}

M.has_011 = vim.fn.has("nvim-0.11") == 1

--- The name of the client, for lookups.
M.CLIENT_NAME = "fimlsp"

---@param client vim.lsp.Client
---@return boolean, integer?
function M.request(client, method, params, handler, bufnr)
  if M.has_011 then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

---@param client vim.lsp.Client
---@return {err: lsp.ResponseError?, result: any}?, string?
function M.request_sync(client, method, params, timeout_ms, bufnr)
  if M.has_011 then
    return client:request_sync(method, params, timeout_ms, bufnr)
  end
  return client.request_sync(method, params, timeout_ms, bufnr)
end

---@param client vim.lsp.Client
function M.cancel(client, id)
  if M.has_011 then
    return client:cancel_request(id)
  end
  return client.cancel_request(id)
end

---@param client vim.lsp.Client
function M.notify(client, method, params)
  if M.has_011 then
    return client:notify(method, params)
  end
  return client.notify(method, params)
end

---@param client vim.lsp.Client
function M.stop(client, force)
  if M.has_011 then
    return client:stop(force)
  end
  return client.stop(force)
end

---@param client vim.lsp.Client
---@return boolean
function M.is_stopped(client)
  if M.has_011 then
    return client:is_stopped()
  end
  return client.is_stopped()
end

--- The running fimlsp clients, optionally only those attached to `bufnr`.
---@param bufnr integer?
---@return vim.lsp.Client[]
function M.clients(bufnr)
  return vim.lsp.get_clients({ name = M.CLIENT_NAME, bufnr = bufnr })
end

--- Byte column of an LSP `character` on `line`, for the negotiated encoding.
--- Written out because `vim.str_byteindex` changed its signature in 0.11.
---@param line string
---@param character integer
---@param encoding string "utf-8" | "utf-16" | "utf-32"
---@return integer
function M.byte_col(line, character, encoding)
  if encoding == "utf-8" then
    return math.min(character, #line)
  end
  local units, i = 0, 1
  while i <= #line and units < character do
    local b = line:byte(i)
    local len = b >= 0xF0 and 4 or b >= 0xE0 and 3 or b >= 0xC0 and 2 or 1
    -- Characters outside the BMP take two UTF-16 code units.
    units = units + ((encoding == "utf-16" and len == 4) and 2 or 1)
    i = i + len
  end
  return math.min(i - 1, #line)
end

--- An LSP position as a 0-based (row, byte column) of `bufnr`.
---@return integer, integer
function M.to_bytes(bufnr, position, encoding)
  local row = position.line
  local line = vim.api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ""
  return row, M.byte_col(line, position.character, encoding)
end

--- Buffer text between two 0-based (row, byte column) positions.
---@return string
function M.text_between(bufnr, srow, scol, erow, ecol)
  local ok, lines = pcall(vim.api.nvim_buf_get_text, bufnr, srow, scol, erow, ecol, {})
  return ok and table.concat(lines, "\n") or ""
end

--- Whether the current mode is Insert (completion submodes included).
---@return boolean
function M.in_insert()
  local mode = vim.api.nvim_get_mode().mode
  return mode:sub(1, 1) == "i"
end

return M
