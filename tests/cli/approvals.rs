//! Who may answer an `approval` gate: a person, from outside the run. The run's own agents (a
//! phase running alongside, a daemon an agent left, a decision file written by hand) cannot.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Test, latest_run};
use serde_json::Value;

/// Phase `a` waits for approval, after leaving a daemon that would approve it once asked; phase
/// `b`, alongside, tries to approve `a` itself, from a daemon of its own, and by writing the
/// decision file.
const PIPELINE: &str = r#"pipeline "p" {
    timeout "2m"
}
phase "a" {
    run "echo done > out.txt; (setsid sh a-daemon.sh > /dev/null 2>&1 &)"
    retries 0
    outputs {
        file "out.txt"
    }
    gates {
        approval prompt="Ship it?"
    }
}
phase "b" {
    run "sh b.sh"
    retries 0
}
"#;

const A_DAEMON: &str = r#"request="$HELIXFLOW_RUN_DIR/phases/a/attempt-1/approval-request.json"
while [ ! -f "$request" ]; do sleep 0.1; done
"$HFBIN" approve latest a > a-daemon.txt 2>&1
echo "exit $?" >> a-daemon.txt
"#;

const B: &str = r#"request="$HELIXFLOW_RUN_DIR/phases/a/attempt-1/approval-request.json"
while [ ! -f "$request" ]; do sleep 0.1; done
"$HFBIN" approve latest a > b-approve.txt 2>&1
echo "exit $?" >> b-approve.txt
(setsid sh -c '"$HFBIN" approve latest a > b-daemon.tmp 2>&1; echo "exit $?" >> b-daemon.tmp; mv b-daemon.tmp b-daemon.txt' > /dev/null 2>&1 &)
printf '{"approved": true, "reason": "", "by": "b"}' > "$HELIXFLOW_RUN_DIR/phases/a/attempt-1/approval.json"
while [ ! -f b-daemon.txt ]; do sleep 0.1; done
"#;

fn events(workspace: &Path) -> Vec<Value> {
    let started = !common::run_folders(&workspace.join(".helixflow/runs")).is_empty();
    if !started {
        return Vec::new();
    }
    std::fs::read_to_string(latest_run(workspace).join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

fn approval_reports(workspace: &Path) -> Vec<Value> {
    events(workspace)
        .into_iter()
        .filter(|e| e["event"] == "gate-finished" && e["report"]["kind"] == "approval")
        .collect()
}

fn phase_passed(workspace: &Path, phase: &str) -> bool {
    events(workspace)
        .iter()
        .any(|e| e["event"] == "phase-finished" && e["phase"] == phase && e["status"] == "passed")
}

#[test]
fn only_a_process_outside_the_run_can_approve() {
    let test = Test::new()
        .file("a-daemon.sh", A_DAEMON)
        .file("b.sh", B)
        .pipeline(PIPELINE);
    let mut run = Command::new(env!("CARGO_BIN_EXE_helixflow"))
        .args(["run", "--no-progress"])
        .current_dir(test.path())
        .env("HFBIN", env!("CARGO_BIN_EXE_helixflow"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !phase_passed(test.path(), "b") {
        assert!(
            start.elapsed() < Duration::from_mins(1),
            "phase b never finished"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Time enough for a decision file to be read, were it still read.
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        approval_reports(test.path()).is_empty(),
        "the run's own processes decided the approval: {:?}",
        approval_reports(test.path())
    );
    for file in ["b-approve.txt", "b-daemon.txt"] {
        let said = test.read(file);
        assert!(
            said.contains("refused: process") && said.contains("was started by this run"),
            "{file}: {said}"
        );
        assert!(said.ends_with("exit 2\n"), "{file}: {said}");
    }
    // The daemon `a` left was stopped with its step, before it could even ask.
    assert!(!test.path().join("a-daemon.txt").exists());

    let run_id = latest_run(test.path())
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let answer = test.with_args(&["approve", &run_id, "a"]).run().code(0);
    assert_eq!(
        answer.stdout,
        format!("approved phase \"a\" of run {run_id} (attempt 1)\n")
    );
    assert_eq!(run.wait().unwrap().code(), Some(0));
    let reports = approval_reports(test.path());
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0]["report"]["status"], "passed");
    // The record for people says who decided.
    let record: Value = serde_json::from_str(
        &std::fs::read_to_string(latest_run(test.path()).join("phases/a/attempt-1/approval.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(record["approved"], true);
    assert_ne!(record["by"], "b");
}

#[test]
fn approve_says_when_the_run_is_not_running() {
    let test = Test::new().pipeline("pipeline \"p\"\nphase \"a\" {\n    run \"true\"\n}\n");
    test.with_args(&["run", "--no-progress"]).run().code(0);
    let outcome = test.with_args(&["approve", "latest", "a"]).run().code(2);
    assert!(
        outcome
            .stderr
            .contains("is not waiting for approval: the run is not running"),
        "{}",
        outcome.stderr
    );
}
