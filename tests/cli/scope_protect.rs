//! `scope`, `protect` and `changes` in real runs: shell scripts act as agents that work alongside
//! each other, hide their changes behind ignore files, or touch protected files from a gate.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{Test, latest_run, run_phase};
use serde_json::Value;

/// The phase's status in `run.json`.
fn status(workspace: &Path, phase: &str) -> String {
    run_phase(workspace, phase)["status"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The status and details of the gate `gate` in the first attempt of `phase`.
fn gate(workspace: &Path, phase: &str, gate: &str) -> (String, Vec<String>) {
    let path = latest_run(workspace).join(format!("phases/{phase}/attempt-1/gates.json"));
    let reports: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let report = reports
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == gate)
        .unwrap_or_else(|| panic!("no gate {gate} in {reports:#}"));
    let details = report["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap().to_owned())
        .collect();
    (report["status"].as_str().unwrap().to_owned(), details)
}

/// Writes `$1/file`, once the phase `$2` has started too, and exits once `$2/file` exists as
/// well: both attempts see both files. The markers go to the run's folder, which no snapshot sees.
pub(crate) const ALONGSIDE: &str = r#"sync="$HELIXFLOW_RUN_DIR/started"
mkdir -p "$sync" && touch "$sync/$1"
i=0; while [ ! -e "$sync/$2" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
mkdir -p "$1" && echo "$1" > "$1/file"
i=0; while [ ! -e "$2/file" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
"#;

#[test]
fn phases_running_at_the_same_time_leave_each_other_their_changes() {
    let test = Test::new().file("alongside.sh", ALONGSIDE).pipeline(
        r#"pipeline "p" {
    max-parallel 2
}
phase "a" {
    run "sh alongside.sh a b"
    scope "a/**"
    gates { changes min=1; }
    retries 0
    on-failure "continue"
}
phase "b" {
    run "sh alongside.sh b a"
    scope "b/**"
    gates { changes min=2; }
    retries 0
    on-failure "continue"
}
"#,
    );
    test.with_args(&["run", "--no-progress"]).run().code(1);
    let ws = test.path();
    let left_to = |phase: &str, path: &str| {
        format!("1 change left to phase \"{phase}\", which ran at the same time: `{path}`")
    };
    assert_eq!(status(ws, "a"), "passed");
    assert_eq!(
        gate(ws, "a", "scope"),
        ("passed".into(), vec![left_to("b", "b/file")])
    );
    assert_eq!(
        gate(ws, "a", "changes"),
        ("passed".into(), vec![left_to("b", "b/file")])
    );
    // b's own work is one file; a's file is not counted for it.
    assert_eq!(status(ws, "b"), "failed");
    assert_eq!(
        gate(ws, "b", "scope"),
        ("passed".into(), vec![left_to("a", "a/file")])
    );
    assert_eq!(
        gate(ws, "b", "changes"),
        (
            "failed".into(),
            vec![
                "the attempt changed 1 file; at least 2 expected (changed: `b/file`)".into(),
                left_to("a", "a/file"),
            ]
        )
    );
}

#[test]
fn a_change_no_phase_alongside_claims_stays_the_phase_s_own() {
    // `b` declares no scope or outputs: what it writes is not claimed, so `a` answers for it.
    let test = Test::new().file("alongside.sh", ALONGSIDE).pipeline(
        r#"pipeline "p" {
    max-parallel 2
}
phase "a" {
    run "sh alongside.sh a b"
    scope "a/**"
    retries 0
    on-failure "continue"
}
phase "b" {
    run "sh alongside.sh b a"
    retries 0
    on-failure "continue"
}
"#,
    );
    test.with_args(&["run", "--no-progress"]).run().code(1);
    assert_eq!(status(test.path(), "a"), "failed");
    assert_eq!(
        gate(test.path(), "a", "scope"),
        (
            "failed".into(),
            vec!["`b/file` was created, but the phase's scope is `a/**`".into()]
        )
    );
}

#[test]
fn protected_files_are_compared_even_when_ignored() {
    let test = Test::new()
        .file(".gitignore", ".env\ndata/\n")
        .file(".env", "TOKEN=original\n")
        .file("data/d.txt", "original\n")
        .pipeline(
            r#"pipeline "p"
phase "a" {
    run "echo TOKEN=stolen > .env && echo changed > data/d.txt && echo new > data/new.txt && mkdir -p src && echo ok > src/a.py"
    protect ".env" "data/**"
    retries 0
}
"#,
        );
    test.with_args(&["run", "--no-progress"]).run().code(1);
    assert_eq!(
        gate(test.path(), "a", "protect"),
        (
            "failed".into(),
            vec![
                "protected file `data/new.txt` was created".into(),
                "protected file `.env` was modified".into(),
                "protected file `data/d.txt` was modified".into(),
            ]
        )
    );
}

#[test]
fn an_ignore_file_written_during_the_attempt_hides_nothing() {
    let test = Test::new().file("src/keep.py", "x = 1\n").pipeline(
        r#"pipeline "p"
phase "a" {
    run "mkdir -p other && echo evil > other/evil.py && printf '*\n' > other/.gitignore && echo y > src/new.py"
    scope "src/**"
    retries 0
}
"#,
    );
    test.with_args(&["run", "--no-progress"]).run().code(1);
    assert_eq!(
        gate(test.path(), "a", "scope"),
        (
            "failed".into(),
            vec![
                "`other/.gitignore` was created, but the phase's scope is `src/**`".into(),
                "`other/evil.py` was created, but the phase's scope is `src/**`".into(),
            ]
        )
    );
}

#[test]
fn git_s_exclude_file_changed_during_the_attempt_hides_nothing() {
    let test = Test::new()
        .file("tracked.txt", "tracked\n")
        .file("src/keep.py", "x = 1\n")
        .pipeline(
            r#"pipeline "p"
phase "a" {
    run "printf 'tracked.txt\nsneaky.py\n' >> .git/info/exclude && echo changed > tracked.txt && echo s > sneaky.py"
    scope "src/**"
    retries 0
}
"#,
        );
    let git = |args: &[&str]| {
        let status = Command::new("git")
            .args(args)
            .current_dir(test.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", test.path())
            .output()
            .expect("git runs");
        assert!(status.status.success(), "git {args:?}: {status:?}");
    };
    git(&["init", "-q"]);
    git(&["add", "tracked.txt", "src/keep.py", "pipeline.kdl"]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@example.com",
        "commit",
        "-qm",
        "start",
    ]);
    test.with_args(&["run", "--no-progress"]).run().code(1);
    assert_eq!(
        gate(test.path(), "a", "scope"),
        (
            "failed".into(),
            vec![
                "`sneaky.py` was created, but the phase's scope is `src/**`".into(),
                "`tracked.txt` was modified, but the phase's scope is `src/**`".into(),
            ]
        )
    );
}

#[test]
fn a_gate_command_or_fix_that_changes_a_protected_file_fails_the_attempt() {
    let test = Test::new()
        .file("tests/t.txt", "the test\n")
        .file("tests/u.txt", "another test\n")
        .pipeline(
            r#"pipeline "p"
phase "fixing" {
    run "mkdir -p src && echo ok > src/a.py"
    scope "src/**"
    protect "tests/**"
    gates {
        command "test -e fixed" name="check" fix="touch fixed; echo hacked > tests/t.txt"
    }
    retries 0
    on-failure "continue"
}
phase "testing" {
    run "true"
    protect "tests/**"
    gates {
        command "echo more >> tests/u.txt" name="tests"
    }
    retries 0
    on-failure "continue"
}
phase "building" {
    run "mkdir -p src && echo ok > src/b.py"
    scope "src/**"
    protect "tests/**"
    gates {
        command "mkdir -p build && echo cached > build/cache.bin" name="build"
    }
    retries 0
    on-failure "continue"
}
"#,
        );
    test.with_args(&["run", "--no-progress", "--jobs", "1"])
        .run()
        .code(1);
    let ws = test.path();
    assert_eq!(status(ws, "fixing"), "failed");
    assert_eq!(
        gate(ws, "fixing", "check"),
        (
            "failed".into(),
            vec![
                "`test -e fixed` exited with code 1 at first; it passed after the fix `touch fixed; echo hacked > tests/t.txt` ran".into(),
                "protected file `tests/t.txt` was modified while the fix `touch fixed; echo hacked > tests/t.txt` ran; protected files must stay byte-identical".into(),
            ]
        )
    );
    assert_eq!(status(ws, "testing"), "failed");
    assert_eq!(
        gate(ws, "testing", "tests"),
        (
            "failed".into(),
            vec!["protected file `tests/u.txt` was modified while `echo more >> tests/u.txt` ran; protected files must stay byte-identical".into()]
        )
    );
    // What gate commands write elsewhere (builds, caches) is not held against the scope.
    assert_eq!(status(ws, "building"), "passed");
}
