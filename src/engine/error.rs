//! The engine's errors, by stage: what stopped a whole run (helixflow's own failure, exit 3), and
//! what stopped one attempt (the attempt fails with the reason; the run goes on).

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Why a run could not go on. Each is helixflow's own failure, never a phase's.
#[derive(Debug)]
pub(crate) enum RunError {
    /// The run's folder could not be made in the state folder's `runs/`.
    RunFolder { runs: PathBuf, source: io::Error },
    /// The run's id could not be written into the state folder's lock.
    Lock(io::Error),
    /// The runs folder's `latest` link could not be pointed at the new run.
    Latest(io::Error),
    /// The run's journal, `pipeline.json` or `run.json` could not be started.
    Journal(io::Error),
    /// The journal or `run.json` could not be written while the run went on.
    Records(io::Error),
    /// The thread that writes the journal could not be joined, or panicked.
    Dispatcher(&'static str),
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::RunFolder { runs, source } => write!(
                f,
                "cannot create a run folder in {}: {source}",
                runs.display()
            ),
            Self::Latest(e) => write!(f, "cannot point the runs folder's `latest` at the run: {e}"),
            Self::Lock(e) | Self::Journal(e) | Self::Records(e) => write!(f, "{e}"),
            Self::Dispatcher(what) => write!(f, "the event dispatcher {what}"),
        }
    }
}

impl std::error::Error for RunError {}

/// Where in an attempt helixflow itself failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AttemptStage {
    /// Making the attempt's folder, or its worktree.
    Begin,
    /// Reading the workspace before the worker starts.
    ReadBefore,
    /// Preparing, starting or watching the worker.
    Worker,
    /// Verifying what the worker did.
    Verify,
    /// Bringing an isolated attempt's work back to the workspace.
    ApplyBack,
    /// Recording the attempt's result and work.
    Record,
}

impl AttemptStage {
    fn doing(self) -> &'static str {
        match self {
            Self::Begin => "setting it up",
            Self::ReadBefore => "reading the workspace before it",
            Self::Worker => "running its worker",
            Self::Verify => "verifying it",
            Self::ApplyBack => "bringing its work back from its worktree",
            Self::Record => "recording its result",
        }
    }
}

/// helixflow's own failure during an attempt: the attempt fails with it, and says where.
#[derive(Debug)]
pub(crate) struct AttemptError {
    pub stage: AttemptStage,
    pub source: io::Error,
}

impl fmt::Display for AttemptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "helixflow could not run the attempt ({}): {}",
            self.stage.doing(),
            self.source
        )
    }
}

impl std::error::Error for AttemptError {}

/// `.at(stage)` on an I/O result: its error as an [`AttemptError`] of that stage.
pub(crate) trait AtStage<T> {
    fn at(self, stage: AttemptStage) -> Result<T, AttemptError>;
}

impl<T> AtStage<T> for io::Result<T> {
    fn at(self, stage: AttemptStage) -> Result<T, AttemptError> {
        self.map_err(|source| AttemptError { stage, source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attempt_error_says_where_and_what() {
        let error = Err::<(), _>(io::Error::other("disk full"))
            .at(AttemptStage::ReadBefore)
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "helixflow could not run the attempt (reading the workspace before it): disk full"
        );
    }

    #[test]
    fn a_run_error_names_the_folder_it_could_not_make() {
        let error = RunError::RunFolder {
            runs: PathBuf::from("/x/.helixflow/runs"),
            source: io::Error::other("read-only file system"),
        };
        assert_eq!(
            error.to_string(),
            "cannot create a run folder in /x/.helixflow/runs: read-only file system"
        );
    }
}
