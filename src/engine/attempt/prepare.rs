//! Before the worker starts: the snapshot of the workspace, the prompt, the session a retry
//! continues, and the child to start (the agent or the `run` step) with its environment.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::conclude::fatal;
use super::verify::{stable_verify_instructions, verify_instructions};
use super::{Attempt, AttemptResult, Repeat, tracks_changes};
use crate::agent::prompt::{PromptContext, render_argv, render_prompt};
use crate::agent::prompt_file::PromptFile;
use crate::engine::context::{snapshot_options, take_snapshot};
use crate::engine::control;
use crate::engine::isolation::Worktree;
use crate::model::{Agent, Phase, VerifyMode, Worker};
use crate::process::ChildSpec;
use crate::process::watchdog;
use crate::verify::feedback;
use crate::workspace::Snapshot;

/// The agent session a phase's retries continue: the one its worker started in this run, never a
/// verifier's, a sibling phase's, or one from an earlier run.
#[derive(Debug, Default)]
pub(super) struct Session {
    /// The id helixflow gave the conversation (`{{ session_id }}` in `command`), when one started.
    given: Option<String>,
    /// The id the agent's output reported (`session-id`), once it did.
    pub(super) reported: Option<String>,
    /// The agent whose session it is: another agent's CLI cannot continue it.
    agent: Option<String>,
    /// The prompt template the session was last given: a tier with another one continues the
    /// session with the new prompt's text.
    prompt: Option<String>,
    /// Whether the last invocation continued the session with the agent's `resume` argv.
    pub(super) resumed: bool,
}

impl Session {
    /// The session a retry of `agent` continues: the reported id when the agent declares how to
    /// read one, else the id given to the command that started it. `None` when there is no
    /// session to continue (attempt 1 never reached the agent's model), and the retry starts
    /// over with `command` and the full prompt.
    fn to_resume(&self, agent: &Agent) -> Option<&str> {
        if agent.session_id.is_some() {
            self.reported.as_deref()
        } else {
            self.given.as_deref()
        }
    }
}

/// Linux refuses a single argument of `MAX_ARG_STRLEN` (32 pages, 128 KiB) bytes or more,
/// counting its terminating NUL.
const ARGUMENT_LIMIT: usize = 128 * 1024;

/// What an attempt's agent was started with, as the journal keeps it (`invocation.json`).
#[derive(Debug, serde::Serialize)]
struct Invocation<'a> {
    /// The argv, placeholders replaced.
    argv: &'a [String],
    /// Whether this was the agent's `resume`, continuing its session.
    resume: bool,
    /// `{{ session_id }}` of this invocation.
    session_id: &'a str,
    /// Whether a text went to standard input (`stdin.txt`).
    stdin: bool,
    /// The tier the attempt ran in.
    tier: &'a crate::event::Tier,
    /// Why: the tier, and the session it started or continued with what message.
    why: String,
}

/// How an attempt's agent takes up the phase's work.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Start {
    /// A new session, with the full prompt (and the feedback, on a retry).
    New,
    /// A new session because the tier's agent is not the session's.
    OtherAgent(String),
    /// The session continues, with the feedback.
    Continue,
    /// The session continues, with the new prompt's text and the feedback.
    NewPrompt,
}

/// The worker an attempt starts, ready to run.
pub(super) struct Prepared {
    /// The child: the agent or the `run` step, with its environment.
    pub(super) spec: ChildSpec,
    /// What the phase was asked to do, for a verifier.
    pub(super) task: String,
    /// The agent's prompt file. Kept until the attempt is over: a private copy is removed when it
    /// is dropped, and by the watchdog should helixflow be killed first.
    pub(super) prompt_file: Option<(PromptFile, Option<watchdog::CrashCleanup>)>,
}

/// The workspace before the attempt, when the phase reads its changes.
pub(super) async fn snapshot_before(a: &Attempt<'_>) -> std::io::Result<Option<Arc<Snapshot>>> {
    // The diff shown to a verifier needs the files' earlier contents.
    let keep_contents = a.phase.verify.contains(&VerifyMode::SubAgent);
    let tracked = tracks_changes(a.run, a.phase);
    let before = if tracked {
        a.step(crate::event::Step::Snapshot);
        let options = snapshot_options(&a.run.ctx, a.phase, keep_contents, None);
        // A worktree's files are as its first snapshot read them: nothing is read again.
        let made = a.worktree.as_ref().map(Worktree::made);
        Some(Arc::new(
            take_snapshot(a.run, a.workspace(), options, made).await?,
        ))
    } else {
        None
    };
    Ok(before)
}

