//! The run lock: one `helixflow run` at a time per state folder. Real runs of the binary whose
//! `run` step blocks until the test lets it go, a second run started beside them (refused, or
//! waiting with `--wait`), and a helixflow killed with SIGKILL whose lock does not outlive it.

use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{Test, latest_run};

/// A `run` step that notes each call in `calls.log` and says it started; the first call then
/// waits until `release` exists (or, with `HOLD_FOREVER`, for ever and ignoring TERM: only KILL
/// stops it), later calls end at once. A call that finds the previous call's process still alive
/// leaves `overlap`.
const STEP: &str = r#"
import os, signal, time
if os.environ.get("HOLD_FOREVER"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
def alive(pid):
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
if os.path.exists("step.pid") and alive(int(open("step.pid").read())):
    open("overlap", "w").write("a step of another run was still running")
open("step.pid.tmp", "w").write(str(os.getpid()))
os.replace("step.pid.tmp", "step.pid")
with open("calls.log", "a") as log:
    log.write("call\n")
calls = len(open("calls.log").read().splitlines())
open("started", "w").close()
if calls == 1:
    while os.environ.get("HOLD_FOREVER") or not os.path.exists("release"):
        time.sleep(0.02)
"#;

const PIPELINE: &str = r#"pipeline "p"
phase "work" {
    run "python3 step.py"
    retries 0
}
"#;

fn project() -> Test {
    Test::new().file("step.py", STEP).pipeline(PIPELINE)
}

/// A helixflow a test started. Should the test fail while it runs, it is killed, and so is the
/// step it started (a step that ignores TERM would outlive the watchdog's grace period): a failed
/// test leaves no process behind.
struct Started {
    child: Child,
    dir: PathBuf,
}

impl Deref for Started {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.child
    }
}

impl DerefMut for Started {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.child
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let Some(step) = std::fs::read_to_string(self.dir.join("step.pid"))
            .ok()
            .and_then(|pid| pid.parse::<i32>().ok())
        else {
            return;
        };
        // Only while that process is still a step in this test's folder: ids are reused.
        let cwd = std::fs::read_link(format!("/proc/{step}/cwd")).ok();
        if cwd.is_some() && cwd == self.dir.canonicalize().ok() {
            // SAFETY: SIGKILL to a step this test's run started.
            unsafe { libc::kill(step, libc::SIGKILL) };
        }
    }
}

/// `helixflow ARGS` in the test's folder, its standard error going to `stderr_file`.
fn start(test: &Test, args: &[&str], stderr_file: &str, env: &[(&str, &str)]) -> Started {
    let stderr = std::fs::File::create(test.path().join(stderr_file)).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_helixflow"));
    command
        .args(args)
        .current_dir(test.path())
        .env("NO_COLOR", "1")
        .env("HELIXFLOW_KILL_GRACE", "1")
        .env_remove("HELIXFLOW_PATH")
        .stdout(Stdio::null())
        .stderr(stderr);
    for (key, value) in env {
        command.env(key, value);
    }
    Started {
        child: command.spawn().unwrap(),
        dir: test.path().to_owned(),
    }
}

/// Waits (up to a generous limit, for a loaded machine) until `done` holds.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_mins(1),
            "{what} never happened"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_for_file(path: &Path) {
    wait_until(&format!("{} appearing", path.display()), || path.exists());
}

fn calls(test: &Test) -> usize {
    std::fs::read_to_string(test.path().join("calls.log"))
        .unwrap_or_default()
        .lines()
        .count()
}

