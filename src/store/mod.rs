//! The state folder (`.helixflow/`): run journals, attempt artifacts, and redaction of secrets.

pub mod run;
