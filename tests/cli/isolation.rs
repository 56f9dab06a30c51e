//! `isolation "worktree"` in real runs, in real git repositories: Python scripts act as agents
//! that work at the same time on one file, break `scope`, or hang until helixflow is killed.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Test, git_repo, latest_run, run_phase};
use serde_json::Value;

/// The file both phases edit.
const SHARED: &str = "first line\nsecond line\nthird line\nfourth line\nfifth line\n";

/// The worktrees git knows of the test's repository.
fn git_worktrees(test: &Test) -> usize {
    let output = Command::new("git")
        .args(["worktree", "list", "--porcelain"])
        .current_dir(test.path())
        .output()
        .expect("git runs");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| line.starts_with("worktree "))
        .count()
}

/// Asserts that no worktree is left: neither a folder in the state folder nor in git's records.
fn no_worktree_left(test: &Test) {
    let dir = test.path().join(".helixflow/worktrees");
    let left: Vec<_> = std::fs::read_dir(&dir)
        .map(|entries| entries.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "worktrees left: {left:?}");
    assert_eq!(git_worktrees(test), 1, "git still lists a phase's worktree");
}

fn attempts(test: &Test, phase: &str) -> u64 {
    run_phase(test.path(), phase)["attempts"].as_u64().unwrap()
}