fn run_id(run: &Path) -> String {
    run.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn a_second_run_stops_at_once_naming_the_live_run_and_starts_nothing() {
    let test = project();
    let mut first = start(&test, &["run", "--no-progress"], "first.err", &[]);
    wait_for_file(&test.path().join("started"));
    let live = run_id(&latest_run(test.path()));
    let pid = first.id();

    let second = test.with_args(&["run", "--no-progress"]).run().code(4);
    let stderr = second.stderr_redacted();
    assert!(
        stderr.starts_with(&format!(
            "error: run {live} (pid {pid}, since 20"
        )) && stderr.contains(&format!(
            ") is running in this workspace: one run at a time per state folder ([TMP]/.helixflow); wait for it with `helixflow run --wait`, or stop it (Ctrl-C where it runs, or `kill {pid}`)\n"
        )),
        "{stderr}"
    );
    // The README quotes this message, with example values.
    let since = stderr
        .split_once("since ")
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(since, _)| since)
        .unwrap();
    let as_quoted = stderr
        .replace(&live, "20261122-150000")
        .replace(since, "2026-11-22T15:00:00Z")
        .replace(&format!("(pid {pid},"), "(pid 4242,")
        .replace(&format!("`kill {pid}`"), "`kill 4242`")
        .replace("[TMP]", "/home/me/project");
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    assert!(
        readme.contains(&format!("\n```text\n{as_quoted}```\n")),
        "the README does not quote\n{as_quoted}"
    );
    assert_eq!(calls(&test), 1, "the refused run started the phase again");
    assert_eq!(
        crate::common::run_folders(&test.path().join(".helixflow/runs")).len(),
        1,
        "the refused run made a run folder"
    );

    // Those that read the state folder say the run is live, with its process.
    let running = format!("running (pid {pid})");
    let status = test.with_args(&["status"]).run().code(0);
    assert!(
        status
            .stdout
            .contains(&format!("run {live} is running (pid {pid}, since 20"))
            && status.stdout.contains(&format!(
                "    - not finished yet in run {live}, which is running (pid {pid})\n"
            ))
            && !status.stdout.contains("stopped"),
        "{}",
        status.stdout
    );
    let json = test.with_args(&["status", "--json"]).run().code(0).json();
    assert_eq!(json["running"]["run-id"], live.as_str());
    assert_eq!(json["running"]["pid"], pid);
    assert_eq!(json["resumes"], serde_json::Value::Null);
    let runs = test.with_args(&["runs"]).run().code(0);
    assert!(
        runs.stdout
            .lines()
            .any(|l| l.starts_with(&live) && l.contains(&running)),
        "{}",
        runs.stdout
    );
    let show = test.with_args(&["show"]).run().code(0);
    assert!(
        show.stdout.contains(&format!("status: {running}\n")),
        "{}",
        show.stdout
    );
    let dry = test.with_args(&["run", "--dry-run"]).run().code(0);
    assert!(
        dry.stdout
            .contains(&format!("run {live} is running (pid {pid}")),
        "{}",
        dry.stdout
    );
    // `check` takes no lock: it runs, and warns that the files may change under it.
    let check = test.with_args(&["check", "--no-progress"]).run().code(0);
    assert!(
        check
            .stderr
            .contains(&format!("warning: run {live} (pid {pid}, since "))
            && check.stderr.contains(
                "is running in this workspace: its agents may change files while they are checked"
            ),
        "{}",
        check.stderr
    );

    let verify = test.with_args(&["verify", "--phase", "work"]).run().code(0);
    assert!(
        verify
            .stderr
            .starts_with(&format!("warning: run {live} (pid {pid}, since ")),
        "{}",
        verify.stderr
    );

    std::fs::write(test.path().join("release"), "").unwrap();
    assert_eq!(first.wait().unwrap().code(), Some(0));
    assert_eq!(calls(&test), 1);
    let runs = test.with_args(&["runs"]).run().code(0);
    assert!(!runs.stdout.contains("running"), "{}", runs.stdout);
    let status = test.with_args(&["status"]).run().code(0);
    assert!(!status.stdout.contains("running"), "{}", status.stdout);
    // The lock is free again: the next run goes ahead (the phase is up to date).
    let next = test.with_args(&["run", "--no-progress"]).run().code(0);
    assert!(
        next.stderr
            .contains(&format!("[work] up to date: passed in run {live}")),
        "{}",
        next.stderr
    );
}

#[test]
fn run_wait_waits_for_the_live_run_and_plans_from_what_it_left() {
    let test = project();
    let mut first = start(&test, &["run", "--no-progress"], "first.err", &[]);
    wait_for_file(&test.path().join("started"));
    let live = run_id(&latest_run(test.path()));
    let mut second = start(
        &test,
        &["run", "--no-progress", "--wait"],
        "second.err",
        &[],
    );
    let second_err = test.path().join("second.err");
    wait_until("the second run saying that it waits", || {
        std::fs::read_to_string(&second_err).is_ok_and(|t| t.contains("waiting for"))
    });
    let waiting = std::fs::read_to_string(&second_err).unwrap();
    assert!(
        waiting.starts_with(&format!(
            "waiting for run {live} (pid {}, since 20",
            first.id()
        )),
        "{waiting}"
    );
    // It waits in the kernel's lock: it has made no run folder and started no phase.
    assert_eq!(calls(&test), 1);
    assert_eq!(run_id(&latest_run(test.path())), live);

    std::fs::write(test.path().join("release"), "").unwrap();
    assert_eq!(first.wait().unwrap().code(), Some(0));
    assert_eq!(second.wait().unwrap().code(), Some(0));
    // It read the records only once the first run had ended: its phase was up to date.
    let stderr = std::fs::read_to_string(&second_err).unwrap();
    assert!(
        stderr.contains(&format!("[work] up to date: passed in run {live}")),
        "{stderr}"
    );
    assert_eq!(calls(&test), 1);
}

