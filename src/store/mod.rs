//! The state folder (`.helixflow/`): run journals, attempt artifacts, and redaction of secrets.

pub mod redact;
pub mod run;