fn gates(test: &Test, phase: &str, attempt: u32) -> Value {
    let path = latest_run(test.path()).join(format!("phases/{phase}/attempt-{attempt}/gates.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// An agent that waits until the other phase has started too (both worktrees exist), then edits
/// its line of `shared.txt` (committed, changed since) and of `notes.txt` (never committed): `a`
/// the first line, `b` the last, each adding its name. It also checks
/// that its worktree holds the workspace's uncommitted and untracked files, and the ignored ones
/// `worktree-include` names.
const DIFFERENT_LINES: &str = r#"
import os, pathlib, sys, time
phase = sys.argv[1]
other = "b" if phase == "a" else "a"
sync = pathlib.Path(os.environ["HELIXFLOW_RUN_DIR"]) / "started"
sync.mkdir(exist_ok=True)
(sync / phase).touch()
for _ in range(400):
    if (sync / other).exists():
        break
    time.sleep(0.05)
assert pathlib.Path.cwd() != pathlib.Path(os.environ["WORKSPACE"]).resolve(), "not in a worktree"
assert pathlib.Path("untracked.txt").read_text() == "not committed\n"
assert pathlib.Path("build.log").read_text() == "ignored\n"
assert not pathlib.Path("deleted.txt").exists()
assert pathlib.Path("changed.txt").read_text() == "changed since the commit\n"
for name in ["shared.txt", "notes.txt"]:
    path = pathlib.Path(name)
    lines = path.read_text().splitlines(keepends=True)
    at = 0 if phase == "a" else len(lines) - 1
    lines[at] = lines[at].rstrip("\n") + " (" + phase + ")\n"
    path.write_text("".join(lines))
"#;

/// Checks what `a` and `b` left, then changes every kind of thing an attempt can change.
const AFTER_BOTH: &str = r#"
import os, pathlib
text = pathlib.Path("shared.txt").read_text()
assert "first line (a)" in text and "fifth line (b)" in text, text
pathlib.Path("created/deep").mkdir(parents=True)
pathlib.Path("created/deep/new.txt").write_text("new\n")
pathlib.Path("untracked.txt").unlink()
os.chmod("tool.sh", 0o755)
os.symlink("shared.txt", "link")
"#;

#[test]
fn two_isolated_phases_edit_different_lines_of_one_file_and_both_land() {
    let test = Test::new()
        .file("shared.txt", SHARED)
        .file("tool.sh", "echo tool\n")
        .file(".gitignore", "*.log\n")
        .file("deleted.txt", "committed, then deleted\n")
        .file("changed.txt", "committed\n")
        .file("edit.py", DIFFERENT_LINES)
        .file("after.py", AFTER_BOTH)
        .pipeline(
            r#"pipeline "p" {
    max-parallel 2
}
agent "py" {
    command "python3" "edit.py" "{{ phase }}"
}
defaults {
    isolation "worktree"
    worktree-include "*.log"
    retries 0
}
phase "a" {
    agent "py"
    prompt "Mark the first line."
}
phase "b" {
    agent "py"
    prompt "Mark the last line."
}
phase "c" {
    run "python3 after.py"
    depends-on "a" "b"
}
"#,
        );
    git_repo(test.path());
    std::fs::write(test.path().join("untracked.txt"), "not committed\n").unwrap();
    std::fs::write(test.path().join("notes.txt"), SHARED).unwrap();
    std::fs::write(test.path().join("build.log"), "ignored\n").unwrap();
    std::fs::remove_file(test.path().join("deleted.txt")).unwrap();
    std::fs::write(
        test.path().join("changed.txt"),
        "changed since the commit\n",
    )
    .unwrap();
    // Both phases start from the uncommitted state of the file they edit.
    std::fs::write(
        test.path().join("shared.txt"),
        SHARED.replace("third line", "third line, not committed"),
    )
    .unwrap();
    let workspace = test.path().canonicalize().unwrap();

    test.with_args(&["run", "--no-progress"])
        .env("WORKSPACE", workspace.to_str().unwrap())
        .run()
        .code(0);

    assert_eq!(
        test.read("shared.txt"),
        "first line (a)\nsecond line\nthird line, not committed\nfourth line\nfifth line (b)\n"
    );
    assert_eq!(
        test.read("notes.txt"),
        "first line (a)\nsecond line\nthird line\nfourth line\nfifth line (b)\n"
    );
    assert_eq!((attempts(&test, "a"), attempts(&test, "b")), (1, 1));
    // What `c` did in its worktree is in the workspace: created, deleted, mode, symlink.
    assert_eq!(test.read("created/deep/new.txt"), "new\n");
    assert!(!test.path().join("untracked.txt").exists());
    assert!(!test.path().join("deleted.txt").exists());
    assert_eq!(test.read("changed.txt"), "changed since the commit\n");
    assert_eq!(test.read("build.log"), "ignored\n");
    let mode = std::fs::metadata(test.path().join("tool.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111, "mode {mode:o}");
    assert_eq!(
        std::fs::read_link(test.path().join("link")).unwrap(),
        Path::new("shared.txt")
    );
    no_worktree_left(&test);
}

/// Both phases add their name to the first line once both have started: the second to apply
/// conflicts with the first, and its retry starts from the first one's line.
const SAME_LINE: &str = r#"
import os, pathlib, sys, time
phase = sys.argv[1]
other = "b" if phase == "a" else "a"
sync = pathlib.Path(os.environ["HELIXFLOW_RUN_DIR"]) / "started"
sync.mkdir(exist_ok=True)
(sync / phase).touch()
for _ in range(400):
    if (sync / other).exists():
        break
    time.sleep(0.05)
path = pathlib.Path("shared.txt")
lines = path.read_text().splitlines(keepends=True)
lines[0] = lines[0].rstrip("\n") + " (" + phase + ")\n"
path.write_text("".join(lines))
"#;

#[test]
fn a_conflicting_pair_is_detected_and_resolved_by_a_retry() {
    let test = Test::new()
        .file("shared.txt", SHARED)
        .file("edit.py", SAME_LINE)
        .pipeline(
            r#"pipeline "p" {
    max-parallel 2
}
agent "py" {
    command "python3" "edit.py" "{{ phase }}"
}
defaults {
    agent "py"
    isolation "worktree"
    retries 1
}
phase "a" {
    prompt "Mark the first line."
}
phase "b" {
    prompt "Mark the first line too."
}
"#,
        );
    git_repo(test.path());
    test.with_args(&["run", "--no-progress"]).run().code(0);

    let mut counts = [attempts(&test, "a"), attempts(&test, "b")];
    counts.sort_unstable();
    assert_eq!(counts, [1, 2], "one phase applies, the other retries");
    let (first, second) = if attempts(&test, "a") == 1 {
        ("a", "b")
    } else {
        ("b", "a")
    };
    let conflict = gates(&test, second, 1);
    let report = conflict
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "isolation")
        .unwrap_or_else(|| panic!("no isolation report in {conflict:#}"));
    assert_eq!(report["status"], "failed");
    assert!(
        report["details"].to_string().contains("`shared.txt`"),
        "{report:#}"
    );
    let feedback = std::fs::read_to_string(
        latest_run(test.path()).join(format!("phases/{second}/attempt-1/feedback.md")),
    )
    .unwrap();
    assert!(feedback.contains("`shared.txt`"), "{feedback}");
    // The retry worked on the first phase's result.
    assert_eq!(
        test.read("shared.txt").lines().next().unwrap(),
        format!("first line ({first}) ({second})")
    );
    no_worktree_left(&test);
}

#[test]
fn a_failed_attempt_leaves_nothing_in_the_workspace() {
    let test = Test::new()
        .file("shared.txt", SHARED)
        .file(
            "edit.py",
            r#"
import pathlib
pathlib.Path("shared.txt").write_text("overwritten\n")
pathlib.Path("junk.txt").write_text("outside the scope\n")
pathlib.Path("notes").mkdir()
pathlib.Path("notes/n.txt").write_text("more junk\n")
"#,
        )
        .pipeline(
            r#"pipeline "p"
phase "a" {
    run "python3 edit.py"
    isolation "worktree"
    scope "shared.txt"
    retries 1
}
"#,
        );
    git_repo(test.path());
    test.with_args(&["run", "--no-progress"]).run().code(1);

    assert_eq!(attempts(&test, "a"), 2);
    let scope = gates(&test, "a", 1);
    let report = scope
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "scope")
        .unwrap_or_else(|| panic!("no scope report in {scope:#}"));
    assert_eq!(report["status"], "failed");
    assert!(
        report["details"].to_string().contains("junk.txt"),
        "{report:#}"
    );
    assert_eq!(test.read("shared.txt"), SHARED);
    assert!(!test.path().join("junk.txt").exists());
    assert!(!test.path().join("notes").exists());
    no_worktree_left(&test);
}

/// A pipeline whose one isolated phase hangs after its change when `HANG` is set.
fn hanging_pipeline() -> Test {
    let test = Test::new()
        .file("shared.txt", SHARED)
        .file(
            "edit.py",
            r#"
import os, pathlib, time
pathlib.Path("shared.txt").write_text("edited\n")
if os.environ.get("HANG"):
    (pathlib.Path(os.environ["HELIXFLOW_RUN_DIR"]) / "hanging").touch()
    time.sleep(60)
"#,
        )
        .pipeline(
            r#"pipeline "p"
phase "a" {
    run "python3 edit.py"
    isolation "worktree"
    retries 0
}
"#,
        );
    git_repo(test.path());
    test
}

/// Starts a run whose phase hangs, and returns once its step is hanging in its worktree.
fn start_hanging_run(test: &Test) -> std::process::Child {
    let child = Command::new(env!("CARGO_BIN_EXE_helixflow"))
        .args(["run", "--no-progress"])
        .current_dir(test.path())
        .env("HANG", "1")
        .env("HELIXFLOW_KILL_GRACE", "1")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !(test.path().join(".helixflow/runs").exists()
        && latest_run(test.path()).join("hanging").exists())
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the step never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(git_worktrees(test), 2, "the phase works in a worktree");
    child
}

/// The folders of worktrees in the state folder, by run.
fn worktree_folders(test: &Test) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(test.path().join(".helixflow/worktrees"))
        .map(|runs| {
            runs.filter_map(Result::ok)
                .flat_map(|run| std::fs::read_dir(run.path()).into_iter().flatten())
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .collect()
        })
        .unwrap_or_default()
}