/// The child the attempt starts, with its environment; `Err` when the attempt cannot run (a
/// prompt that does not render, an argument too long).
pub(super) fn worker(
    a: &Attempt<'_>,
    previous: Option<&(String, PathBuf)>,
    session: &mut Session,
) -> std::io::Result<Result<Prepared, AttemptResult>> {
    let (feedback_text, feedback_file) =
        previous.map_or(("", None), |(text, file)| (text.as_str(), Some(file)));
    let mut prepared = match &a.phase.worker {
        Worker::Run(command) => {
            let mut spec = ChildSpec::shell(
                command,
                a.workspace(),
                a.dir.join("stdout.log"),
                a.dir.join("stderr.log"),
            );
            spec.timeout = a.phase.timeout.map(crate::model::Millis::duration);
            Prepared {
                spec,
                task: format!("Run the command `{command}`."),
                prompt_file: None,
            }
        }
        Worker::Agent(agent_name) => {
            let agent = &a.run.ctx.pipeline.agents[&agent_name.value];
            match agent_child(a, agent, feedback_text, feedback_file, session)? {
                Ok(prepared) => prepared,
                Err(ended) => return Ok(Err(ended)),
            }
        }
    };
    set_environment(a, &mut prepared.spec, feedback_file);
    prepared.spec.grace = a.run.ctx.options.grace;
    prepared.spec.redactor = a.run.ctx.redactor.clone();
    prepared.spec.spawn_in_pool = a.run.ctx.spawn_in_pool;
    Ok(Ok(prepared))
}

/// The agent's child: the prompt rendered and written, the session started or continued, the
/// argv, standard input and the journal's record of them (`invocation.json`, `stdin.txt`,
/// `feedback-given.md`). Its environment holds the agent's `env` only.
/// An item phase's values for the `{{ item… }}` placeholders of `argv`, in the same pass as the
/// others: a value is never read again for placeholders.
fn item_values<'v>(
    phase: &Phase,
    argv: &'v [String],
    values: &mut BTreeMap<&'v str, String>,
) -> std::io::Result<()> {
    let Some(item) = phase.item() else {
        return Ok(());
    };
    for arg in argv {
        for placeholder in crate::language::item::item_placeholders(arg) {
            if let Some(reference) = placeholder.reference {
                let value = crate::language::item::value_of(item, reference)
                    .map_err(|e| std::io::Error::other(format!("the item {e}")))?;
                values.insert(placeholder.inner, value);
            }
        }
    }
    Ok(())
}

fn agent_child(
    a: &Attempt<'_>,
    agent: &Agent,
    feedback_text: &str,
    feedback_file: Option<&PathBuf>,
    session: &mut Session,
) -> std::io::Result<Result<Prepared, AttemptResult>> {
    let (run, phase, attempt, dir) = (a.run, a.phase, a.number, &a.dir);
    let prompt = match attempt_prompt(phase, attempt, a.max_attempts, feedback_text) {
        Ok(prompt) => prompt,
        Err(e) => return Ok(Err(fatal(format!("the prompt does not render: {e:#}")))),
    };
    let template = phase.prompt.as_ref().map(|p| p.text().to_owned());
    let (resume, session_id, start) =
        choose_session(agent, attempt, feedback_file, session, template);
    let argv_template = resume.as_ref().map_or(&agent.command, |(argv, _)| *argv);
    let reads_file = argv_template.iter().any(|arg| arg.contains("prompt_file"));
    let file = PromptFile::write(
        &dir.join("prompt.md"),
        &prompt,
        &run.ctx.redactor,
        reads_file,
    )?;
    let mut values = BTreeMap::from([
        ("prompt", prompt.clone()),
        ("prompt_file", file.path().display().to_string()),
        ("phase", phase.name.value.clone()),
        ("attempt", attempt.to_string()),
        ("workspace", a.workspace().display().to_string()),
        ("session_id", session_id.clone()),
    ]);
    // What a resumed agent is told: the feedback, cut to a size that fits one argument; with a
    // tier's new prompt, that prompt's text carrying it.
    let given_feedback = match resume.as_ref().map(|_| {
        let cut = feedback::for_agent(
            feedback_text,
            feedback_file.map_or(Path::new("feedback.md"), PathBuf::as_path),
        );
        if start == Start::NewPrompt {
            attempt_prompt(phase, attempt, a.max_attempts, &cut)
        } else {
            Ok(cut)
        }
    }) {
        None => None,
        Some(Ok(given)) => Some(given),
        Some(Err(e)) => return Ok(Err(fatal(format!("the prompt does not render: {e:#}")))),
    };
    if let Some(given) = &given_feedback {
        give_feedback(a, given, feedback_file, &mut values)?;
    }
    item_values(phase, argv_template, &mut values)?;
    let mut argv = render_argv(argv_template, &values);
    argv.extend(agent.turn_limit_args(phase.max_turns));
    // Standard input carries the message of this invocation: the prompt that starts a
    // session, or the feedback that continues one.
    let stdin = agent
        .stdin
        .then(|| given_feedback.clone().unwrap_or_else(|| prompt.clone()));
    std::fs::write(
        dir.join("invocation.json"),
        run.ctx.redactor.to_json_pretty(&Invocation {
            argv: &argv,
            resume: resume.is_some(),
            session_id: &session_id,
            stdin: stdin.is_some(),
            tier: a.tier,
            why: why(a, &start),
        })?,
    )?;
    if let Some(text) = &stdin {
        std::fs::write(dir.join("stdin.txt"), run.ctx.redactor.redact(text))?;
    }
    if let Some(ended) = too_long_argument(&argv, resume.is_some()) {
        return Ok(Err(ended));
    }
    // Kept until the attempt is over: a private copy is removed when it is dropped, and by
    // the watchdog should helixflow be killed first.
    let cleanup = watchdog::cleanup_on_crash(&file);
    let spec = agent_spec(a, agent, &argv, stdin)?;
    Ok(Ok(Prepared {
        spec,
        task: prompt,
        prompt_file: Some((file, cleanup)),
    }))
}

