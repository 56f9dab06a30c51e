//! Process supervision, response extraction and the transcript check, with real child processes
//! (small `sh` and `python3` scripts written into temporary folders) and real files.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use helixflow::Redactor;
use helixflow::ResponseFormat;
use helixflow::TimeoutKind;
use helixflow::child as process;
use helixflow::{Cancel, ChildSpec};
use helixflow::{ResponseError, response};

/// Tests that measure this process's memory take this lock, and so do tests that use a lot of it,
/// so one does not see the other's allocations.
static MEMORY: Mutex<()> = Mutex::new(());

fn memory_lock() -> MutexGuard<'static, ()> {
    MEMORY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A temporary workspace with log paths.
struct Work {
    dir: tempfile::TempDir,
}

impl Work {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    /// `sh -c SCRIPT` in the workspace, logging to `out.log` and `err.log`, with a short grace.
    fn shell(&self, script: &str) -> ChildSpec {
        let mut spec = ChildSpec::shell(
            script,
            self.root(),
            self.path("out.log"),
            self.path("err.log"),
        );
        spec.grace = Duration::from_millis(500);
        spec
    }

    /// An executable script file in the workspace.
    fn script(&self, name: &str, text: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.path(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn read(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.path(name)).unwrap()
    }

    fn read_string(&self, name: &str) -> String {
        String::from_utf8(self.read(name)).unwrap()
    }

    /// Waits (up to a minute, so a slow machine does not fail the test) until the file exists.
    async fn wait_for(&self, name: &str) {
        let path = self.path(name);
        for _ in 0..6000 {
            if path.exists() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{name} never appeared");
    }

    /// The process ids listed in a file, one per line.
    fn pids(&self, name: &str) -> Vec<i32> {
        self.read_string(name)
            .lines()
            .map(|line| line.trim().parse().unwrap())
            .collect()
    }
}

/// The processes of group `pgid` that are alive (zombies are dead: only their exit status is left,
/// and in some containers nobody reaps orphaned ones).
fn live_members(pgid: i32) -> Vec<i32> {
    let mut live = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Some((state, group)) = stat(pid) else {
            continue;
        };
        if group == pgid && state != "Z" && state != "X" {
            live.push(pid);
        }
    }
    live
}

/// Whether the process is alive (not gone, not a zombie).
fn alive(pid: i32) -> bool {
    stat(pid).is_some_and(|(state, _)| state != "Z" && state != "X")
}

/// The state and process group of a process, from `/proc/PID/stat`.
fn stat(pid: i32) -> Option<(String, i32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some((fields.first()?.to_string(), fields.get(2)?.parse().ok()?))
}

/// Asserts that no process of the group is left.
fn assert_group_gone(pgid: i32) {
    assert_eq!(
        live_members(pgid),
        Vec::<i32>::new(),
        "processes of group {pgid} survived"
    );
    // SAFETY: signal 0 only checks for existence.
    let result = unsafe { libc::killpg(pgid, 0) };
    if result == 0 {
        // Only zombies may be left (the container's init may not reap orphans).
        assert!(live_members(pgid).is_empty());
    } else {
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::ESRCH)
        );
    }
}

/// This process's peak resident memory, in bytes, after resetting the peak where Linux allows it.
fn reset_peak_memory() -> u64 {
    // "5" resets VmHWM to the current RSS (Linux 4.0+); where that is refused the peak is simply
    // higher, which can only make the bound looser, never fail a correct implementation.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    peak_memory()
}

fn peak_memory() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|line| line.starts_with("VmHWM:"))
        .unwrap();
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

fn hash_file(path: &Path) -> blake3::Hash {
    let mut hasher = blake3::Hasher::new();
    hasher
        .update_reader(std::fs::File::open(path).unwrap())
        .unwrap();
    hasher.finalize()
}

