-- Pipeline files get the filetype `helixflow`: helixflow.kdl, pipeline.kdl, *.helixflow.kdl, and
-- any other .kdl file with a top-level `pipeline` node.

local function pipeline_buffer(bufnr)
  return require('helixflow').buffer_has_pipeline(bufnr)
end

if vim.fn.has('nvim-0.8') == 1 then
  vim.filetype.add({
    filename = {
      ['helixflow.kdl'] = 'helixflow',
      ['pipeline.kdl'] = 'helixflow',
    },
    pattern = {
      ['.*%.helixflow%.kdl'] = 'helixflow',
      -- Checked before the `.kdl` extension; returning nothing leaves the file to it.
      ['.*%.kdl'] = function(_, bufnr)
        if pipeline_buffer(bufnr) then
          return 'helixflow'
        end
      end,
    },
  })
  return
end

-- Neovim 0.7 detects file types with Vim script unless g:do_filetype_lua is set, which
-- autocommands serve either way.
local group = vim.api.nvim_create_augroup('helixflow_ftdetect', { clear = true })
vim.api.nvim_create_autocmd({ 'BufRead', 'BufNewFile' }, {
  group = group,
  pattern = { 'helixflow.kdl', 'pipeline.kdl', '*.helixflow.kdl' },
  command = 'setfiletype helixflow',
})
vim.api.nvim_create_autocmd('BufRead', {
  group = group,
  pattern = '*.kdl',
  callback = function(args)
    if vim.bo[args.buf].filetype ~= 'helixflow' and pipeline_buffer(args.buf) then
      vim.bo[args.buf].filetype = 'helixflow'
    end
  end,
})