/// The session this invocation continues with the agent's `resume` argv, if any, the id of its
/// session either way (a new one is remembered in `session`), and how the work is taken up.
fn choose_session<'a>(
    agent: &'a Agent,
    attempt: u32,
    feedback_file: Option<&PathBuf>,
    session: &mut Session,
    prompt: Option<String>,
) -> (Option<(&'a Vec<String>, String)>, String, Start) {
    // A session of one CLI cannot be continued by another: a tier with another agent starts
    // over with the full prompt and the feedback.
    let other_agent = session
        .agent
        .as_ref()
        .filter(|previous| **previous != agent.name.value)
        .cloned();
    // A retry continues the worker's own session when there is one; otherwise it starts
    // a new one with the full prompt, which carries the feedback.
    let resume = match (&agent.resume, session.to_resume(agent)) {
        // Only with feedback to give: a try after a transient failure of the first attempt
        // has none, and starts over with the full prompt.
        (Some(argv), Some(id))
            if attempt > 1 && feedback_file.is_some() && other_agent.is_none() =>
        {
            Some((argv, id.to_owned()))
        }
        _ => None,
    };
    let (session_id, start) = if let Some((_, id)) = &resume {
        let start = if session.prompt == prompt {
            Start::Continue
        } else {
            Start::NewPrompt
        };
        session.prompt = prompt;
        (id.clone(), start)
    } else {
        let id = uuid::Uuid::new_v4().to_string();
        *session = Session {
            given: Some(id.clone()),
            reported: None,
            agent: Some(agent.name.value.clone()),
            prompt,
            resumed: false,
        };
        (id, other_agent.map_or(Start::New, Start::OtherAgent))
    };
    session.resumed = resume.is_some();
    (resume, session_id, start)
}

/// Why an attempt runs as it does, for `invocation.json`: its tier (the attempt of the work, the
/// `attempt` blocks that set it), and how its agent takes up the work.
fn why(a: &Attempt<'_>, start: &Start) -> String {
    let work = a.tier.work_attempt;
    let mut text = match a.repeat {
        Repeat::No => format!("attempt {work} of the work"),
        Repeat::Transient => {
            format!("attempt {work} of the work again, after a transient failure: the same tier")
        }
        Repeat::NewSession => format!(
            "attempt {work} of the work again, in a new session: continuing its session failed as fatal"
        ),
    };
    let blocks = a.run.phase(a.id).blocks_for(work);
    if blocks.is_empty() {
        text.push_str(", with the phase's own settings");
    }
    for block in blocks {
        text.push_str(&format!(
            "; `attempt {}` sets {}",
            block.label(),
            block.settings().join(", ")
        ));
    }
    let agent = a.tier.agent.as_deref().unwrap_or_default();
    text.push_str(&match start {
        Start::New if a.number == 1 => format!("; a new session of \"{agent}\" with the prompt"),
        Start::New => format!(
            "; a new session of \"{agent}\" with the full prompt and the feedback (no session to continue)"
        ),
        Start::OtherAgent(before) => format!(
            "; a new session of \"{agent}\" with the full prompt and the feedback: the agent changed from \"{before}\", whose session it cannot continue"
        ),
        Start::Continue => "; continues the session with the feedback".to_owned(),
        Start::NewPrompt => {
            "; continues the session with the new prompt's text and the feedback".to_owned()
        }
    });
    text
}

/// Records the feedback a resumed agent is given (`feedback-given.md`) and offers it to the
/// `resume` argv's placeholders.
fn give_feedback(
    a: &Attempt<'_>,
    given: &str,
    feedback_file: Option<&PathBuf>,
    values: &mut BTreeMap<&str, String>,
) -> std::io::Result<()> {
    // `resume` may also name the previous attempt's feedback; in `command` those
    // placeholders are not replaced (lint reports them).
    std::fs::write(
        a.dir.join("feedback-given.md"),
        a.run.ctx.redactor.redact(given),
    )?;
    values.insert("feedback", given.to_owned());
    values.insert(
        "feedback_file",
        feedback_file
            .map(|f| f.display().to_string())
            .unwrap_or_default(),
    );
    Ok(())
}

/// The end of an attempt whose argv holds an argument the operating system refuses.
fn too_long_argument(argv: &[String], resume: bool) -> Option<AttemptResult> {
    let (at, arg) = argv
        .iter()
        .enumerate()
        .find(|(_, arg)| arg.len() >= ARGUMENT_LIMIT)?;
    Some(fatal(format!(
        "argument {at} of the agent's {} is {} bytes, more than the 128 KiB the \
         operating system allows in one argument: give the agent the prompt on \
         standard input (`stdin #true`) or as a file (`{{{{ prompt_file }}}}`) instead \
         of in its argv",
        if resume { "`resume`" } else { "`command`" },
        arg.len()
    )))
}

/// The agent's child process: its argv, standard input, time limits and the agent's `env`.
fn agent_spec(
    a: &Attempt<'_>,
    agent: &Agent,
    argv: &[String],
    stdin: Option<String>,
) -> std::io::Result<ChildSpec> {
    let mut spec = ChildSpec::argv(
        argv,
        a.workspace(),
        a.dir.join("stdout.log"),
        a.dir.join("stderr.log"),
    )?;
    spec.stdin = stdin.map(String::into_bytes);
    spec.timeout = a
        .phase
        .timeout
        .or(agent.timeout)
        .map(crate::model::Millis::duration);
    spec.idle_timeout = a
        .phase
        .idle_timeout
        .or(agent.idle_timeout)
        .map(crate::model::Millis::duration);
    spec.env.extend(
        agent
            .env
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v))),
    );
    Ok(spec)
}

