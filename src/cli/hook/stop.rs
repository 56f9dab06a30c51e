//! `hook claude-stop` and `hook codex-stop`: a Stop hook's judgement of the session's phase.
//!
//! Both CLIs send the same kind of JSON on standard input (`session_id`, `cwd`,
//! `stop_hook_active`, `last_assistant_message`; Codex adds `turn_id`) and read the same answer:
//! nothing on standard output allows the stop, `{"decision":"block","reason":…}` refuses it and
//! hands the reason to the model. Both also refuse on exit code 2, so this command never exits 2:
//! its own errors allow the stop with exit code 1 and the message on standard error.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::cli::failure::Failure;

use super::{Cli, StopArgs};
use crate::engine::session::{self, SessionCheck};
use crate::event::{GateReport, GateStatus};
use crate::model::Pipeline;
use crate::process::Cancel;
use crate::store::hooks::{self, Judgement, SessionDir, SessionRecord, Verdict};
use crate::verify::feedback;

/// The most a payload may hold: the agent's last message can be long, not this long.
const PAYLOAD_LIMIT: u64 = 16 * 1024 * 1024;

/// The hook's input, as far as helixflow reads it.
#[derive(Debug)]
struct Payload {
    session_id: String,
    cwd: Option<PathBuf>,
    event: String,
    stop_hook_active: Option<bool>,
    last_message: Option<String>,
    agent_id: Option<String>,
}

/// What the hook answers.
enum Answer {
    /// Allow the stop, saying nothing.
    Allow,
    /// Allow the stop, and say why to the person.
    AllowSaying(String),
    /// Refuse the stop with this reason for the model.
    Refuse(String),
}

pub(super) fn run(args: &StopArgs, cli: Cli) -> i32 {
    let deadline = Instant::now() + args.timeout;
    if std::env::var_os("HELIXFLOW_RUN_DIR").is_some() {
        // An agent that `helixflow run` started: the run judges its attempt itself, against the
        // run's phase, and retries it with the feedback. The payload is read all the same, so
        // that the agent's write of it never meets a closed pipe.
        let _ = read_payload(deadline);
        return crate::exit::SUCCESS;
    }
    let answer =
        read_payload(deadline).and_then(|payload| judge_stop(args, cli, &payload, deadline));
    match answer {
        Ok(Answer::Allow) => crate::exit::SUCCESS,
        Ok(Answer::AllowSaying(message)) => {
            say!("helixflow: {message}");
            let note = serde_json::json!({ "systemMessage": format!("helixflow: {message}") });
            let _ = crate::cli::emit(&format!("{note}\n")).map_err(Failure::report);
            crate::exit::SUCCESS
        }
        Ok(Answer::Refuse(reason)) => {
            let answer = serde_json::json!({ "decision": "block", "reason": reason });
            let _ = crate::cli::emit(&format!("{answer}\n")).map_err(Failure::report);
            crate::exit::SUCCESS
        }
        Err(message) => fail_open(&message),
    }
}

/// helixflow could not judge: the stop is allowed (exit 1, which both CLIs take for a hook that
/// failed without refusing), and the person is told why.
pub(crate) fn fail_open(message: &str) -> i32 {
    say!(
        "helixflow hook: {message}; the stop is allowed (helixflow allows a stop it cannot judge)"
    );
    crate::exit::FAILURE
}

/// Reads standard input within the deadline.
fn read_payload(deadline: Instant) -> Result<Payload, String> {
    use std::io::IsTerminal as _;
    if std::io::stdin().is_terminal() {
        return Err("standard input is a terminal: this command is a Stop hook, and reads the hook's JSON there".to_owned());
    }
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let read = std::io::stdin()
            .take(PAYLOAD_LIMIT + 1)
            .read_to_end(&mut bytes)
            .map(|_| bytes);
        let _ = send.send(read);
    });
    let left = deadline.saturating_duration_since(Instant::now());
    let bytes = match receive.recv_timeout(left) {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) => return Err(format!("cannot read standard input: {e}")),
        Err(_) => return Err("standard input was not closed in time".to_owned()),
    };
    if bytes.len() as u64 > PAYLOAD_LIMIT {
        return Err("the hook's input is larger than 16 MiB".to_owned());
    }
    parse_payload(&bytes)
}

/// The payload's fields; an input that is not a Stop hook's says what is wrong with it.
fn parse_payload(bytes: &[u8]) -> Result<Payload, String> {
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| {
        format!("the hook's input is not JSON ({e}): expected the Stop hook's JSON object")
    })?;
    let Some(object) = value.as_object() else {
        return Err("the hook's input is not a JSON object: expected the Stop hook's".to_owned());
    };
    let text = |key: &str| {
        object
            .get(key)
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
    };
    let session_id = text("session_id")
        .filter(|id| !id.is_empty())
        .ok_or("the hook's input has no `session_id`: is this command a Stop hook?")?;
    Ok(Payload {
        session_id,
        cwd: text("cwd").filter(|c| !c.is_empty()).map(PathBuf::from),
        event: text("hook_event_name").unwrap_or_else(|| "Stop".to_owned()),
        stop_hook_active: object
            .get("stop_hook_active")
            .and_then(serde_json::Value::as_bool),
        last_message: text("last_assistant_message"),
        agent_id: text("agent_id"),
    })
}

