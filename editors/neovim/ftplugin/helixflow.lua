-- Editing settings for helixflow pipelines (KDL).
if vim.b.did_ftplugin then
  return
end
vim.b.did_ftplugin = true

vim.bo.commentstring = '// %s'
vim.bo.comments = 's1:/*,mb:*,ex:*/,://'
vim.bo.expandtab = true
vim.bo.shiftwidth = 4
vim.bo.softtabstop = 4

-- Highlight with the KDL tree-sitter parser when one is installed (Neovim 0.9+, e.g. through
-- nvim-treesitter's `:TSInstall kdl`); the language server does the rest.
if vim.treesitter and vim.treesitter.language and vim.treesitter.language.register then
  vim.treesitter.language.register('kdl', 'helixflow')
  if pcall(vim.treesitter.language.add, 'kdl') then
    pcall(vim.treesitter.start)
  end
end

vim.b.undo_ftplugin = 'setlocal commentstring< comments< expandtab< shiftwidth< softtabstop<'
