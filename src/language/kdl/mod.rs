//! Every reader of KDL text, from the most forgiving to the most exact.
//!
//! - [`lexer`]: lossless tokens, which never fail; the brace screen that runs before any parser.
//! - `fast`: a strict one-pass parser for well-formed files, which gives up on anything else.
//! - [`parse`]: the bridge to the `kdl` crate, the reference for what KDL means and the only source
//!   of syntax errors, bounded in size and time; it tries the fast parser first. `compat` makes up
//!   for where the crate lags the specification.
//! - `tolerant`: a view of nodes and entries that never fails, for the half-written text an editor
//!   holds (the language server reads documents through it).
//! - [`limits`]: what the front end reads at most, measured with the lexer before any parser runs.

mod compat;
mod fast;
pub(crate) mod lexer;
pub(crate) mod limits;
pub mod parse;
pub(crate) mod tolerant;
