//! `helixflow hook`: verification inside an agent's own session. Claude Code's and Codex's Stop
//! hooks run `hook claude-stop` / `hook codex-stop`, which judge the session's phase and refuse
//! the stop, with helixflow's feedback, while a gate fails; `hook use` chooses the phase,
//! `hook install` and `uninstall` put the hook in the project's settings and take it out.

mod install;
mod json;
mod stop;

pub(crate) use stop::fail_open;

use std::path::PathBuf;
use std::time::Duration;

use super::failure::{Failure, Outcome};
use super::imports::ImportArgs;
use super::input;

/// Arguments of `helixflow hook`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: HookCommand,
}

#[derive(Debug, clap::Subcommand)]
enum HookCommand {
    /// Claude Code's `Stop` (or `SubagentStop`) hook: judge the phase, refuse the stop while a gate
    /// fails.
    ///
    /// Reads the hook's JSON on standard input, finds the pipeline (FILE, else helixflow.kdl or
    /// pipeline.kdl in the session's folder or a parent) and the phase (`--phase`, else the one
    /// `helixflow hook use` chose), and judges it as `helixflow verify` does. Prints nothing when
    /// every gate passes (the stop is allowed), else `{"decision":"block","reason":…}` with the
    /// feedback. After `--max-blocks` stops refused in a row the stop is allowed, with a message.
    /// Its own errors (a broken pipeline file, a timeout) allow the stop: it exits 1 with the
    /// message on standard error, never 2.
    ClaudeStop(StopArgs),
    /// Codex's Stop hook: the same as `claude-stop`, for Codex's hook payload.
    CodexStop(StopArgs),
    /// Choose the phase the Stop hooks judge in this workspace, and record where it starts.
    ///
    /// `scope`, `protect` and `changes` are judged against the workspace as it is now. Without
    /// PHASE, prints the phase chosen.
    Use(UseArgs),
    /// Put helixflow's Stop hook in the project's `.claude/settings.json` or `.codex/hooks.json`.
    ///
    /// Merges into the file: other settings and hooks are kept, and installing again changes
    /// nothing (or replaces helixflow's own hook, with a new `--phase`).
    Install(InstallArgs),
    /// Take helixflow's Stop hook out of the project's settings, and nothing else.
    Uninstall(UninstallArgs),
}

/// The agent CLI a hook is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Cli {
    /// Claude Code.
    Claude,
    /// The Codex CLI.
    Codex,
}

impl Cli {
    /// Its name in the journal.
    fn name(self) -> &'static str {
        match self {
            Cli::Claude => "claude",
            Cli::Codex => "codex",
        }
    }

    /// The `hook` subcommand its Stop hook runs.
    fn subcommand(self) -> &'static str {
        match self {
            Cli::Claude => "claude-stop",
            Cli::Codex => "codex-stop",
        }
    }
}

/// Arguments of `hook claude-stop` and `hook codex-stop`.
#[derive(Debug, clap::Args)]
pub(crate) struct StopArgs {
    /// The phase to judge (default: the one `helixflow hook use` chose; the only one, in a
    /// pipeline of one phase).
    #[arg(long)]
    phase: Option<String>,
    /// Stops refused in a row before one is allowed anyway (0: judge and keep the journal, never
    /// refuse).
    #[arg(long, default_value_t = 5, value_name = "N")]
    max_blocks: u32,
    /// The longest a judgement may take; past it the stop is allowed. The installed hook gives
    /// the agent's CLI a limit of 10 minutes.
    #[arg(long, default_value = "5m", value_parser = duration, value_name = "DURATION")]
    timeout: Duration,
    /// The pipeline file (default: helixflow.kdl or pipeline.kdl in the session's folder or a
    /// parent).
    file: Option<PathBuf>,
}

/// Arguments of `hook use`.
#[derive(Debug, clap::Args)]
pub(crate) struct UseArgs {
    /// The phase.
    phase: Option<String>,
    /// The pipeline file (default: helixflow.kdl or pipeline.kdl here or in a parent folder).
    #[arg(long)]
    file: Option<PathBuf>,
}

