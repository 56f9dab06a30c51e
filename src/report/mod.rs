//! Reporters: consumers of the event stream. The engine emits [`Stamped`] events and never prints;
//! everything a user sees of a run (progress bars, log lines, NDJSON, `JUnit` XML, the final table) is
//! written here, from those events alone.
//!
//! Events are expected to be redacted already (the engine applies `secret` redaction before it
//! emits), so reporters write what they receive.

pub(crate) mod html;
mod junit;
mod ndjson;
mod plain;
mod progress;
pub(crate) mod replay;
mod summary;

pub use junit::Junit;
pub use ndjson::Ndjson;
pub use plain::Plain;
pub use progress::Progress;
pub(crate) use progress::ProgressPause;
pub use summary::Summary;
