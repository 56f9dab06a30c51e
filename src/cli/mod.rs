//! The command line: argument parsing and one module per subcommand. Each subcommand returns the
//! process exit code.

mod approve;
mod approver;
mod bundle;
mod check;
mod compile;
mod explain;
mod export;
pub(crate) mod failure;
mod fmt;
mod graph;
mod hook;
pub(crate) mod imports;
mod input;
mod lint;
mod lock;
mod lsp;
mod mcp;
mod report;
mod reporters;
mod run;
mod runs;
mod schema;
mod sessions;
mod stats;
mod status;
mod verify;

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use failure::{Failure, Outcome};

/// Verifiable multi-phase pipelines for AI coding agents.
///
/// A pipeline file (KDL) declares phases, the files each must produce, the gates that prove the
/// work was done, how it is verified and how often it may be retried. helixflow checks the file,
/// compiles it into a DAG and runs it.
#[derive(Debug, Parser)]
#[command(
    name = "helixflow",
    version,
    propagate_version = true,
    max_term_width = 100
)]
#[command(
    after_help = "Lint output formats: human (default), json, github, sarif (`helixflow lint --format`).\nExit codes: 0 success, 1 failure (lint: errors found), 2 invalid pipeline or bad usage, 3 internal error, 130 interrupted.\nRun `helixflow explain --list` for every diagnostic code."
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a pipeline: phases over the DAG, every attempt verified, retries with feedback.
    ///
    /// Without FILE, runs helixflow.kdl or pipeline.kdl in the current folder or the nearest
    /// parent. An invalid pipeline runs nothing and exits 2. The journal of every run is kept in
    /// the state folder (`.helixflow/runs/<run-id>/`). Exits 0 when every phase passed, 1 when a
    /// phase failed or the run timed out, 130 when interrupted.
    Run(run::Args),
    /// Check a phase's gates against the workspace now; inside a run, record a receipt.
    ///
    /// Agents in `self` mode run this before they finish. Inside a run (HELIXFLOW_* set by
    /// helixflow) the run itself checks the current attempt, including `scope` and `protect`
    /// against the attempt's starting point, and keeps the receipt. Exits 0 when every gate
    /// passed, 1 otherwise.
    Verify(verify::Args),
    /// Check every phase's outputs and gates against the workspace as it is, for CI.
    ///
    /// Proves that what agents produced still holds: each phase's expected outputs and gates are
    /// checked, in dependency order, as `helixflow verify` checks one phase outside a run. No
    /// agent is started and no `run` step's command runs; a `command` gate's `fix` is not run
    /// either. Gates that judge an attempt (`scope`, `protect`, `changes`, `approval`) or the
    /// agent's response are reported as skipped, with the reason. Every phase is checked, even
    /// when one it depends on failed. Reports as `helixflow run` does: plain lines or progress,
    /// the summary table, `--events`, `--junit`. Without FILE, checks helixflow.kdl or
    /// pipeline.kdl in the current folder or the nearest parent. Exits 0 when every phase's
    /// checks pass, 1 when one fails, 2 when the pipeline is invalid.
    Check(check::Args),
    /// Show which phases are up to date and why each other one would run.
    ///
    /// A phase is up to date when it passed before and nothing it depends on changed since:
    /// its definition (gates, outputs, agent, declared `env`…), its rendered prompt, its
    /// `inputs` (by default the outputs of the phases it depends on, and its prompt file), the
    /// phases it depends on, and its own outputs since it passed. For each phase that would run,
    /// every reason is named: never passed, which part of the definition changed (old and new
    /// text), a diff of the prompt, which input or output files were modified, added or
    /// deleted, which upstream phase re-runs. `helixflow run` skips up-to-date phases; `run
    /// --force`, `--force PHASE` and `--from PHASE` run them anyway. Always exits 0 for a valid
    /// pipeline; `--json` for tools.
    Status(status::Args),
    /// Approve the work of a phase waiting at an `approval` gate.
    Approve(approve::ApproveArgs),
    /// Reject the work of a phase waiting at an `approval` gate; the reason becomes feedback.
    Reject(approve::RejectArgs),
    /// List past runs of a pipeline.
    Runs(runs::RunsArgs),
    /// Show a run's summary, or one phase's attempts with their gates and feedback.
    Show(runs::ShowArgs),
    /// Write a run's HTML report: the DAG, a timeline of every attempt, each phase's attempts
    /// with their gates, feedback, cost and changed files.
    ///
    /// One self-contained file (its styles and script inline; it makes no request), made from the
    /// run's journal alone. Every run writes its own, `report.html` in its folder, kept current
    /// while it goes on: `.helixflow/runs/latest/report.html` is the newest run's.
    Report(report::Args),
    /// Apply or show a phase's bundle: the changes its passing attempt made, and its journal.
    ///
    /// Every phase that passes leaves its bundle in the run folder,
    /// `<state-dir>/runs/<run-id>/phases/<phase>/bundle.hxb`.
    Bundle(bundle::Args),
    /// Check pipeline files and report every problem.
    ///
    /// Without FILE, checks helixflow.kdl or pipeline.kdl in the current folder or the nearest
    /// parent. `-` reads standard input. Exits 0 when there are no errors (warnings allowed), 1
    /// when there are, 2 when a file cannot be read.
    Lint(lint::Args),
    /// Print the phase DAG as Graphviz dot, Mermaid or JSON.
    Graph(graph::Args),
    /// Write the pipeline as a CI workflow: `export github-actions`, one job per phase.
    Export(export::Args),
    /// Format pipeline files canonically, keeping every comment.
    Fmt(fmt::Args),
    /// Explain a diagnostic code: what it catches, why, and an example.
    Explain(explain::Args),
    /// Print the checked pipeline (imports, templates and defaults applied) as JSON.
    Compile(compile::Args),
    /// Pin the pipeline's remote imports: write helixflow.lock, and say what changed.
    ///
    /// Resolves every `import "git+…" rev="…"` (fetching into the import cache what it lacks),
    /// and writes the commit of each repository and `rev`, and the SHA-256 of every file read,
    /// to helixflow.lock beside the pipeline. Pins already in the lock stay, unless `--update`
    /// moves them to the commit their `rev` names now. Other commands write the lock on first
    /// use too; `--locked` makes them fail instead.
    Lock(lock::Args),
    /// Write (or check) the JSON Schema of the compiled pipeline in schema/.
    Schema(schema::Args),
    /// Verification inside an agent's own session: Stop hooks for Claude Code and Codex.
    ///
    /// `hook claude-stop` and `hook codex-stop` are the hooks' commands: they judge the session's
    /// phase when the agent stops, and refuse the stop with helixflow's feedback while a gate
    /// fails. `hook use PHASE` chooses the phase; `hook install claude|codex` puts the hook in the
    /// project's settings, `hook uninstall` takes it out.
    Hook(hook::Args),
    /// Serve the Model Context Protocol over standard input and output (read-only).
    ///
    /// Tools: `verify` (a phase's gates and the feedback), `status` (which phases are up to date
    /// and why the others would run), `explain` (a diagnostic code), `lint` (a pipeline file's
    /// diagnostics). It never starts an agent or a `run` step.
    Mcp(mcp::Args),
    /// Start the language server (for editors), over standard input and output.
    ///
    /// Diagnostics as `lint` reports them, hover documentation, completion, go-to-definition and
    /// references, the document outline, formatting as `fmt` does it, and quick fixes.
    Lsp(lsp::Args),
    /// Print a shell completion script.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// Parses the command line and runs the subcommand; returns the exit code.
