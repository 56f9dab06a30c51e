//! The state folder (`.helixflow/`): run folders and attempt artifacts, and the run's record as
//! sinks of its events: the journal (`events.jsonl`) and the summary (`run.json`).

pub mod journal;
pub mod run;
pub mod run_json;
