//! The state folder itself (`.helixflow/` by default): made with a `.gitignore` that ignores all
//! of it, as pytest does for `.pytest_cache`, so that a run leaves `git status` as it found it.

use std::fs;
use std::io;
use std::path::Path;

/// What the state folder's `.gitignore` holds. `/*` rather than `*`: git ignores the folder's
/// entries and so all below them just the same, but a walk of an isolated phase's worktree (made
/// under `worktrees/`) reads the ignore files of the folders above it, and there `*` would hide
/// every file of the worktree while `/*` matches none.
pub(crate) const GITIGNORE: &str =
    "# Made by helixflow: its runs, records and logs are not for version control.\n/*\n";

/// Makes the state folder and its parents when it is missing; a folder helixflow makes gets a
/// `.gitignore`, and so does one an earlier version made without it (it holds `runs/` and no
/// `.gitignore`). A `.gitignore` that exists is left as it is: to keep the state folder in
/// version control, make it empty.
pub(crate) fn create(state_dir: &Path) -> io::Result<()> {
    if state_dir.is_dir() {
        let ignore = state_dir.join(".gitignore");
        if state_dir.join("runs").is_dir() && fs::symlink_metadata(&ignore).is_err() {
            // Written once: a failure here only leaves `git status` as it was.
            let _ = fs::write(ignore, GITIGNORE);
        }
        return Ok(());
    }
    if let Some(parent) = state_dir.parent() {
        fs::create_dir_all(parent)?;
    }
    match fs::create_dir(state_dir) {
        Ok(()) => fs::write(state_dir.join(".gitignore"), GITIGNORE),
        // Made by another helixflow meanwhile, which writes the file.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && state_dir.is_dir() => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            "it is not a folder",
        )),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_state_folder_ignores_itself_and_an_old_one_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("deep/.helixflow");
        create(&state).unwrap();
        assert_eq!(
            fs::read_to_string(state.join(".gitignore")).unwrap(),
            GITIGNORE
        );
        let old = dir.path().join("old");
        fs::create_dir(&old).unwrap();
        create(&old).unwrap();
        assert!(!old.join(".gitignore").exists());
        // One an earlier version made (with runs, without the file) gets it once.
        let earlier = dir.path().join("earlier");
        fs::create_dir_all(earlier.join("runs")).unwrap();
        create(&earlier).unwrap();
        assert_eq!(
            fs::read_to_string(earlier.join(".gitignore")).unwrap(),
            GITIGNORE
        );
        // An emptied one stays empty.
        fs::write(earlier.join(".gitignore"), "").unwrap();
        create(&earlier).unwrap();
        assert_eq!(fs::read_to_string(earlier.join(".gitignore")).unwrap(), "");
    }
}