pub fn main() -> i32 {
    // The watchdog a run starts is not a command for people: it stays out of help and completions.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args
        .get(1)
        .is_some_and(|a| a == crate::process::watchdog::SUBCOMMAND)
    {
        return match args.get(2).and_then(|ms| ms.to_str()?.parse().ok()) {
            Some(ms) if args.len() == 3 => {
                crate::process::watchdog::serve(std::time::Duration::from_millis(ms))
            }
            _ => {
                say!(
                    "usage: helixflow {} GRACE_MS",
                    crate::process::watchdog::SUBCOMMAND
                );
                crate::exit::INVALID
            }
        };
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            if hook::is_hook_run(&args) {
                // Exit code 2 would refuse the agent's stop, again and again.
                return hook::fail_open("its arguments cannot be read");
            }
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    crate::exit::SUCCESS
                }
                _ => crate::exit::INVALID,
            };
        }
    };
    command(cli.command).unwrap_or_else(failure::Failure::report)
}

/// Runs a subcommand.
fn command(command: Command) -> Outcome {
    match command {
        Command::Run(args) => run::run(&args),
        Command::Verify(args) => verify::run(&args),
        Command::Check(args) => check::run(&args),
        Command::Status(args) => status::run(&args),
        Command::Approve(args) => approve::approve(&args),
        Command::Reject(args) => approve::reject(&args),
        Command::Runs(args) => runs::runs(&args),
        Command::Show(args) => runs::show(&args),
        Command::Report(args) => report::run(&args),
        Command::Bundle(args) => bundle::run(&args),
        Command::Lint(args) => lint::run(&args),
        Command::Graph(args) => graph::run(&args),
        Command::Export(args) => export::run(&args),
        Command::Fmt(args) => fmt::run(&args),
        Command::Explain(args) => explain::run(&args),
        Command::Compile(args) => compile::run(&args),
        Command::Lock(args) => lock::run(&args),
        Command::Schema(args) => schema::run(&args),
        Command::Lsp(args) => lsp::run(&args),
        Command::Hook(args) => hook::run(&args),
        Command::Mcp(args) => mcp::run(&args),
        Command::Completions { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command, "helixflow", &mut script);
            emit(&String::from_utf8_lossy(&script))
        }
    }
}

