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

/// The sibling temporary file `path` is written through before a rename puts it in place:
/// `.<name>.<pid>.tmp`, hidden, and this process's own.
pub(crate) fn temporary_beside(path: &std::path::Path) -> std::path::PathBuf {
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(format!(".{}.tmp", std::process::id()));
    path.with_file_name(name)
}

/// Replaces `path` through a sibling temporary file (`.<name>.<pid>.tmp`) and a rename: a reader
/// never sees half a file. Not synced: for files written again when lost (caches, reports).
pub(crate) fn replace_unsynced(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = temporary_beside(path);
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
}
