//! A small KDL v2 lexer used to screen input before parsing, and by the formatter. (Being written.)