// ---------------------------------------------------------------------------------------------
// Exit codes, signals, start errors, environment.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_are_reported() {
    let work = Work::new();
    let exit = process::run(work.shell("exit 3"), &Cancel::default())
        .await
        .unwrap();
    assert_eq!(exit.code, Some(3));
    assert_eq!(exit.signal, None);
    assert_eq!(exit.timeout, None);
    assert!(!exit.cancelled);
    assert!(!exit.success());

    let exit = process::run(work.shell("true"), &Cancel::default())
        .await
        .unwrap();
    assert_eq!(exit.code, Some(0));
    assert!(exit.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_that_ends_the_child_is_reported() {
    let work = Work::new();
    let exit = process::run(work.shell("kill -USR1 $$"), &Cancel::default())
        .await
        .unwrap();
    assert_eq!(exit.signal, Some(libc::SIGUSR1));
    assert_eq!(exit.code, None);
    assert!(!exit.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_program_is_an_error_naming_it() {
    let work = Work::new();
    let argv = vec!["helixflow-test-no-such-program".to_owned(), "x".to_owned()];
    let spec = ChildSpec::argv(&argv, work.root(), work.path("o"), work.path("e")).unwrap();
    let error = process::run(spec, &Cancel::default()).await.unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::NotFound);
    let message = error.to_string();
    assert!(
        message.contains("`helixflow-test-no-such-program`"),
        "{message}"
    );
    assert!(message.contains("not found"), "{message}");

    let argv = vec!["/no/such/dir/agent".to_owned()];
    let spec = ChildSpec::argv(&argv, work.root(), work.path("o"), work.path("e")).unwrap();
    let message = process::run(spec, &Cancel::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(message.contains("`/no/such/dir/agent`"), "{message}");

    let missing = work.path("missing-dir");
    let spec = ChildSpec::shell("true", &missing, work.path("o"), work.path("e"));
    let message = process::run(spec, &Cancel::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(message.contains("working directory"), "{message}");
}

/// A `bin` folder in the workspace put first on the child's `PATH`.
fn path_with_bin(work: &Work) -> (std::ffi::OsString, std::ffi::OsString) {
    let mut folders = vec![work.path("bin")];
    folders.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    ("PATH".into(), std::env::join_paths(folders).unwrap())
}

// A command that is a plain list of words starts without the shell (see engine/shell.rs); what
// the child sees and what the run reports must be what `sh -c` gives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_commands_behave_as_under_the_shell() {
    let work = Work::new();
    std::fs::create_dir(work.path("bin")).unwrap();
    work.script(
        "bin/hf-tool",
        "#!/bin/sh\nprintf '%s|' \"$@\" \"$HF_TEST_VAR\"; pwd; echo oops >&2; exit 4\n",
    );
    // On the child's PATH (set for it, not helixflow's), with arguments, environment and cwd.
    let mut spec = work.shell("hf-tool  a,b  --x=1\tc.d");
    spec.env = vec![path_with_bin(&work), ("HF_TEST_VAR".into(), "v".into())];
    let exit = process::run(spec, &Cancel::default()).await.unwrap();
    assert_eq!(exit.code, Some(4));
    let root = std::fs::canonicalize(work.root()).unwrap();
    assert_eq!(
        work.read_string("out.log"),
        format!("a,b|--x=1|c.d|v|{}\n", root.display())
    );
    assert_eq!(work.read_string("err.log"), "oops\n");

    // Not found: the shell's own message and exit code.
    let mut spec = work.shell("hf-test-no-such-program x");
    spec.env = vec![path_with_bin(&work)];
    let exit = process::run(spec, &Cancel::default()).await.unwrap();
    assert_eq!(exit.code, Some(127));
    assert!(
        work.read_string("err.log").contains("not found"),
        "{}",
        work.read_string("err.log")
    );

    // A script without `#!` cannot be exec'd; the shell runs it as a shell script.
    work.script(
        "bin/hf-plain-script",
        "printf 'ran as a script %s' \"$1\"\n",
    );
    let mut spec = work.shell("hf-plain-script arg");
    spec.env = vec![path_with_bin(&work)];
    let exit = process::run(spec, &Cancel::default()).await.unwrap();
    assert_eq!(exit.code, Some(0));
    assert_eq!(work.read_string("out.log"), "ran as a script arg");
    assert_eq!(work.read_string("err.log"), "");

    // The shell's own words stay the shell's: its `echo`, not the program (dash's prints `-e`).
    let exit = process::run(work.shell("echo -e x"), &Cancel::default())
        .await
        .unwrap();
    assert_eq!(exit.code, Some(0));
    let shell = std::process::Command::new("/bin/sh")
        .args(["-c", "echo -e x"])
        .output()
        .unwrap();
    assert_eq!(work.read("out.log"), shell.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn environment_is_inherited_and_extended_and_cwd_is_the_workspace() {
    let work = Work::new();
    let mut spec =
        work.shell(r#"printf '%s|%s|%s|' "$HF_TEST_ADDED" "$HF_TEST_OVERRIDE" "$PATH"; pwd"#);
    spec.env = vec![
        ("HF_TEST_ADDED".into(), "one".into()),
        ("HF_TEST_OVERRIDE".into(), "first".into()),
        ("HF_TEST_OVERRIDE".into(), "second".into()),
    ];
    let exit = process::run(spec, &Cancel::default()).await.unwrap();
    assert!(exit.success());
    let out = work.read_string("out.log");
    let path = std::env::var("PATH").unwrap();
    let cwd = work.root().canonicalize().unwrap();
    assert_eq!(out, format!("one|second|{path}|{}\n", cwd.display()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_already_cancelled_run_starts_nothing() {
    let work = Work::new();
    let cancel = Cancel::default();
    cancel.soft.cancel();
    let exit = process::run(work.shell("touch started"), &cancel)
        .await
        .unwrap();
    assert!(exit.cancelled);
    assert!(!exit.success());
    assert!(!work.path("started").exists());
    assert!(work.path("out.log").exists());
}

// ---------------------------------------------------------------------------------------------
// Timeouts, cancellation, orphans.

/// A child that notes each TERM it gets in `term` (and goes on), records its group, forks two
/// grandchildren (one of which ignores TERM), says `working` and never ends on its own. The trap
/// comes first so that even a TERM sent very early is noted rather than fatal.
const STUBBORN: &str = r#"
trap 'echo "got TERM" >> term' TERM
echo $$ > pgid.tmp && mv pgid.tmp pgid
sleep 100 &
echo $! >> grandchildren
sh -c 'trap "" TERM; exec sleep 100' &
echo $! >> grandchildren
echo working
touch ready
while :; do sleep 0.2; done
"#;

/// The grace period for [`STUBBORN`]: long enough for its trap to run on a busy machine (a TERM
/// that lands between `fork` and `exec` of a `sleep` is only acted on when that sleep ends).
const STUBBORN_GRACE: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_stops_the_whole_group_term_first_then_kill() {
    let work = Work::new();
    let mut spec = work.shell(STUBBORN);
    spec.grace = STUBBORN_GRACE;
    spec.timeout = Some(Duration::from_secs(3));
    let exit = process::run(spec, &Cancel::default()).await.unwrap();
    assert_eq!(exit.timeout, Some(TimeoutKind::Wall));
    assert!(!exit.cancelled);
    // It ignored TERM (the trap only notes it), so KILL ended it after the grace period.
    assert_eq!(exit.signal, Some(libc::SIGKILL));
    assert!(work.read_string("term").contains("got TERM"));
    let pgid = work.pids("pgid")[0];
    assert_group_gone(pgid);
    for pid in work.pids("grandchildren") {
        assert!(!alive(pid), "grandchild {pid} survived");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_timeout_stops_a_silent_child_and_its_group() {
    let work = Work::new();
    let mut spec = work.shell(STUBBORN);
    spec.grace = STUBBORN_GRACE;
    spec.idle_timeout = Some(Duration::from_millis(1500));
    let exit = process::run(spec, &Cancel::default()).await.unwrap();
    assert_eq!(exit.timeout, Some(TimeoutKind::Idle));
    assert_eq!(exit.signal, Some(libc::SIGKILL));
    assert!(work.read_string("term").contains("got TERM"));
    assert_eq!(work.read_string("out.log"), "working\n");
    assert_group_gone(work.pids("pgid")[0]);
    for pid in work.pids("grandchildren") {
        assert!(!alive(pid), "grandchild {pid} survived");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_keeps_the_idle_timeout_away() {
    let work = Work::new();
    // Output every 0.1 s for about 2 s, against an idle limit of 1.5 s: stderr counts too.
    let mut spec =
        work.shell("i=0; while [ $i -lt 20 ]; do echo tick >&2; sleep 0.1; i=$((i+1)); done");
    spec.idle_timeout = Some(Duration::from_millis(1500));
    let exit = process::run(spec, &Cancel::default()).await.unwrap();
    assert_eq!(exit.timeout, None);
    assert!(exit.success());
    assert_eq!(exit.stderr_bytes, 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soft_cancel_sends_term_then_kill_to_the_group() {
    let work = Work::new();
    let cancel = Cancel::default();
    let task = tokio::spawn({
        let mut spec = work.shell(STUBBORN);
        spec.grace = STUBBORN_GRACE;
        let cancel = cancel.clone();
        async move { process::run(spec, &cancel).await }
    });
    work.wait_for("ready").await;
    cancel.soft.cancel();
    let exit = task.await.unwrap().unwrap();
    assert!(exit.cancelled);
    assert_eq!(exit.timeout, None);
    assert_eq!(exit.signal, Some(libc::SIGKILL));
    assert!(work.read_string("term").contains("got TERM"));
    assert_group_gone(work.pids("pgid")[0]);
    for pid in work.pids("grandchildren") {
        assert!(!alive(pid), "grandchild {pid} survived");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hard_cancel_kills_at_once_without_term() {
    let work = Work::new();
    let cancel = Cancel::default();
    let task = tokio::spawn({
        let mut spec = work.shell(STUBBORN);
        // Were the grace period applied, the test would wait a minute (and time out below).
        spec.grace = Duration::from_mins(1);
        let cancel = cancel.clone();
        async move { process::run(spec, &cancel).await }
    });
    work.wait_for("ready").await;
    cancel.hard.cancel();
    let exit = tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("a hard cancel must not wait for the grace period")
        .unwrap()
        .unwrap();
    assert!(exit.cancelled);
    assert_eq!(exit.signal, Some(libc::SIGKILL));
    assert!(!work.path("term").exists(), "a hard cancel sends no TERM");
    assert_group_gone(work.pids("pgid")[0]);
    for pid in work.pids("grandchildren") {
        assert!(!alive(pid), "grandchild {pid} survived");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hard_cancel_cuts_a_running_grace_period_short() {
    let work = Work::new();
    let cancel = Cancel::default();
    let task = tokio::spawn({
        let mut spec = work.shell(STUBBORN);
        spec.grace = Duration::from_mins(1);
        let cancel = cancel.clone();
        async move { process::run(spec, &cancel).await }
    });
    work.wait_for("ready").await;
    cancel.soft.cancel();
    work.wait_for("term").await;
    cancel.hard.cancel();
    let exit = tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("a hard cancel must end the grace period")
        .unwrap()
        .unwrap();
    assert!(exit.cancelled);
    assert_eq!(exit.signal, Some(libc::SIGKILL));
    assert_group_gone(work.pids("pgid")[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn survivors_of_a_normal_exit_are_stopped() {
    let work = Work::new();
    // The background processes keep the output pipes open too: `run` must not wait for them.
    let spec = work.shell(
        r#"echo $$ > pgid
sleep 100 &
echo $! >> grandchildren
sh -c 'trap "" TERM; exec sleep 100' &
echo $! >> grandchildren
echo done"#,
    );
    let exit = process::run(spec, &Cancel::default()).await.unwrap();
    assert!(exit.success(), "{exit:?}");
    assert_eq!(work.read_string("out.log"), "done\n");
    assert_group_gone(work.pids("pgid")[0]);
    for pid in work.pids("grandchildren") {
        assert!(!alive(pid), "grandchild {pid} survived");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_that_leaves_the_group_does_not_hold_up_run() {
    let work = Work::new();
    // `setsid` puts the sleep in a session of its own, out of reach of the group's signals; it
    // keeps stdout open. `run` stops reading a little after the group ends instead of waiting.
    let spec = work.shell("setsid sleep 60 & echo $! > escaped; echo done");
    let exit = tokio::time::timeout(
        Duration::from_secs(30),
        process::run(spec, &Cancel::default()),
    )
    .await
    .expect("run waited for a process outside the group")
    .unwrap();
    assert!(exit.success());
    assert_eq!(work.read_string("out.log"), "done\n");
    for pid in work.pids("escaped") {
        if alive(pid) {
            // SAFETY: this test started that process; it is ended by its id.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_run_kills_the_group() {
    let work = Work::new();
    let spec = work.shell(STUBBORN);
    let cancel = Cancel::default();
    let run = process::run(spec, &cancel);
    let waiting = async {
        work.wait_for("ready").await;
    };
    tokio::select! {
        _ = run => panic!("the child never ends on its own"),
        () = waiting => {}
    }
    // `run` has been dropped here, with the child still running.
    let pgid = work.pids("pgid")[0];
    for _ in 0..3000 {
        if live_members(pgid).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_group_gone(pgid);
    assert!(!work.path("term").exists(), "dropping kills at once");
}

// ---------------------------------------------------------------------------------------------
// Output, input, arguments, redaction.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_utf8_is_logged_byte_exact_on_both_streams() {
    let work = Work::new();
    let exit = process::run(
        work.shell(r"printf 'a\377\376b\200\n'; printf '\303(\n' >&2"),
        &Cancel::default(),
    )
    .await
    .unwrap();
    assert!(exit.success());
    assert_eq!(work.read("out.log"), b"a\xff\xfeb\x80\n");
    assert_eq!(work.read("err.log"), b"\xc3(\n");
    assert_eq!(exit.stdout_bytes, 6);
    assert_eq!(exit.stderr_bytes, 3);
}

/// A plain test with a runtime of its own, so the memory lock is not held across an `.await`.
#[test]
fn a_hundred_megabytes_are_logged_byte_exact_with_flat_memory() {
    let _lock = memory_lock();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // Written by the child itself (nothing to redact), and copied through the redactor.
    for secret in [
        None,
        Some("a-secret-that-random-bytes-will-not-contain-0123456789"),
    ] {
        let work = Work::new();
        // `tee` keeps a copy of exactly what went to stdout, random (so mostly not UTF-8) bytes.
        let mut spec = work.shell("head -c 104857600 /dev/urandom | tee copy.bin");
        if let Some(secret) = secret {
            spec.redactor = Arc::new(Redactor::new([("TOKEN".to_owned(), secret.to_owned())]));
        }
        let before = reset_peak_memory();
        let exit = runtime
            .block_on(process::run(spec, &Cancel::default()))
            .unwrap();
        let growth = peak_memory().saturating_sub(before);
        assert!(exit.success());
        assert_eq!(exit.stdout_bytes, 104_857_600);
        assert_eq!(
            std::fs::metadata(work.path("out.log")).unwrap().len(),
            104_857_600
        );
        assert_eq!(
            hash_file(&work.path("out.log")),
            hash_file(&work.path("copy.bin"))
        );
        assert!(
            growth < 32 * 1024 * 1024,
            "memory grew by {growth} bytes (redacting: {})",
            secret.is_some()
        );
    }
}

/// Text that a shell would expand, in several ways, with quotes, newlines and non-ASCII.
const TRICKY: &str = "run $(rm -rf /tmp/nothing) and `id`; echo \"$HOME\" 'single' \\n\nline two\n\tgrüße ✓ 日本\n$((1+1)) ${PATH} ; | & > /dev/null *";

#[tokio::test(flavor = "current_thread")]
async fn a_child_started_from_the_blocking_pool_is_supervised_the_same() {
    let work = Work::new();
    // Output, stdin, and a grandchild that outlives the child: the group is still cleaned up.
    let mut spec = work.shell("cat; echo out; echo err >&2; (sleep 30 &) ; echo $$ > pid");
    spec.stdin = Some(b"in\n".to_vec());
    spec.spawn_in_pool = true;
    let exit = process::run(spec, &Cancel::default()).await.unwrap();
    assert!(exit.success());
    assert_eq!(work.read_string("out.log"), "in\nout\n");
    assert_eq!(work.read_string("err.log"), "err\n");
    assert_eq!(exit.stdout_bytes, 7);
    assert_group_gone(work.read_string("pid").trim().parse().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_reaches_the_child_byte_exact() {
    let work = Work::new();
    let mut spec = work.shell("cat > received");
    spec.stdin = Some(TRICKY.as_bytes().to_vec());
    let exit = process::run(spec, &Cancel::default()).await.unwrap();
    assert!(exit.success());
    assert_eq!(work.read("received"), TRICKY.as_bytes());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_does_not_read_stdin_is_no_problem() {
    let work = Work::new();
    // Far more than a pipe holds: the writer gets a broken pipe when the child has gone.
    let mut spec = work.shell("echo ignored");
    spec.stdin = Some(vec![b'x'; 8 * 1024 * 1024]);
    let exit = process::run(spec, &Cancel::default()).await.unwrap();
    assert!(exit.success());
    assert_eq!(work.read_string("out.log"), "ignored\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argv_reaches_the_child_byte_exact() {
    let work = Work::new();
    let script = work.script(
        "argv.py",
        "#!/usr/bin/env python3\nimport json, sys\nopen('argv.json', 'w', encoding='utf-8').write(json.dumps(sys.argv[1:]))\n",
    );
    let args = vec![
        TRICKY.to_owned(),
        String::new(),
        "--flag=$(whoami)".to_owned(),
        "  spaced  ".to_owned(),
        "'\"".to_owned(),
    ];
    let mut argv = vec![script.to_string_lossy().into_owned()];
    argv.extend(args.iter().cloned());
    let spec = ChildSpec::argv(&argv, work.root(), work.path("o"), work.path("e")).unwrap();
    let exit = process::run(spec, &Cancel::default()).await.unwrap();
    assert!(exit.success(), "{}", work.read_string("e"));
    let received: Vec<String> = serde_json::from_slice(&work.read("argv.json")).unwrap();
    assert_eq!(received, args);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_redacted_in_both_logs_even_when_split_across_writes() {
    let work = Work::new();
    let mut spec = work.shell(
        "printf 'key=sk-live-'; sleep 0.2; printf '0123456789 end\\n'; printf 'stderr sk-live-0123456789\\n' >&2",
    );
    spec.redactor = Arc::new(Redactor::new([(
        "API_KEY".to_owned(),
        "sk-live-0123456789".to_owned(),
    )]));
    let exit = process::run(spec, &Cancel::default()).await.unwrap();
    assert!(exit.success());
    assert_eq!(work.read_string("out.log"), "key=[REDACTED:API_KEY] end\n");
    assert_eq!(work.read_string("err.log"), "stderr [REDACTED:API_KEY]\n");
    // The counts are of what the child wrote, before redaction.
    assert_eq!(exit.stdout_bytes, 27);
    assert_eq!(exit.stderr_bytes, 26);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_reads_the_end_of_a_log() {
    let work = Work::new();
    let exit = process::run(
        work.shell("i=0; while [ $i -lt 1000 ]; do echo line $i; i=$((i+1)); done"),
        &Cancel::default(),
    )
    .await
    .unwrap();
    assert!(exit.success());
    let tail = process::tail(&work.path("out.log"), 18).unwrap();
    assert_eq!(tail, "line 998\nline 999\n");
}

// ---------------------------------------------------------------------------------------------
// Response extraction and the transcript check.

fn write(work: &Work, name: &str, text: &[u8]) -> PathBuf {
    let path = work.path(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn text_response_is_all_of_stdout() {
    let work = Work::new();
    let log = write(&work, "out.log", b"first\nsecond \xff\n");
    let response = response::extract(ResponseFormat::Text, &log).unwrap();
    assert_eq!(response.text, "first\nsecond \u{fffd}\n");
    assert_eq!(response.error, None);
}

#[test]
fn a_hundred_megabyte_text_response_keeps_the_last_mib() {
    use std::io::Write;
    let _lock = memory_lock();
    let work = Work::new();
    let path = work.path("out.log");
    {
        let mut file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        let mut written = 0_u64;
        let mut n = 0_u64;
        while written < 100 * 1024 * 1024 {
            let line = format!("output line {n:09}\n");
            file.write_all(line.as_bytes()).unwrap();
            written += line.len() as u64;
            n += 1;
        }
        file.write_all(b"THE END\n").unwrap();
    }
    let size = std::fs::metadata(&path).unwrap().len();
    let before = reset_peak_memory();
    let response = response::extract(ResponseFormat::Text, &path).unwrap();
    let growth = peak_memory().saturating_sub(before);
    let limit = response::TEXT_LIMIT;
    let marker = format!(
        "[helixflow: the first {} bytes of the output are left out]\n",
        size - limit
    );
    assert!(
        response.text.starts_with(&marker),
        "{}",
        &response.text[..200]
    );
    assert_eq!(response.text.len() as u64, marker.len() as u64 + limit);
    assert!(response.text.ends_with("THE END\n"));
    // The kept MiB, and little else.
    assert!(
        growth < limit + 8 * 1024 * 1024,
        "memory grew by {growth} bytes"
    );
}

#[test]
fn json_response_takes_result_or_response_or_the_whole_document() {
    let work = Work::new();
    let log = write(&work, "a.log", br#"{"result": "the answer", "cost": 1}"#);
    assert_eq!(
        response::extract(ResponseFormat::Json, &log).unwrap().text,
        "the answer"
    );
    let log = write(&work, "b.log", b"\n{\"response\": \"via response\"}\n");
    assert_eq!(
        response::extract(ResponseFormat::Json, &log).unwrap().text,
        "via response"
    );
    let log = write(&work, "c.log", b"{ \"success\": true,\n  \"errors\": [] }");
    let text = response::extract(ResponseFormat::Json, &log).unwrap().text;
    // Compact, whatever order serde_json keeps the keys in.
    assert!(!text.contains([' ', '\n']), "{text}");
    let reparsed: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(reparsed, serde_json::json!({"success": true, "errors": []}));
    let log = write(&work, "d.log", b"[1, 2]");
    assert_eq!(
        response::extract(ResponseFormat::Json, &log).unwrap().text,
        "[1,2]"
    );
}

#[test]
fn json_response_reports_errors() {
    let work = Work::new();
    let log = write(&work, "a.log", b"Here is the JSON: {\"a\": 1}");
    let error = response::extract(ResponseFormat::Json, &log).unwrap_err();
    assert!(matches!(error, ResponseError::InvalidJson(_)), "{error}");
    let log = write(&work, "b.log", b"{\"a\": 1} {\"b\": 2}");
    assert!(matches!(
        response::extract(ResponseFormat::Json, &log),
        Err(ResponseError::InvalidJson(_))
    ));
    let log = write(
        &work,
        "c.log",
        br#"{"type":"result","subtype":"error_during_execution","is_error":true,"result":""}"#,
    );
    let response = response::extract(ResponseFormat::Json, &log).unwrap();
    assert!(response.is_error());
    let missing = work.path("missing.log");
    let error = response::extract(ResponseFormat::Json, &missing).unwrap_err();
    assert!(matches!(error, ResponseError::Io { .. }));
    assert!(error.to_string().contains("missing.log"));
}

/// Lines as Claude Code writes them with `--output-format stream-json --verbose`, with a stray line
/// of plain text as some wrappers print.
const STREAM: &str = r#"{"type":"system","subtype":"init","cwd":"/work","session_id":"abc","tools":["Bash","Edit"],"model":"claude-sonnet-4-5"}
{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"I'll write the parser."}]},"session_id":"abc"}
{"type":"assistant","message":{"id":"msg_2","type":"message","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Write","input":{"file_path":"src/parser.py","content":"def parse():\n    pass\n"}}]},"session_id":"abc"}
warning: something printed by a wrapper
{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"File created"}]},"session_id":"abc"}
{"type":"result","subtype":"success","is_error":false,"duration_ms":1234,"num_turns":3,"result":"Done.\n<!-- STEP: done -->","session_id":"abc","total_cost_usd":0.01}
"#;

#[test]
fn stream_json_response_is_the_last_result() {
    let work = Work::new();
    let log = write(&work, "out.log", STREAM.as_bytes());
    let response = response::extract(ResponseFormat::ClaudeStreamJson, &log).unwrap();
    assert_eq!(response.text, "Done.\n<!-- STEP: done -->");
    assert_eq!(response.error, None);

    let twice = format!(
        "{STREAM}{}\n{{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"second\"}}",
        "\u{1}not json at all\u{ff}"
    );
    let log = write(&work, "twice.log", twice.as_bytes());
    let response = response::extract(ResponseFormat::ClaudeStreamJson, &log).unwrap();
    assert_eq!(response.text, "second");
}

#[test]
fn stream_json_without_result_or_with_an_error_result() {
    let work = Work::new();
    let cut = STREAM.lines().take(4).collect::<Vec<_>>().join("\n");
    let log = write(&work, "cut.log", cut.as_bytes());
    assert!(matches!(
        response::extract(ResponseFormat::ClaudeStreamJson, &log),
        Err(ResponseError::NoResult)
    ));
    let log = write(&work, "empty.log", b"");
    assert!(matches!(
        response::extract(ResponseFormat::ClaudeStreamJson, &log),
        Err(ResponseError::NoResult)
    ));
    let failed = format!(
        "{cut}\n{}\n",
        r#"{"type":"result","subtype":"error_max_turns","is_error":true,"num_turns":30}"#
    );
    let log = write(&work, "failed.log", failed.as_bytes());
    let response = response::extract(ResponseFormat::ClaudeStreamJson, &log).unwrap();
    assert_eq!(response.text, "");
    assert_eq!(
        response.error.as_deref(),
        Some("the agent reported an error: error_max_turns")
    );
}

#[test]
fn transcript_check_looks_at_stdout_and_stderr() {
    let work = Work::new();
    let stdout = write(&work, "out.log", STREAM.as_bytes());
    let stderr = write(&work, "err.log", b"progress...\nran pytest: 3 passed\n");
    let tool_use = regex::bytes::Regex::new(r#""type":"tool_use""#).unwrap();
    assert!(response::transcript_matches(&tool_use, &[&stdout, &stderr]).unwrap());
    let pytest = regex::bytes::Regex::new(r"^ran pytest: \d+ passed$").unwrap();
    assert!(response::transcript_matches(&pytest, &[&stdout, &stderr]).unwrap());
    assert!(!response::transcript_matches(&pytest, &[&stdout]).unwrap());
    let absent = regex::bytes::Regex::new("never said").unwrap();
    assert!(!response::transcript_matches(&absent, &[&stdout, &stderr]).unwrap());
    // A log that was never written counts as empty.
    let missing = work.path("missing.log");
    assert!(!response::transcript_matches(&absent, &[&missing]).unwrap());
}

#[test]
fn transcript_check_streams_a_hundred_megabytes() {
    use std::io::Write;
    let _lock = memory_lock();
    let work = Work::new();
    let path = work.path("out.log");
    {
        let mut file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        let line = [b'.'; 1023];
        for _ in 0..100 * 1024 {
            file.write_all(&line).unwrap();
            file.write_all(b"\n").unwrap();
        }
        // One 20 MiB line with no newline, with the evidence at its end.
        for _ in 0..20 * 1024 {
            file.write_all(&[b'x'; 1024]).unwrap();
        }
        file.write_all(br#""type":"tool_use""#).unwrap();
    }
    let regex = regex::bytes::Regex::new(r#""type":"tool_use""#).unwrap();
    let before = reset_peak_memory();
    assert!(response::transcript_matches(&regex, &[&path]).unwrap());
    let growth = peak_memory().saturating_sub(before);
    assert!(growth < 32 * 1024 * 1024, "memory grew by {growth} bytes");
}

#[test]
fn transcript_check_finds_a_match_across_pieces_of_a_long_line() {
    use std::io::Write;
    let work = Work::new();
    let path = work.path("out.log");
    {
        let mut file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        // The 4 MiB pieces of the line end in the middle of the needle.
        file.write_all(&vec![b'a'; 4 * 1024 * 1024 - 5]).unwrap();
        file.write_all(b"NEEDLE-IN-THE-MIDDLE").unwrap();
        file.write_all(&vec![b'a'; 4 * 1024 * 1024]).unwrap();
        file.write_all(b"\nnext line\n").unwrap();
    }
    let regex = regex::bytes::Regex::new("NEEDLE-IN-THE-MIDDLE").unwrap();
    assert!(response::transcript_matches(&regex, &[&path]).unwrap());
    let next = regex::bytes::Regex::new("^next line$").unwrap();
    assert!(response::transcript_matches(&next, &[&path]).unwrap());
}