/// The pipeline file: FILE (relative to the current folder), else the nearest one from the
/// session's folder.
fn pipeline_file(args: &StopArgs, payload: &Payload) -> Result<PathBuf, String> {
    if let Some(file) = &args.file {
        return Ok(file.clone());
    }
    let from = match &payload.cwd {
        Some(cwd) => cwd.clone(),
        None => {
            std::env::current_dir().map_err(|e| format!("cannot read the current folder: {e}"))?
        }
    };
    crate::cli::pipeline_path_from(&from)
}

/// The pipeline, checked, with its workspace absolute.
fn load(path: &Path) -> Result<Pipeline, String> {
    let imports = crate::cli::imports::ImportArgs::default();
    crate::cli::input::quiet_pipeline(path, &imports).map_err(|unusable| match unusable {
        crate::cli::input::Unusable::Errors => format!(
            "{} has errors (`helixflow lint {}` lists them)",
            path.display(),
            path.display()
        ),
        crate::cli::input::Unusable::Other(message) => message,
    })
}

/// The phase to judge: `--phase`, else the one chosen, else the only one.
fn phase_name(args: &StopArgs, pipeline: &Pipeline, state_dir: &Path) -> Result<String, String> {
    let names = || {
        let names: Vec<&str> = pipeline
            .phases
            .iter()
            .map(|p| p.name.value.as_str())
            .collect();
        names.join(", ")
    };
    let chosen = match &args.phase {
        Some(phase) => Some(phase.clone()),
        None => hooks::chosen(state_dir)
            .map_err(|e| format!("cannot read the phase chosen with `helixflow hook use`: {e}"))?
            .map(|c| c.phase),
    };
    match chosen {
        Some(name) if pipeline.phase(&name).is_some() => Ok(name),
        Some(name) => Err(format!(
            "no phase \"{name}\" in the pipeline; its phases: {}",
            names()
        )),
        None if pipeline.phases.len() == 1 => Ok(pipeline.phases[0].name.value.clone()),
        None => Err(format!(
            "no phase chosen: run `helixflow hook use PHASE` (one of {}) or give the hook `--phase`",
            names()
        )),
    }
}

fn judge_stop(
    args: &StopArgs,
    cli: Cli,
    payload: &Payload,
    deadline: Instant,
) -> Result<Answer, String> {
    let path = pipeline_file(args, payload)?;
    let pipeline = load(&path)?;
    let state_dir = pipeline.workspace.join(&pipeline.state_dir);
    let phase = phase_name(args, &pipeline, &state_dir)?;
    let dir = SessionDir::open(&state_dir, cli.name(), &payload.session_id).map_err(|e| {
        format!(
            "cannot write the session's journal in {}: {e}",
            state_dir.display()
        )
    })?;
    let _lock = dir
        .lock_until(deadline)
        .map_err(|e| format!("cannot lock the session's journal: {e}"))?;
    let mut record = dir.record().unwrap_or_else(|| {
        let cwd = payload.cwd.as_ref().map(|c| c.display().to_string());
        hooks::new_record(cli.name(), &payload.session_id, cwd.as_deref())
    });
    let started = Instant::now();
    let number = record.judgements + 1;
    let judged = judge_phase(&pipeline, &phase, payload, &dir.logs(number), deadline);
    let key = payload.agent_id.clone().unwrap_or_default();
    // A stop the CLI says follows no refusal starts a new row (the person spoke, or the CLI's
    // own cap ended the turn).
    let before = match payload.stop_hook_active {
        Some(false) => 0,
        _ => record.refused_in_a_row.get(&key).copied().unwrap_or(0),
    };
    let mut judgement = Judgement {
        number,
        at: hooks::timestamp(),
        event: payload.event.clone(),
        agent_id: payload.agent_id.clone(),
        phase: Some(phase.clone()),
        stop_hook_active: payload.stop_hook_active,
        verdict: Verdict::Passed,
        refused_in_a_row: 0,
        duration_ms: 0,
        gates: Vec::new(),
        error: None,
    };
    let answer = match judged {
        Err(error) => {
            judgement.verdict = Verdict::AllowedOnError;
            judgement.error = Some(error.clone());
            Err(error)
        }
        Ok(gates) => Ok(verdict(
            args,
            &pipeline,
            &phase,
            &dir,
            &mut judgement,
            before,
            gates,
        )),
    };
    judgement.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    // The row of refusals is counted in the journal: a refusal it cannot keep could be repeated
    // past the cap, so without the journal the stop is allowed.
    record_judgement(&dir, &mut record, &judgement, &key)?;
    answer
}

