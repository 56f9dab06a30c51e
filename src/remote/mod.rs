//! Imports from git repositories, pinned: `import "git+https://…/lib.git//agents.kdl" rev="v1"`.
//! The source of an import ([`Source`]), the lock beside the pipeline that pins each repository
//! and `rev` to a commit and each file read to its SHA-256 ([`Lockfile`]), the cache of commits'
//! files, and the git command line that fills it. [`Resolver`] ties them together for one
//! pipeline; the language layer asks it for files, the command line writes the lock it made.

mod cache;
mod git;
pub(crate) mod lockfile;
mod resolver;
mod source;

pub(crate) use lockfile::{Change, Lockfile, changes};
pub use resolver::{Fetched, Problem};
pub(crate) use resolver::{Network, Outcome, Policy, Resolver, Update};
pub use source::Source;
pub(crate) use source::{check_rev, is_remote};