/// The runtime of `run`, `check` and `verify`: one thread drives every phase (see `run`).
fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::internal(format!("cannot start the runtime: {e}")))
}

/// Writes command output to standard output. A reader that went away (`| head`) is not an
/// error worth a message; other write failures are.
fn emit(text: &str) -> Outcome {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(crate::exit::SUCCESS),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(crate::exit::SUCCESS),
        Err(e) => Err(Failure::internal(format!(
            "cannot write to standard output: {e}"
        ))),
    }
}

/// A pipeline file argument, defaulting to the nearest helixflow.kdl or pipeline.kdl.
fn pipeline_path(file: Option<PathBuf>) -> Result<PathBuf, String> {
    if let Some(file) = file {
        return Ok(file);
    }
    let cwd =
        std::env::current_dir().map_err(|e| format!("cannot read the current folder: {e}"))?;
    let found = pipeline_path_from(&cwd).map_err(|_| {
        "no pipeline file given, and no helixflow.kdl or pipeline.kdl in this folder or a parent"
            .to_owned()
    })?;
    // Reported relative to the current folder, as a user would type it.
    let depth = cwd.ancestors().count() - found.parent().map_or(0, |p| p.ancestors().count());
    let mut relative: PathBuf = std::iter::repeat_n("..", depth).collect();
    relative.push(found.file_name().unwrap_or_default());
    Ok(relative)
}

/// The nearest helixflow.kdl or pipeline.kdl in `folder` or a parent, as `folder` is joined.
fn pipeline_path_from(folder: &std::path::Path) -> Result<PathBuf, String> {
    for folder in folder.ancestors() {
        for name in ["helixflow.kdl", "pipeline.kdl"] {
            if folder.join(name).is_file() {
                return Ok(folder.join(name));
            }
        }
    }
    Err(format!(
        "no pipeline file given, and no helixflow.kdl or pipeline.kdl in {} or a parent",
        folder.display()
    ))
}
