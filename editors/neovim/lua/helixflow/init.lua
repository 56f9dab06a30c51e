-- helixflow for Neovim: starts `helixflow lsp` for pipeline files (filetype `helixflow`).
--
-- Works with Neovim 0.7 and later: `vim.lsp.start` where it exists (0.8+), else
-- `vim.lsp.start_client` and `vim.lsp.buf_attach_client`, which is what Debian 12's 0.7.2 has.

local M = {}

local defaults = {
  -- The server command; `helixflow` must be on PATH, or give the full path.
  cmd = { 'helixflow', 'lsp' },
  -- A pipeline's root is the nearest folder with one of these, else the file's folder.
  root_markers = { 'helixflow.kdl', 'pipeline.kdl', '.git' },
  -- Start the server when a `helixflow` buffer opens (plugin/helixflow.lua).
  autostart = true,
  -- Passed on to the client: capabilities (e.g. from cmp-nvim-lsp), on_attach, settings.
  capabilities = nil,
  on_attach = nil,
  settings = nil,
}

M.config = vim.deepcopy(defaults)

--- Overrides the defaults above; may be called before or after the plugin loads.
function M.setup(opts)
  -- Key by key: a list such as `cmd` replaces the default instead of merging with it by index.
  local config = vim.deepcopy(defaults)
  for key, value in pairs(opts or {}) do
    config[key] = value
  end
  M.config = config
end

-- Characters that end an identifier in KDL v2 (besides white space), as a Lua pattern set.
local NOT_IDENTIFIER = '[%s\\/(){};%[%]"#=]'

--- Whether KDL `text` has a `pipeline` node at the top level.
---
--- A small scanner rather than a parser: it follows exactly what decides whether a word at brace
--- depth 0 starts a node (comments, slashdash, strings, raw strings, line continuations), so that
--- `pipeline` in a string, a comment, a commented-out node or a child block does not count. The
--- same logic as editors/vscode/src/detect.ts.
function M.has_pipeline_node(text)
  local n = #text
  local depth = 0
  local at_node_start = true
  local slashdashed = false
  local i = 1

  local function starts(s, at)
    return text:sub(at, at + #s - 1) == s
  end

  local function skip_string(at)
    local j = at
    local hashes = 0
    while text:sub(j, j) == '#' do
      hashes = hashes + 1
      j = j + 1
    end
    local multi_line = starts('"""', j)
    local close = (multi_line and '"""' or '"') .. string.rep('#', hashes)
    j = j + (multi_line and 3 or 1)
    -- Raw strings have no escapes; in quoted ones an escaped character is skipped whole.
    while j <= n and not starts(close, j) do
      j = j + ((hashes == 0 and text:sub(j, j) == '\\') and 2 or 1)
    end
    return math.min(j + #close, n + 1)
  end

  local function skip_block_comment(at)
    local j = at + 2
    local nesting = 1
    while j <= n and nesting > 0 do
      if starts('/*', j) then
        nesting = nesting + 1
        j = j + 2
      elseif starts('*/', j) then
        nesting = nesting - 1
        j = j + 2
      else
        j = j + 1
      end
    end
    return j
  end

  while i <= n do
    local c = text:sub(i, i)
    if c == '\n' or c == '\r' or c == '\f' or c == ';' then
      at_node_start = true
      i = i + 1
    elseif c == ' ' or c == '\t' or c == '\v' then
      i = i + 1
    elseif starts('//', i) then
      i = text:find('[\r\n]', i) or n + 1
    elseif starts('/*', i) then
      i = skip_block_comment(i)
    elseif starts('/-', i) then
      -- Before a node name it comments out the whole node (its children are deeper anyway);
      -- before an argument, property or block it does not change where nodes start.
      slashdashed = slashdashed or at_node_start
      i = i + 2
    elseif c == '\\' then
      -- A line continuation: only space or a comment may follow on this line.
      local newline = text:find('\n', i, true)
      i = newline and newline + 1 or n + 1
    elseif c == '{' or c == '}' then
      depth = c == '{' and depth + 1 or math.max(0, depth - 1)
      at_node_start = true
      slashdashed = false
      i = i + 1
    elseif c == '(' then
      -- A type annotation, before a node name or a value: it does not end the node start.
      local close = text:find(')', i, true)
      i = close and close + 1 or n + 1
    elseif c == '"' or text:find('^#+"', i) then
      i = skip_string(i)
      at_node_start = false
      slashdashed = false
    else
      local stop = text:find(NOT_IDENTIFIER, i + 1) or n + 1
      local word = text:sub(i, stop - 1)
      if at_node_start and depth == 0 and not slashdashed and word == 'pipeline' then
        return true
      end
      at_node_start = false
      slashdashed = false
      i = stop
    end
  end
  return false
end

--- Whether the loaded buffer holds a pipeline (a top-level `pipeline` node).
function M.buffer_has_pipeline(bufnr)
  if not bufnr or not vim.api.nvim_buf_is_loaded(bufnr) then
    return false
  end
  local lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  return M.has_pipeline_node(table.concat(lines, '\n'))
end

local function exists(path)
  return (vim.loop or vim.uv).fs_stat(path) ~= nil
end

--- The folder the server works in for the file at `path`.
function M.root_dir(path)
  if path == nil or path == '' then
    return vim.fn.getcwd()
  end
  local start = vim.fn.fnamemodify(path, ':p:h')
  local dir = start
  while true do
    for _, marker in ipairs(M.config.root_markers) do
      if exists(dir .. '/' .. marker) then
        return dir
      end
    end
    local parent = vim.fn.fnamemodify(dir, ':h')
    if parent == dir then
      return start
    end
    dir = parent
  end
end

-- Clients by root folder, for Neovim 0.7, which has no `vim.lsp.start` to reuse them.
local clients = {}
local warned = false

--- Starts (or reuses) the server for `bufnr` (default: the current buffer) and attaches it.
--- Returns the client id, or nil when the server cannot be started.
function M.start(bufnr)
  if bufnr == nil or bufnr == 0 then
    bufnr = vim.api.nvim_get_current_buf()
  end
  local cmd = M.config.cmd
  if vim.fn.executable(cmd[1]) ~= 1 then
    if not warned then
      warned = true
      vim.notify(
        ('helixflow: `%s` is not executable; install helixflow or set `cmd` in require("helixflow").setup()'):format(cmd[1]),
        vim.log.levels.WARN
      )
    end
    return nil
  end
  local root = M.root_dir(vim.api.nvim_buf_get_name(bufnr))
  local config = {
    name = 'helixflow',
    cmd = cmd,
    root_dir = root,
    capabilities = M.config.capabilities,
    on_attach = M.config.on_attach,
    settings = M.config.settings,
  }
  if vim.lsp.start then
    return vim.lsp.start(config, { bufnr = bufnr })
  end
  local id = clients[root]
  local client = id and vim.lsp.get_client_by_id(id)
  if client == nil or client.is_stopped() then
    id = vim.lsp.start_client(config)
    clients[root] = id
  end
  if id then
    vim.lsp.buf_attach_client(bufnr, id)
  end
  return id
end

return M
