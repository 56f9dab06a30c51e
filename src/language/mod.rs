//! The pipeline language: KDL text → checked model.

pub mod format;
pub mod lexer;
