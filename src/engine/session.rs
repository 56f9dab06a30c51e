//! A phase judged inside an agent's own session (`helixflow hook`, the MCP server's `verify`):
//! the workspace as it is now, against where the phase started there when that was recorded
//! (`helixflow hook use`), observed as an attempt is and judged by the one judge.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::context::{gate_env, snapshot_options_excluding};
use super::observe::changes_since;
use crate::event::GateReport;
use crate::model::{Phase, Pipeline};
use crate::process::Cancel;
use crate::verify::judge::{Changed, Inspection, Scene};
use crate::workspace::Snapshot;

/// What a session's phase is judged with.
pub(crate) struct SessionCheck<'a> {
    /// The pipeline, its workspace absolute.
    pub pipeline: &'a Pipeline,
    pub phase: &'a Phase,
    /// The workspace when the phase started in it, when that was recorded.
    pub start: Option<&'a Snapshot>,
    /// The agent's last message, for gates on its response.
    pub response: Option<&'a str>,
    /// Where gate commands write their logs.
    pub logs: &'a Path,
    pub cancel: &'a Cancel,
    /// Time between TERM and KILL when a gate command is stopped.
    pub grace: Duration,
}

/// Whether a file is the agent CLI's own project settings (`.claude/`, `.codex/`), which the CLI
/// and `helixflow hook install` write during a session: like an agent's `bookkeeping`, `scope`
/// and `changes` do not count them, `protect` does.
fn is_agent_settings(path: &str) -> bool {
    path.starts_with(".claude/") || path.starts_with(".codex/")
}

/// The folders a snapshot of the pipeline's workspace leaves out: the state folder.
fn excluded(pipeline: &Pipeline) -> Vec<PathBuf> {
    vec![pipeline.state_dir.clone()]
}

/// The workspace now, as the starting point of `phase` (`helixflow hook use`).
pub(crate) fn start_of(pipeline: &Pipeline, phase: &Phase) -> std::io::Result<Snapshot> {
    let options = snapshot_options_excluding(&excluded(pipeline), phase, false, None);
    Snapshot::take(&pipeline.workspace, &options, None)
}

/// Judges the phase now: its gates' reports, in order.
pub(crate) async fn judge(check: &SessionCheck<'_>) -> std::io::Result<Vec<GateReport>> {
    let pipeline = check.pipeline;
    let phase = check.phase;
    let excluded = excluded(pipeline);
    let options = snapshot_options_excluding(&excluded, phase, false, None);
    let workspace = pipeline.workspace.clone();
    let now = tokio::task::spawn_blocking(move || Snapshot::take(&workspace, &options, None))
        .await
        .map_err(std::io::Error::other)??;
    let observed = check.start.map(|start| {
        let (mut changes, mut bookkeeping) =
            changes_since(pipeline, phase, &pipeline.workspace, start, &now);
        let settings = changes.split_off(is_agent_settings);
        bookkeeping.created.extend(settings.created);
        bookkeeping.modified.extend(settings.modified);
        bookkeeping.deleted.extend(settings.deleted);
        (changes, bookkeeping)
    });
    let changed = observed.as_ref().map(|(changes, bookkeeping)| Changed {
        changes,
        bookkeeping,
    });
    let env = gate_env(pipeline, phase);
    let scene = Scene {
        workspace: &pipeline.workspace,
        exclude: &excluded,
        env: &env,
        logs: check.logs,
        cancel: check.cancel,
        grace: check.grace,
        redactor: std::sync::Arc::new(pipeline.redactor()),
        phases: &pipeline.phases,
    };
    let inspection = Inspection::in_session(&scene, phase, &now, changed, check.response);
    Ok(inspection.judge(&mut |_| {}).await)
}
