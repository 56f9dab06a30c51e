//! How a [`GateContext`] is built: one constructor, for the workspace as it is now, and the
//! changes, the phases alongside and the response added to it when they are known. Every
//! context is built with the pipeline's redactor, so its `secret`s never reach a gate's log or
//! detail, inside a run or outside one.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::gates::GateContext;
use crate::model::Phase;
use crate::process::Cancel;
use crate::redact::Redactor;
use crate::workspace::{Changes, Snapshot};

/// What a context judges until it is told of changes: none.
static NO_CHANGES: Changes = Changes {
    created: Vec::new(),
    modified: Vec::new(),
    deleted: Vec::new(),
};

impl<'a> GateContext<'a> {
    /// The gates of `phase` against the workspace as `now` shows it: nothing changed, no
    /// response, no phase alongside. Searches in `workspace` leave out `exclude`; gate commands
    /// get `env` on top of helixflow's environment, write their logs into `logs`, and are
    /// stopped by `cancel`, `grace` between TERM and KILL. `redactor` is the pipeline's (its
    /// `secret`s): it takes them out of every log and detail.
    #[allow(
        clippy::too_many_arguments,
        reason = "what every gate check needs, each of a different kind; what may be left out \
                  is added by the methods below"
    )]
    pub fn new(
        workspace: &'a Path,
        exclude: &'a [PathBuf],
        phase: &'a Phase,
        now: &'a Snapshot,
        env: &'a [(OsString, OsString)],
        logs: &'a Path,
        cancel: &'a Cancel,
        grace: Duration,
        redactor: Arc<Redactor>,
    ) -> Self {
        GateContext {
            workspace,
            phase,
            response: None,
            after: now,
            changes: &NO_CHANGES,
            bookkeeping: &NO_CHANGES,
            env,
            logs,
            cancel,
            redactor,
            grace,
            exclude,
            alongside: &[],
        }
    }

    /// What an attempt changed: `changes` is the diff from the workspace when it began to `now`,
    /// without the agent's `bookkeeping`, which is `bookkeeping`.
    #[must_use]
    pub fn changed(self, changes: &'a Changes, bookkeeping: &'a Changes) -> Self {
        GateContext {
            changes,
            bookkeeping,
            ..self
        }
    }

    /// The phases that ran at some time during the attempt.
    #[must_use]
    pub fn alongside(self, alongside: &'a [&'a Phase]) -> Self {
        GateContext { alongside, ..self }
    }

    /// The agent's final response, once it exited.
    #[must_use]
    pub fn with_response(self, response: Option<&'a str>) -> Self {
        GateContext { response, ..self }
    }
}
