//! Running the worker (the agent or the `run` step), and judging how it ended: its exit, its
//! response, and the evidence its agent is asked to show.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::conclude::{cancelled, fatal};
use super::prepare::Session;
use super::{Attempt, AttemptResult};
use crate::agent::prompt_file::PromptFile;
use crate::agent::response;
use crate::agent::transcript;
use crate::agent::usage;
use crate::engine::context::Run;
use crate::engine::state::LiveAttempt;
use crate::event::{ChildExit, Event, Step};
use crate::model::{Agent, Phase, Worker};
use crate::process::{self, ChildSpec, watchdog};
use crate::redact::Redactor;
use crate::verify::feedback::AgentFailure;

/// Runs the worker to its end, the attempt open to `helixflow verify` meanwhile, and notes the
/// session its agent reported. `Err` when it could not start, or the run was cancelled.
pub(super) async fn run(
    a: &Attempt<'_>,
    spec: ChildSpec,
    prompt_file: Option<(PromptFile, Option<watchdog::CrashCleanup>)>,
    live: &Arc<LiveAttempt>,
    session: &mut Session,
) -> Result<ChildExit, AttemptResult> {
    let (run, phase) = (a.run, a.phase);
    run.state.live.begin(live.clone());
    a.step(match phase.worker {
        Worker::Run(_) => Step::Run,
        Worker::Agent(_) => Step::Agent,
    });
    let exit = process::run(spec, run.cancel()).await;
    // The agent has exited: a private copy of its prompt goes now.
    drop(prompt_file);
    run.state.live.end(a.id);
    let exit = match exit {
        Ok(exit) => exit,
        Err(e) => {
            return Err(fatal(format!(
                "cannot start the {}: {e}",
                worker_noun(phase)
            )));
        }
    };
    run.emit(Event::ChildExited {
        phase: phase.name.value.clone(),
        attempt: a.number,
        exit: exit.clone(),
    });
    if let Worker::Agent(agent_name) = &phase.worker
        && let Some(capture) = &run.ctx.pipeline.agents[&agent_name.value].session_id
    {
        let log = a.dir.join("stdout.log");
        let capture = capture.clone();
        let reported = tokio::task::spawn_blocking(move || transcript::session_id(&capture, &log))
            .await
            .ok()
            .and_then(Result::ok)
            .flatten();
        // The session to continue is the one the latest attempt reported: a resume that
        // reported none (the CLI did not find the session) leaves none, and the next retry
        // starts over.
        session.reported = reported;
    }
    if let Worker::Agent(agent_name) = &phase.worker {
        // What the agent used is read whatever became of the attempt: a cancelled or failed
        // run was paid for too.
        let agent = &run.ctx.pipeline.agents[&agent_name.value];
        let (spec, cost) = (agent.usage.clone(), agent.cost_usd);
        let prices = run.ctx.pipeline.prices.clone();
        let (stdout, stderr) = (a.dir.join("stdout.log"), a.dir.join("stderr.log"));
        let usage = tokio::task::spawn_blocking(move || {
            usage::read(spec.as_ref(), cost, &prices, &stdout, &stderr)
        })
        .await
        .unwrap_or_default();
        if let Ok(mut slot) = a.usage.lock() {
            *slot = Some(usage);
        }
    }
    if exit.cancelled || run.state.cancel.is_cancelled() {
        return Err(cancelled(a));
    }
    Ok(exit)
}

/// Judges the child's exit, extracts and saves the response, and checks `evidence`.
pub(super) async fn agent_result(
    run: &Run,
    phase: &Phase,
    exit: &ChildExit,
    dir: &Path,
) -> (Option<AgentFailure>, Option<String>) {
    if let Some(kind) = exit.timeout {
        let limit = match (&phase.worker, kind) {
            (Worker::Agent(a), crate::event::TimeoutKind::Idle) => {
                run.ctx.pipeline.agents[&a.value].idle_timeout
            }
            (Worker::Agent(a), crate::event::TimeoutKind::Wall) => {
                phase.timeout.or(run.ctx.pipeline.agents[&a.value].timeout)
            }
            (Worker::Run(_), _) => phase.timeout,
        };
        return (
            Some(AgentFailure::Timeout {
                kind,
                limit: limit.map_or(Duration::ZERO, crate::model::Millis::duration),
            }),
            None,
        );
    }
    if !exit.success() {
        // The start of standard error often holds the real message (a CLI's usage text follows
        // it), the end what the program did last: both are kept.
        let stderr =
            process::head_and_tail(&dir.join("stderr.log"), 4096, 8192).unwrap_or_default();
        // An agent may say what went wrong only in its output (Claude Code exits 1 with nothing
        // on standard error and the API's message in its result event).
        let reported = match &phase.worker {
            Worker::Agent(a) => {
                let format = run.ctx.pipeline.agents[&a.value].response;
                let (stdout, stderr) = (dir.join("stdout.log"), dir.join("stderr.log"));
                tokio::task::spawn_blocking(move || {
                    response::reported_error(format, &stdout, &stderr)
                })
                .await
                .ok()
                .flatten()
                .map(|e| run.ctx.redactor.redact(&e))
            }
            Worker::Run(_) => None,
        };
        return (
            Some(AgentFailure::Exit {
                code: exit.code,
                signal: exit.signal,
                stderr,
                reported,
            }),
            None,
        );
    }
    let Worker::Agent(agent_name) = &phase.worker else {
        return (None, None);
    };
    // Reading the response and searching for evidence go through logs of any size: off the
    // runtime's thread, which supervises every other phase.
    let agent = run.ctx.pipeline.agents[&agent_name.value].clone();
    let redactor = run.ctx.redactor.clone();
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || agent_response(&agent, &redactor, &dir))
        .await
        .unwrap_or_else(|e| {
            let failure = AgentFailure::Response(format!("reading the response failed: {e}"));
            (Some(failure), None)
        })
}

/// The agent's response from its log, and whether it shows the evidence asked for.
fn agent_response(
    agent: &Agent,
    redactor: &Redactor,
    dir: &Path,
) -> (Option<AgentFailure>, Option<String>) {
    let response = match response::extract(agent.response, &dir.join("stdout.log")) {
        Ok(response) => response,
        Err(e) => return (Some(AgentFailure::Response(e.to_string())), None),
    };
    let _ = std::fs::write(dir.join("response.txt"), redactor.redact(&response.text));
    if let Some(error) = &response.error {
        return (
            Some(AgentFailure::Response(error.clone())),
            Some(response.text),
        );
    }
    if let Some(pattern) = &agent.evidence {
        let matched = regex::bytes::Regex::new(pattern)
            .map_err(std::io::Error::other)
            .and_then(|regex| {
                response::transcript_matches(
                    &regex,
                    &[&dir.join("stdout.log"), &dir.join("stderr.log")],
                )
            });
        if !matches!(matched, Ok(true)) {
            return (
                Some(AgentFailure::NoEvidence {
                    pattern: pattern.to_owned(),
                }),
                Some(response.text),
            );
        }
    }
    if let Some(tools) = &agent.evidence_tools {
        let calls =
            transcript::tool_calls(agent.response, &dir.join("stdout.log")).unwrap_or_default();
        if !calls.any_succeeded(tools) {
            return (
                Some(AgentFailure::NoToolEvidence {
                    tools: tools.clone(),
                    failed: calls.failed,
                }),
                Some(response.text),
            );
        }
    }
    (None, Some(response.text))
}

/// What the worker is called in a message.
fn worker_noun(phase: &Phase) -> &'static str {
    match phase.worker {
        Worker::Run(_) => "run step",
        Worker::Agent(_) => "agent",
    }
}