/// The answer to gates judged: allow when all passed, refuse while the row of refusals is
/// shorter than `--max-blocks`, else allow and say so.
fn verdict(
    args: &StopArgs,
    pipeline: &Pipeline,
    phase: &str,
    dir: &SessionDir,
    judgement: &mut Judgement,
    before: u32,
    gates: Vec<GateReport>,
) -> Answer {
    let failed: Vec<&str> = gates
        .iter()
        .filter(|g| g.status == GateStatus::Failed)
        .map(|g| g.name.as_str())
        .collect();
    let answer = if failed.is_empty() {
        Answer::Allow
    } else if before >= args.max_blocks {
        judgement.verdict = Verdict::AllowedAtCap;
        Answer::AllowSaying(format!(
            "phase \"{phase}\" still fails (gate{} {}) after {before} stop{} refused in a row; this stop is allowed (--max-blocks {})",
            if failed.len() == 1 { "" } else { "s" },
            failed
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", "),
            if before == 1 { "" } else { "s" },
            args.max_blocks
        ))
    } else {
        judgement.verdict = Verdict::Refused;
        judgement.refused_in_a_row = before + 1;
        let phase = pipeline.phase(phase).expect("the phase was found");
        let text = feedback::render_for_session(phase, Some((before + 1, args.max_blocks)), &gates);
        let file = dir.feedback_file(judgement.number);
        let reason = match std::fs::write(&file, &text) {
            Ok(()) => feedback::bounded(&text, &file, feedback::HOOK_FEEDBACK_LIMIT),
            Err(_) => feedback::bounded(
                &text,
                Path::new("(not kept)"),
                feedback::HOOK_FEEDBACK_LIMIT,
            ),
        };
        Answer::Refuse(reason)
    };
    judgement.gates = gates;
    answer
}

/// Writes the judgement into the session's journal and its record.
fn record_judgement(
    dir: &SessionDir,
    record: &mut SessionRecord,
    judgement: &Judgement,
    key: &str,
) -> Result<(), String> {
    record.judgements = judgement.number;
    record.updated.clone_from(&judgement.at);
    record.phase.clone_from(&judgement.phase);
    record.last = Some(judgement.verdict);
    record
        .refused_in_a_row
        .insert(key.to_owned(), judgement.refused_in_a_row);
    dir.write(record, judgement).map_err(|e| {
        format!(
            "cannot write the session's journal in {}: {e}",
            dir.path.display()
        )
    })
}

/// Runs the phase's gates within the deadline; past it the gate commands are killed.
fn judge_phase(
    pipeline: &Pipeline,
    phase: &str,
    payload: &Payload,
    logs: &Path,
    deadline: Instant,
) -> Result<Vec<GateReport>, String> {
    let phase = pipeline.phase(phase).expect("the phase was found");
    let state_dir = pipeline.workspace.join(&pipeline.state_dir);
    let start = hooks::start(&state_dir, &phase.name.value);
    let commands = phase
        .gates
        .iter()
        .any(|g| matches!(g.kind, crate::model::GateKind::Command { .. }));
    if commands {
        std::fs::create_dir_all(logs)
            .map_err(|e| format!("cannot create {}: {e}", logs.display()))?;
    }
    let grace = crate::cli::run::kill_grace()?;
    let cancel = Cancel::default();
    let check = SessionCheck {
        pipeline,
        phase,
        start: start.as_ref(),
        response: payload.last_message.as_deref(),
        logs,
        cancel: &cancel,
        grace,
    };
    let runtime = crate::cli::runtime().map_err(|_| "cannot start the runtime".to_owned())?;
    let left = deadline.saturating_duration_since(Instant::now());
    runtime.block_on(async {
        let judging = session::judge(&check);
        tokio::pin!(judging);
        tokio::select! {
            judged = &mut judging => judged.map_err(|e| format!("cannot read the workspace: {e}")),
            () = tokio::time::sleep(left) => {
                cancel.hard.cancel();
                // The gate commands are killed; a snapshot under way is not waited for long.
                let _ = tokio::time::timeout(Duration::from_secs(2), judging).await;
                Err(format!(
                    "judging phase \"{}\" took longer than the hook's --timeout",
                    phase.name.value
                ))
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_that_are_not_a_stop_hooks_say_what_is_wrong() {
        for (input, wanted) in [
            ("", "not JSON"),
            ("[1]", "not a JSON object"),
            ("{}", "no `session_id`"),
            (r#"{"session_id": ""}"#, "no `session_id`"),
            (r#"{"session_id": 7}"#, "no `session_id`"),
        ] {
            let error = parse_payload(input.as_bytes()).unwrap_err();
            assert!(error.contains(wanted), "{input}: {error}");
        }
        let payload = parse_payload(br#"{"session_id": "s", "stop_hook_active": "yes"}"#).unwrap();
        assert_eq!(
            payload.stop_hook_active, None,
            "a field of the wrong type is not read"
        );
        assert_eq!(payload.event, "Stop");
    }
}