/// The child's environment: the pipeline's `env`, then the agent's (already in `spec`), then the
/// phase's, then helixflow's own.
fn set_environment(a: &Attempt<'_>, spec: &mut ChildSpec, feedback_file: Option<&PathBuf>) {
    let run = a.run;
    let mut env: Vec<(OsString, OsString)> = run
        .ctx
        .pipeline
        .env
        .iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    env.append(&mut spec.env);
    env.extend(
        a.phase
            .env
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v))),
    );
    env.push((
        "HELIXFLOW_RUN_DIR".into(),
        run.ctx.folder.path.clone().into(),
    ));
    env.push(("HELIXFLOW_PHASE".into(), a.phase.name.value.clone().into()));
    env.push(("HELIXFLOW_ATTEMPT".into(), a.number.to_string().into()));
    if let Some(file) = feedback_file {
        env.push(("HELIXFLOW_FEEDBACK_FILE".into(), file.clone().into()));
    }
    if let Some(socket) = &run.ctx.socket {
        env.push((control::SOCKET_ENV.into(), socket.clone().into()));
    }
    spec.env = env;
}

/// The prompt an attempt gives its agent: the phase's template rendered with the attempt's
/// variables, with the verify instructions in `self` mode. `run --dry-run` shows this same text.
pub(crate) fn attempt_prompt(
    phase: &Phase,
    attempt: u32,
    max_attempts: u32,
    feedback: &str,
) -> Result<String, minijinja::Error> {
    let instructions = if phase.verify.contains(&VerifyMode::SelfCheck) {
        verify_instructions(phase)
    } else {
        String::new()
    };
    prompt_with(phase, attempt, max_attempts, feedback, &instructions)
}

/// The first attempt's prompt as a phase's fingerprint sees it: no feedback, and `self` mode's
/// instructions naming `helixflow` wherever this binary is installed.
pub(crate) fn fingerprint_prompt(phase: &Phase) -> Result<String, minijinja::Error> {
    // The first attempt's, with the `attempt` block that covers it, if any.
    let phase = &*phase.for_attempt(1);
    let instructions = if phase.verify.contains(&VerifyMode::SelfCheck) {
        stable_verify_instructions(phase)
    } else {
        String::new()
    };
    let max_attempts = phase.retries.saturating_add(1);
    prompt_with(phase, 1, max_attempts, "", &instructions)
}

fn prompt_with(
    phase: &Phase,
    attempt: u32,
    max_attempts: u32,
    feedback: &str,
    instructions: &str,
) -> Result<String, minijinja::Error> {
    let context = PromptContext {
        phase,
        attempt,
        max_attempts,
        feedback,
        verify_instructions: instructions,
    };
    render_prompt(phase.prompt.as_ref().map_or("", |p| p.text()), &context)
}
