//! The `command` gate: a shell command exits 0, perhaps after its `fix` ran.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::files::clean;
use super::{Finding, GateContext, GateInfo, ProtectWatch, last_lines};
use crate::event::{ChildExit, how_it_ended};
use crate::process::{self, ChildSpec};

/// What helixflow says about the `command` gate.
pub(super) const INFO: GateInfo = GateInfo {
    intro: "The command failed:",
    how_to_fix: "run the command yourself, read its output, and fix what it reports",
    outside_a_run: None,
};

/// Most lines of each stream of a failing command's output in its report.
const TAIL_LINES: usize = 40;
/// Most bytes of each stream of a failing command's output in its report.
const TAIL_BYTES: u64 = 4096;

/// What the gate checks, for the agent.
pub(super) fn describe(run: &str) -> String {
    format!("`{run}` exits 0")
}

/// One `command` gate, ready to run.
pub(super) struct CommandGate<'g> {
    pub(super) run: &'g str,
    pub(super) timeout: Option<Duration>,
    pub(super) cwd: Option<&'g str>,
    pub(super) fix: Option<&'g str>,
    /// `gate-<n>-<name>`: the start of its log files' names.
    pub(super) log_stem: String,
}

/// One run of a shell command and where its output went.
struct ShellRun {
    exit: ChildExit,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl CommandGate<'_> {
    #[allow(
        clippy::too_many_lines,
        reason = "not yet cut into named steps; a known exception to remove"
    )]
    pub(super) async fn check(&self, ctx: &GateContext<'_>, watch: &mut ProtectWatch) -> Finding {
        let cwd = match self.cwd {
            None => ctx.workspace.to_owned(),
            Some(cwd) => {
                let full = ctx.workspace.join(clean(cwd));
                if !full.is_dir() {
                    return Finding::failed(format!(
                        "the gate's working folder `{cwd}` does not exist"
                    ));
                }
                full
            }
        };
        let first = match self.shell(ctx, self.run, &cwd, "", watch).await {
            Ok(run) => run,
            Err(detail) => return Finding::failed(detail),
        };
        if first.exit.cancelled {
            return Finding::cancelled();
        }
        if first.exit.success() {
            return Finding::from_problems(Vec::new());
        }
        let Some(fix) = self.fix else {
            return Finding::failed(format!(
                "`{}` {}\n{}",
                self.run,
                ended(&first.exit, self.timeout),
                command_output(&first)
            ));
        };

        let fixed = match self.shell(ctx, fix, &cwd, ".fix", watch).await {
            Ok(run) => run,
            Err(detail) => {
                return Finding::failed(format!(
                    "`{}` {}; then the fix could not run: {detail}\n{}",
                    self.run,
                    ended(&first.exit, self.timeout),
                    command_output(&first)
                ));
            }
        };
        if fixed.exit.cancelled {
            return Finding::cancelled();
        }
        let second = match self.shell(ctx, self.run, &cwd, ".recheck", watch).await {
            Ok(run) => run,
            Err(detail) => return Finding::failed(detail),
        };
        if second.exit.cancelled {
            return Finding::cancelled();
        }
        let fix_said = if fixed.exit.success() {
            format!("the fix `{fix}` ran")
        } else {
            format!(
                "the fix `{fix}` ran and {}",
                ended(&fixed.exit, self.timeout)
            )
        };
        if second.exit.success() {
            return Finding::passed_with(format!(
                "`{}` {} at first; it passed after {fix_said}",
                self.run,
                ended(&first.exit, self.timeout)
            ));
        }
        let mut detail = format!(
            "`{}` {}; {fix_said}; then `{}` {} again\n{}",
            self.run,
            ended(&first.exit, self.timeout),
            self.run,
            ended(&second.exit, self.timeout),
            command_output(&second)
        );
        if !fixed.exit.success()
            && let Some(said) = output_tail(&fixed, "the fix's ")
        {
            let _ = write!(detail, "\n{said}");
        }
        Finding::failed(detail)
    }

    /// Runs `command` with the gate's limits, logging to `<stem><suffix>.stdout`/`.stderr`;
    /// `watch` notes each protected file that changed while it ran.
    async fn shell(
        &self,
        ctx: &GateContext<'_>,
        command: &str,
        cwd: &Path,
        suffix: &str,
        watch: &mut ProtectWatch,
    ) -> Result<ShellRun, String> {
        watch.start(ctx).await;
        let stdout = ctx.logs.join(format!("{}{suffix}.stdout", self.log_stem));
        let stderr = ctx.logs.join(format!("{}{suffix}.stderr", self.log_stem));
        let mut spec = ChildSpec::shell(command, cwd, &stdout, &stderr);
        spec.timeout = self.timeout;
        spec.env = ctx.env.to_vec();
        spec.redactor = Arc::clone(&ctx.redactor);
        spec.grace = ctx.grace;
        let ran = process::run(spec, ctx.cancel).await;
        let what = if suffix == ".fix" {
            format!("the fix `{command}`")
        } else {
            format!("`{command}`")
        };
        watch.look(ctx, &what).await;
        match ran {
            Ok(exit) => Ok(ShellRun {
                exit,
                stdout,
                stderr,
            }),
            Err(error) => Err(format!("`{command}` could not be started: {error}")),
        }
    }
}

/// "exited with code 1", "timed out after 5m and was stopped", "was ended by signal 9 (SIGKILL)".
fn ended(exit: &ChildExit, limit: Option<Duration>) -> String {
    if exit.timeout.is_some() {
        let limit = limit.unwrap_or(Duration::from_secs(exit.duration_ms / 1000));
        return format!(
            "timed out after {} and was stopped",
            humantime::format_duration(limit)
        );
    }
    how_it_ended(exit.code, exit.signal)
}

/// The labelled tails (`{whose}stdout:`, `{whose}stderr:`) of a run's standard output and
/// standard error; None when it wrote nothing.
fn output_tail(run: &ShellRun, whose: &str) -> Option<String> {
    let mut text = String::new();
    for (label, path) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        let tail = match process::tail(path, TAIL_BYTES) {
            Ok(tail) => {
                // A tail cut from a longer log starts mid-line: drop that partial line.
                let cut = std::fs::metadata(path).is_ok_and(|m| m.len() > TAIL_BYTES);
                match tail.split_once('\n') {
                    Some((_, rest)) if cut && !rest.trim().is_empty() => {
                        last_lines(rest, TAIL_LINES)
                    }
                    // One long last line: its end is what matters (an assertion, an error).
                    _ if cut => format!("…{}", last_lines(&tail, TAIL_LINES)),
                    _ => last_lines(&tail, TAIL_LINES),
                }
            }
            Err(error) => format!("(could not read {}: {error})", path.display()),
        };
        if tail.trim().is_empty() {
            continue;
        }
        if !text.is_empty() {
            text.push('\n');
        }
        let _ = write!(text, "{whose}{label}:\n{tail}");
    }
    (!text.is_empty()).then_some(text)
}

/// The output tail of a run of the gate's command, which says so when there was none.
fn command_output(run: &ShellRun) -> String {
    output_tail(run, "").unwrap_or_else(|| "(no output)".to_owned())
}

/// A gate name made safe for a file name.
pub(super) fn file_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect()
}