#[test]
fn of_two_runs_started_together_exactly_one_runs() {
    let test = project();
    let mut a = start(&test, &["run", "--no-progress"], "a.err", &[]);
    let mut b = start(&test, &["run", "--no-progress"], "b.err", &[]);
    // The refused one ends at once; the other waits in its step for `release`.
    let (refused, mut running, refused_err) = loop {
        if let Some(status) = a.try_wait().unwrap() {
            break (status, b, "a.err");
        }
        if let Some(status) = b.try_wait().unwrap() {
            break (status, a, "b.err");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = std::fs::read_to_string(test.path().join(refused_err)).unwrap();
    assert_eq!(refused.code(), Some(4), "{stderr}");
    assert!(stderr.contains("is running in this workspace"), "{stderr}");
    wait_for_file(&test.path().join("started"));
    std::fs::write(test.path().join("release"), "").unwrap();
    assert_eq!(running.wait().unwrap().code(), Some(0));
    assert_eq!(calls(&test), 1);
}

#[test]
fn a_run_killed_outright_leaves_no_lock_and_the_next_run_starts_after_its_agents_stopped() {
    let test = project();
    let mut killed = start(
        &test,
        &["run", "--no-progress"],
        "killed.err",
        &[("HOLD_FOREVER", "1")],
    );
    wait_for_file(&test.path().join("started"));
    let crashed = run_id(&latest_run(test.path()));
    // SIGKILL: helixflow can release nothing itself.
    killed.kill().unwrap();
    killed.wait().unwrap();
    let runs = test.with_args(&["runs"]).run().code(0);
    assert!(
        runs.stdout
            .lines()
            .any(|l| l.starts_with(&crashed) && l.contains(" crashed ")),
        "{}",
        runs.stdout
    );
    // The kernel drops the lock with the last process holding it: the killed run's watchdog,
    // once it has stopped the step (TERM, which it ignores, the grace period, then KILL).
    let next = test
        .with_args(&["run", "--no-progress", "--wait"])
        .run()
        .code(0);
    assert!(
        !test.path().join("overlap").exists(),
        "the new run started while the killed run's step was still running"
    );
    assert!(
        next.stderr.contains(&format!("resumes run {crashed}")),
        "{}",
        next.stderr
    );
    assert_eq!(calls(&test), 2);
    // And without `--wait`, nothing is left in the way.
    test.with_args(&["run", "--no-progress", "--force"])
        .run()
        .code(0);
    assert_eq!(calls(&test), 3);
}

#[test]
fn while_a_killed_runs_step_is_being_stopped_a_new_run_says_so() {
    let test = project();
    // A long grace period: the step ignores TERM, and stops only when this test kills it.
    let mut killed = start(
        &test,
        &["run", "--no-progress"],
        "killed.err",
        &[("HOLD_FOREVER", "1"), ("HELIXFLOW_KILL_GRACE", "600")],
    );
    wait_for_file(&test.path().join("started"));
    let crashed = run_id(&latest_run(test.path()));
    let pid = killed.id();
    killed.kill().unwrap();
    killed.wait().unwrap();
    let refused = test.with_args(&["run", "--no-progress"]).run().code(4);
    assert!(
        refused.stderr.starts_with(&format!("error: run {crashed} (pid {pid}, since ")) && refused.stderr.ends_with(
            "): its helixflow was killed, and its watchdog is still stopping the agents it left (TERM, then KILL after the grace period); wait for that with `helixflow run --wait`\n"
        ),
        "{}",
        refused.stderr
    );
    assert_eq!(calls(&test), 1);
    let status = test.with_args(&["status"]).run().code(0);
    assert!(
        status.stdout.contains(&format!(
            "the next run resumes run {crashed}, which did not pass"
        )),
        "{}",
        status.stdout
    );
    let step: i32 = test.read("step.pid").parse().unwrap();
    // SAFETY: killing the step this test's run started.
    unsafe { libc::kill(step, libc::SIGKILL) };
    test.with_args(&["run", "--no-progress", "--wait"])
        .run()
        .code(0);
    assert!(!test.path().join("overlap").exists());
    assert_eq!(calls(&test), 2);
}

#[test]
fn a_lock_file_naming_a_live_process_is_not_a_lock() {
    // Left by a run whose process id now belongs to another process (here: this test's): only
    // the kernel's lock counts, never the process id in the file.
    let test = project().file("release", "").file(
        ".helixflow/run.lock",
        &format!(
            "{{\"run-id\":\"20200101-000000\",\"pid\":{},\"since\":\"2020-01-01T00:00:00Z\"}}\n",
            std::process::id()
        ),
    );
    test.with_args(&["run", "--no-progress"]).run().code(0);
    assert_eq!(calls(&test), 1);
    let status = test.with_args(&["status"]).run().code(0);
    assert!(!status.stdout.contains("running"), "{}", status.stdout);
}