/// Arguments of `hook install`.
#[derive(Debug, clap::Args)]
pub(crate) struct InstallArgs {
    /// The agent CLI.
    #[arg(value_enum)]
    cli: Cli,
    /// The phase the hook judges (default: the one `helixflow hook use` chose).
    #[arg(long)]
    phase: Option<String>,
    /// The pipeline file; its folder is the project's (default: helixflow.kdl or pipeline.kdl
    /// here or in a parent folder).
    #[arg(long)]
    file: Option<PathBuf>,
    /// Print the change as a diff, and change nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Arguments of `hook uninstall`.
#[derive(Debug, clap::Args)]
pub(crate) struct UninstallArgs {
    /// The agent CLI.
    #[arg(value_enum)]
    cli: Cli,
    /// The pipeline file; its folder is the project's.
    #[arg(long)]
    file: Option<PathBuf>,
    /// Print the change as a diff, and change nothing.
    #[arg(long)]
    dry_run: bool,
}

fn duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|e| format!("not a duration ({e}): use e.g. 90s or 5m"))
}

/// The subcommands a hook runs: their usage errors must not exit 2, which the agent CLIs read as
/// "refuse the stop" (the session would be fed the usage text again and again).
pub(crate) fn is_hook_run(args: &[std::ffi::OsString]) -> bool {
    args.get(1).is_some_and(|a| a == "hook")
        && args
            .get(2)
            .is_some_and(|a| a == "claude-stop" || a == "codex-stop")
}

pub(crate) fn run(args: &Args) -> Outcome {
    match &args.command {
        // A stop the hook cannot judge is allowed (fail open): a result, never a failure.
        HookCommand::ClaudeStop(stop) => Ok(stop::run(stop, Cli::Claude)),
        HookCommand::CodexStop(stop) => Ok(stop::run(stop, Cli::Codex)),
        HookCommand::Use(choice) => choose(choice),
        HookCommand::Install(install) => install::install(install),
        HookCommand::Uninstall(uninstall) => install::uninstall(uninstall),
    }
}

/// Fails unless the pipeline has a phase of that name.
fn known_phase(file: Option<PathBuf>, phase: &str) -> Result<(), Failure> {
    let (_, pipeline) = input::checked_pipeline(file, &ImportArgs::default())?;
    if pipeline.phase(phase).is_some() {
        return Ok(());
    }
    let names: Vec<&str> = pipeline
        .phases
        .iter()
        .map(|p| p.name.value.as_str())
        .collect();
    Err(Failure::usage(format!(
        "no phase \"{phase}\"; the phases are: {}",
        names.join(", ")
    )))
}

/// `hook use`: records the phase and where it starts, or prints the phase chosen.
fn choose(args: &UseArgs) -> Outcome {
    let pipeline = input::runnable_pipeline(args.file.clone(), &ImportArgs::default())?;
    let state_dir = pipeline.workspace.join(&pipeline.state_dir);
    let Some(name) = &args.phase else {
        return match crate::store::hooks::chosen(&state_dir) {
            Ok(Some(chosen)) => super::emit(&format!(
                "phase \"{}\", chosen {}\n",
                chosen.phase, chosen.since
            )),
            Ok(None) => super::emit("no phase chosen: `helixflow hook use PHASE` chooses one\n"),
            Err(e) => Err(Failure::usage(format!("cannot read the phase chosen: {e}"))),
        };
    };
    known_phase(args.file.clone(), name)?;
    let phase = pipeline.phase(name).expect("the phase was found");
    let start = match crate::engine::session::start_of(&pipeline, phase) {
        Ok(start) => start,
        Err(e) => return Err(Failure::usage(format!("cannot read the workspace: {e}"))),
    };
    match crate::store::hooks::choose(&state_dir, name, &start) {
        Ok(_) => super::emit(&format!(
            "phase \"{name}\" chosen for agent sessions here; `scope`, `protect` and `changes` are judged against the workspace as it is now ({} files)\n",
            start.len()
        )),
        Err(e) => Err(Failure::usage(format!(
            "cannot record the phase in {}: {e}",
            state_dir.display()
        ))),
    }
}