/// The processes whose parent is `pid`, from `/proc`.
fn children_of(pid: u32) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/stat")).is_ok_and(|stat| {
                // `pid (name) state ppid …`: the name may hold spaces, the part after it not.
                stat.rsplit_once(") ")
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                    == Some(pid)
            })
        })
        .collect()
}

#[test]
fn a_killed_run_leaves_no_worktree_after_the_next_run() {
    let test = hanging_pipeline();
    let mut first = start_hanging_run(&test);
    first.kill().unwrap();
    first.wait().unwrap();
    // The watchdog stops the step, then removes its worktree's folder.
    let killed = Instant::now();
    while !worktree_folders(&test).is_empty() {
        assert!(
            killed.elapsed() < Duration::from_secs(20),
            "the watchdog left {:?}",
            worktree_folders(&test)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The change never reached the workspace; git still lists the worktree.
    assert_eq!(test.read("shared.txt"), SHARED);
    assert_eq!(git_worktrees(&test), 2);

    test.with_args(&["run", "--no-progress"]).run().code(0);
    assert_eq!(test.read("shared.txt"), "edited\n");
    no_worktree_left(&test);
}

#[test]
fn a_run_killed_with_its_watchdog_leaves_no_worktree_after_the_next_run() {
    let test = hanging_pipeline();
    let mut first = start_hanging_run(&test);
    // As when the machine stops: helixflow, its watchdog and the step end at once. helixflow is
    // frozen first, so that it cannot see its step end and tidy up before it is killed.
    // SAFETY: SIGSTOP to our own child process.
    unsafe { libc::kill(i32::try_from(first.id()).unwrap(), libc::SIGSTOP) };
    let everyone = children_of(first.id());
    assert!(
        everyone.len() >= 2,
        "the watchdog and the step: {everyone:?}"
    );
    for pid in everyone {
        // SAFETY: SIGKILL to the children of our own child process.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    first.kill().unwrap();
    first.wait().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        worktree_folders(&test).len(),
        1,
        "the killed run's worktree is left"
    );
    assert_eq!(test.read("shared.txt"), SHARED);

    test.with_args(&["run", "--no-progress"]).run().code(0);
    assert_eq!(test.read("shared.txt"), "edited\n");
    no_worktree_left(&test);
}

#[test]
fn worktree_isolation_outside_a_git_repository_is_refused() {
    let test = Test::new().pipeline(
        r#"pipeline "p"
phase "a" {
    run "true"
    isolation "worktree"
}
"#,
    );
    let outcome = test.with_args(&["run", "--no-progress"]).run();
    assert_ne!(outcome.code, 0);
    assert!(outcome.stderr.contains("HF404"), "{}", outcome.stderr);
    assert!(
        outcome.stderr.contains("not in a git repository"),
        "{}",
        outcome.stderr
    );
    assert!(!test.path().join(".helixflow/worktrees").exists());
}

#[test]
fn ctrl_c_removes_the_worktree_of_the_attempt_it_stops() {
    let test = Test::new()
        .file("shared.txt", SHARED)
        .file(
            "edit.py",
            r#"
import os, pathlib, time
pathlib.Path("shared.txt").write_text("edited\n")
(pathlib.Path(os.environ["HELIXFLOW_RUN_DIR"]) / "hanging").touch()
time.sleep(60)
"#,
        )
        .pipeline(
            r#"pipeline "p"
phase "a" {
    run "python3 edit.py"
    isolation "worktree"
}
"#,
        );
    git_repo(test.path());
    let mut child = Command::new(env!("CARGO_BIN_EXE_helixflow"))
        .args(["run", "--no-progress"])
        .current_dir(test.path())
        .env("HELIXFLOW_KILL_GRACE", "1")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !(test.path().join(".helixflow/runs").exists()
        && latest_run(test.path()).join("hanging").exists())
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the step never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(git_worktrees(&test), 2);
    // SAFETY: sending SIGINT to our own child process.
    unsafe { libc::kill(i32::try_from(child.id()).unwrap(), libc::SIGINT) };
    assert_eq!(child.wait().unwrap().code(), Some(130));
    assert_eq!(test.read("shared.txt"), SHARED);
    no_worktree_left(&test);
}

#[test]
fn self_verification_and_scope_judge_the_worktree() {
    let test = Test::new()
        .file("shared.txt", SHARED)
        .file(
            "agent.sh",
            r#"echo 'x = 1' > out.py
"$HFBIN" verify || exit 1
"#,
        )
        .pipeline(
            r#"pipeline "p"
agent "bot" {
    command "sh" "agent.sh"
}
phase "a" {
    agent "bot"
    prompt "Write out.py. {{ verify_instructions }}"
    isolation "worktree"
    verify "self" "external"
    scope "out.py"
    retries 0
    outputs {
        file "out.py"
    }
    gates {
        syntax
        changes min=1
    }
}
"#,
        )
        .env("HFBIN", env!("CARGO_BIN_EXE_helixflow"));
    git_repo(test.path());
    test.with_args(&["run", "--no-progress"]).run().code(0);
    assert_eq!(test.read("out.py"), "x = 1\n");
    let receipt: Value = serde_json::from_str(
        &std::fs::read_to_string(latest_run(test.path()).join("phases/a/attempt-1/receipt.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(receipt["success"], true, "{receipt:#}");
    let changes: Value = serde_json::from_str(
        &std::fs::read_to_string(latest_run(test.path()).join("phases/a/attempt-1/changes.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(changes["created"], serde_json::json!(["out.py"]));
    no_worktree_left(&test);
}

#[test]
fn the_sub_agent_verifier_reviews_the_worktree() {
    let test = Test::new()
        .file(
            "review.sh",
            r#"if [ -f out.py ] && [ "$(pwd -P)" != "$WORKSPACE" ]; then
  echo '{"success": true, "checks_passed": ["out.py is in the worktree"]}'
else
  echo '{"success": false, "errors": ["out.py is not here"], "checks_passed": []}'
fi
"#,
        )
        .pipeline(
            r#"pipeline "p"
agent "worker" {
    command "sh" "-c" "echo 'x = 1' > out.py"
}
agent "reviewer" {
    command "sh" "review.sh" "{{ prompt_file }}"
}
phase "a" {
    agent "worker"
    prompt "Write out.py."
    isolation "worktree"
    verify "external" "sub-agent"
    verifier "reviewer"
    retries 0
    outputs {
        file "out.py"
    }
}
"#,
        );
    git_repo(test.path());
    let workspace = test.path().canonicalize().unwrap();
    test.with_args(&["run", "--no-progress"])
        .env("WORKSPACE", workspace.to_str().unwrap())
        .run()
        .code(0);
    assert_eq!(test.read("out.py"), "x = 1\n");
    no_worktree_left(&test);
}

/// Touches `$HELIXFLOW_RUN_DIR/started/<phase>`, waits for the other phase's, then writes the
/// files named after the phase.
const ALONGSIDE: &str = r#"
import os, pathlib, sys, time
phase, other = sys.argv[1], sys.argv[2]
sync = pathlib.Path(os.environ["HELIXFLOW_RUN_DIR"]) / "started"
sync.mkdir(exist_ok=True)
(sync / phase).touch()
for _ in range(400):
    if (sync / other).exists():
        break
    time.sleep(0.05)
for name in sys.argv[3:]:
    pathlib.Path(name).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(name).write_text(phase + "\n")
time.sleep(0.3)
"#;

#[test]
fn an_isolated_phase_owns_every_change_in_its_worktree() {
    // `shared` claims `x/**`; the isolated phase, running at the same time, writes there too:
    // in its worktree that change can only be its own, and breaks its scope.
    let test = Test::new()
        .file("edit.py", ALONGSIDE)
        .file("shared.txt", SHARED)
        .pipeline(
            r#"pipeline "p" {
    max-parallel 2
}
phase "shared" {
    run "python3 edit.py shared isolated x/shared.txt"
    scope "x/**"
    gates { changes min=1; }
    retries 0
    on-failure "continue"
}
phase "isolated" {
    run "python3 edit.py isolated shared b.txt x/isolated.txt"
    isolation "worktree"
    scope "b.txt"
    retries 0
    on-failure "continue"
}
"#,
        );
    git_repo(test.path());
    test.with_args(&["run", "--no-progress"]).run().code(1);
    assert_eq!(run_phase(test.path(), "shared")["status"], "passed");
    assert_eq!(run_phase(test.path(), "isolated")["status"], "failed");
    let reports = gates(&test, "isolated", 1);
    let scope = reports
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "scope")
        .unwrap_or_else(|| panic!("no scope report in {reports:#}"));
    assert_eq!(scope["status"], "failed");
    assert!(
        scope["details"].to_string().contains("x/isolated.txt"),
        "{scope:#}"
    );
    assert_eq!(test.read("x/shared.txt"), "shared\n");
    assert!(!test.path().join("x/isolated.txt").exists());
    assert!(!test.path().join("b.txt").exists());
    no_worktree_left(&test);
}

#[test]
fn lint_reads_isolation_from_templates_and_checks_its_value() {
    let pipeline = r#"pipeline "p"
template "isolated" {
    isolation "worktree"
    run "true"
}
phase "a" use="isolated"
phase "b" use="isolated"
phase "c" {
    run "true"
    isolation "elsewhere"
}
"#;
    let lint = |test: &Test| {
        let outcome = test.with_args(&["lint", "--format", "json"]).run();
        let found: Vec<(String, u64)> = outcome
            .json()
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                (
                    d["code"].as_str().unwrap().to_owned(),
                    d["line"].as_u64().unwrap_or_default(),
                )
            })
            .collect();
        found
    };
    // Outside git: once, at the template's line, for both phases that use it.
    let outside = Test::new().pipeline(pipeline);
    assert_eq!(
        lint(&outside),
        [("HF404".to_owned(), 3), ("HF107".to_owned(), 10)]
    );
    let inside = Test::new().pipeline(pipeline);
    git_repo(inside.path());
    assert_eq!(lint(&inside), [("HF107".to_owned(), 10)]);
}

/// What an isolated attempt brings of the ignored files: `worktree-include` names `local.env` and
/// `cache/**`, not `big/`. The step checks its worktree, changes the included file, adds to the
/// included folder, writes its ignored output (a stale one is in the workspace) and a file in an
/// ignored folder nothing names.
const BRINGS: &str = r#"
import pathlib
assert pathlib.Path("local.env").read_text() == "A=1\n"
assert pathlib.Path("cache/x.bin").read_bytes() == b"\x00cache"
assert not pathlib.Path("big").exists(), "an ignored folder nothing names was brought"
pathlib.Path("local.env").write_text("A=2\n")
pathlib.Path("cache/new.bin").write_bytes(b"new")
pathlib.Path("out").mkdir(exist_ok=True)
pathlib.Path("out/result.txt").write_text("new\n")
pathlib.Path("big").mkdir()
pathlib.Path("big/made-by-the-attempt").write_text("junk\n")
"#;

#[test]
fn worktree_include_brings_only_the_named_ignored_files_and_their_changes_come_back() {
    let test = Test::new()
        .file(".gitignore", "*.env\ncache/\nbig/\nout/\n")
        .file("brings.py", BRINGS)
        .pipeline(
            r#"pipeline "p"
phase "a" {
    isolation "worktree"
    worktree-include "local.env" "cache/**"
    run "python3 brings.py"
    outputs {
        file "out/result.txt"
    }
    retries 0
}
"#,
        );
    git_repo(test.path());
    std::fs::write(test.path().join("local.env"), "A=1\n").unwrap();
    std::fs::create_dir_all(test.path().join("cache")).unwrap();
    std::fs::write(test.path().join("cache/x.bin"), b"\x00cache").unwrap();
    std::fs::create_dir_all(test.path().join("big")).unwrap();
    std::fs::write(test.path().join("big/blob"), vec![7u8; 1 << 20]).unwrap();
    std::fs::create_dir_all(test.path().join("out")).unwrap();
    std::fs::write(test.path().join("out/result.txt"), "stale\n").unwrap();

    test.with_args(&["run", "--no-progress"]).run().code(0);

    assert_eq!(test.read("local.env"), "A=2\n");
    assert_eq!(test.read("cache/new.bin"), "new");
    assert_eq!(test.read("out/result.txt"), "new\n");
    assert!(!test.path().join("big/made-by-the-attempt").exists());
    assert_eq!(
        std::fs::read(test.path().join("big/blob")).unwrap().len(),
        1 << 20
    );
    no_worktree_left(&test);
}

/// A `.venv` shared by three isolated phases: one reads it (its step, and a gate command), one
/// writes into it through the worktree, one through the workspace's own path.
const SHARING: &str = r#"pipeline "p" {
    max-parallel 1
}
defaults {
    isolation "worktree"
    worktree-share ".venv"
    retries 0
    on-failure "continue"
}
phase "reads" {
    run "test \"$(cat .venv/lib/pkg.py)\" = 'VALUE = 1'"
    gates {
        command "grep -q VALUE .venv/lib/pkg.py" name="gate-reads"
    }
}
phase "writes" {
    run "echo 'VALUE = 2' > .venv/lib/pkg.py"
}
phase "writes-by-path" {
    run "echo 'VALUE = 3' > \"$WORKSPACE/.venv/lib/pkg.py\"; touch \"$WORKSPACE/.venv/new\""
}
"#;

fn sharing_project() -> Test {
    let test = Test::new().file(".gitignore", ".venv/\n").pipeline(SHARING);
    git_repo(test.path());
    std::fs::create_dir_all(test.path().join(".venv/lib")).unwrap();
    std::fs::write(test.path().join(".venv/lib/pkg.py"), "VALUE = 1").unwrap();
    test
}

/// Whether the run said it copied the shared folders (no read-only mounts on this system).
fn copied_shares(out: &common::Outcome) -> bool {
    out.stderr.contains("are copied into each worktree")
}

#[test]
fn worktree_share_is_read_only_for_every_process_of_the_attempt() {
    let test = sharing_project();
    let workspace = test.path().canonicalize().unwrap();
    let out = test
        .with_args(&["run", "--no-progress"])
        .env("WORKSPACE", workspace.to_str().unwrap())
        .run()
        .code(1);
    let phases = |name: &str| run_phase(test.path(), name)["status"].clone();
    assert_eq!(phases("reads"), "passed", "{}", out.stderr);
    assert_eq!(phases("writes"), "failed");
    assert_eq!(phases("writes-by-path"), "failed");
    if copied_shares(&out) {
        // No read-only mounts here: the copy took the write, the workspace's own path did not.
        eprintln!("read-only mounts are not available here: checked the copies instead");
        assert_eq!(test.read(".venv/lib/pkg.py"), "VALUE = 3");
    } else {
        let stderr = std::fs::read_to_string(
            latest_run(test.path()).join("phases/writes/attempt-1/stderr.log"),
        )
        .unwrap();
        assert!(stderr.contains("Read-only file system"), "{stderr}");
        assert_eq!(test.read(".venv/lib/pkg.py"), "VALUE = 1");
        assert!(!test.path().join(".venv/new").exists());
    }
    // The mounts were the children's own: none is left in helixflow's namespace or this one.
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(workspace.to_str().unwrap()), "{mounts}");
    no_worktree_left(&test);
}

#[test]
fn without_read_only_mounts_a_shared_folder_is_copied_and_a_change_fails_the_attempt() {
    let test = sharing_project();
    let workspace = test.path().canonicalize().unwrap();
    let out = test
        .with_args(&["run", "--no-progress"])
        .env("WORKSPACE", workspace.to_str().unwrap())
        .env("HELIXFLOW_SHARE_BY_COPY", "1")
        .run()
        .code(1);
    assert!(copied_shares(&out), "{}", out.stderr);
    assert_eq!(
        out.stderr.matches("are copied into each worktree").count(),
        1
    );
    let phases = |name: &str| run_phase(test.path(), name)["status"].clone();
    assert_eq!(phases("reads"), "passed", "{}", out.stderr);
    assert_eq!(phases("writes"), "failed");
    // The copy took the write: the workspace's folder is as it was, and the attempt failed for it.
    let report = gates(&test, "writes", 1);
    let isolation = report
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "isolation")
        .unwrap_or_else(|| panic!("{report}"));
    assert_eq!(isolation["status"], "failed");
    assert!(
        isolation["details"]
            .to_string()
            .contains(".venv/lib/pkg.py"),
        "{isolation}"
    );
    // Through its own path the workspace's folder can be written: the attempt fails for it all
    // the same.
    assert_eq!(phases("writes-by-path"), "failed");
    let report = gates(&test, "writes-by-path", 1).to_string();
    assert!(report.contains(".venv/new"), "{report}");
    no_worktree_left(&test);
}

/// Under an unprivileged user (as users run it), the read-only mounts come from a user namespace
/// of the child's own. Run when the tests run as root, with `setpriv` to drop to `nobody`.
#[test]
fn an_unprivileged_user_gets_read_only_shares_too() {
    // SAFETY: a plain system call without arguments.
    if unsafe { libc::geteuid() } != 0 || Command::new("setpriv").arg("--version").output().is_err()
    {
        eprintln!("needs root and setpriv to run helixflow as another user");
        return;
    }
    let test = sharing_project();
    let status = Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(test.path())
        .status()
        .unwrap();
    assert!(status.success());
    // The folder above the test's is root's: let `nobody` in.
    let parent_mode = std::fs::metadata(test.path()).unwrap().permissions().mode();
    std::fs::set_permissions(
        test.path(),
        std::fs::Permissions::from_mode(parent_mode | 0o755),
    )
    .unwrap();
    let workspace = test.path().canonicalize().unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(env!("CARGO_BIN_EXE_helixflow"))
        .args(["run", "--no-progress"])
        .current_dir(test.path())
        .env("HOME", test.path())
        .env("WORKSPACE", &workspace)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    if stderr.contains("are copied into each worktree") {
        eprintln!("no unprivileged user namespaces here: {stderr}");
        return;
    }
    let phases = |name: &str| run_phase(test.path(), name)["status"].clone();
    assert_eq!(phases("reads"), "passed", "{stderr}");
    assert_eq!(phases("writes"), "failed");
    assert_eq!(phases("writes-by-path"), "failed");
    assert_eq!(test.read(".venv/lib/pkg.py"), "VALUE = 1");
    assert!(!test.path().join(".venv/new").exists());
}
