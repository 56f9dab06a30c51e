//! Exit codes shared by every command (see the README). A leaf: it depends on nothing.

/// Success (lint: no errors).
pub const SUCCESS: i32 = 0;
/// A phase failed (lint: findings of error severity).
pub const FAILURE: i32 = 1;
/// The pipeline file is invalid, or bad usage.
pub const INVALID: i32 = 2;
/// helixflow itself failed.
pub const INTERNAL: i32 = 3;
/// Another run of the same state folder is live (`run` without `--wait`).
pub const BUSY: i32 = 4;
/// Interrupted.
pub const INTERRUPTED: i32 = 130;
