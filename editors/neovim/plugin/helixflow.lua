-- Starts `helixflow lsp` for every buffer of filetype `helixflow` (see ftdetect/helixflow.lua).
if vim.g.loaded_helixflow then
  return
end
vim.g.loaded_helixflow = true

local group = vim.api.nvim_create_augroup('helixflow', { clear = true })
vim.api.nvim_create_autocmd('FileType', {
  group = group,
  pattern = 'helixflow',
  callback = function(args)
    local helixflow = require('helixflow')
    if helixflow.config.autostart then
      helixflow.start(args.buf)
    end
  end,
})

vim.api.nvim_create_user_command('HelixflowStart', function()
  require('helixflow').start(0)
end, { desc = 'Start helixflow lsp for the current buffer' })
