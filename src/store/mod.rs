//! The state folder (`.helixflow/`): run folders and attempt artifacts, the run lock, and the
//! run's record as sinks of its events: the journal (`events.jsonl`) and the summary
//! (`run.json`).

pub(crate) mod bundle;
pub(crate) mod hooks;
pub(crate) mod journal;
pub(crate) mod lock;
pub(crate) mod merge;
pub(crate) mod passed;
pub(crate) mod pipeline_cache;
pub(crate) mod plan_memo;
pub(crate) mod run;
pub(crate) mod run_json;
pub(crate) mod state_dir;
