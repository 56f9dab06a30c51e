//! Verify modes end to end: `self` receipts, the `approval` gate, and the order of modes, with
//! fake agents as real scripts.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Test, latest_run};
use serde_json::Value;

fn events(workspace: &Path) -> Vec<Value> {
    std::fs::read_to_string(latest_run(workspace).join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn feedback(workspace: &Path, attempt: u32) -> String {
    std::fs::read_to_string(
        latest_run(workspace).join(format!("phases/a/attempt-{attempt}/feedback.md")),
    )
    .unwrap_or_default()
}

/// A self-mode pipeline whose agent is `agent.sh`; `HFBIN` is the helixflow binary.
fn self_pipeline(agent: &str, retries: u32) -> Test {
    Test::new()
        .file("agent.sh", agent)
        .pipeline(&format!(
            r#"pipeline "p"
agent "bot" {{
    command "sh" "agent.sh"
}}
phase "a" {{
    agent "bot"
    prompt "Write out.py. {{{{ verify_instructions }}}}"
    verify "self"
    retries {retries}
    outputs {{
        file "out.py"
    }}
    gates {{
        syntax
    }}
}}
"#
        ))
        .env("HFBIN", env!("CARGO_BIN_EXE_helixflow"))
}

#[test]
fn self_mode_fails_an_agent_that_never_verifies() {
    let test = self_pipeline("echo 'x = 1' > out.py\n", 0);
    test.with_args(&["run", "--no-progress"]).run().code(1);
    let text = feedback(test.path(), 1);
    assert!(text.contains("no receipt"), "{text}");
    let prompt =
        std::fs::read_to_string(latest_run(test.path()).join("phases/a/attempt-1/prompt.md"))
            .unwrap();
    assert!(
        prompt.contains(" verify") && prompt.contains("out.py") && prompt.contains("syntax"),
        "{prompt}"
    );
}

#[test]
fn the_verify_command_is_named_as_an_agent_s_permission_rules_expect_it() {
    // `helixflow` on PATH is this binary: the agent is told `helixflow verify`, which rules such
    // as Claude Code's `--allowedTools "Bash(helixflow verify:*)"` match.
    let exe = Path::new(env!("CARGO_BIN_EXE_helixflow"));
    let path = format!(
        "{}:{}",
        exe.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let test = self_pipeline("echo 'x = 1' > out.py\n", 0).env("PATH", &path);
    test.with_args(&["run", "--no-progress"]).run().code(1);
    let prompt_of = |test: &Test| {
        std::fs::read_to_string(latest_run(test.path()).join("phases/a/attempt-1/prompt.md"))
            .unwrap()
    };
    assert!(
        prompt_of(&test).contains("\n    helixflow verify\n"),
        "{}",
        prompt_of(&test)
    );
    // Elsewhere on PATH, or not at all: by its path, which is sure to be this binary.
    let test = self_pipeline("echo 'x = 1' > out.py\n", 0).env("PATH", "/usr/bin:/bin");
    test.with_args(&["run", "--no-progress"]).run().code(1);
    assert!(
        prompt_of(&test).contains(&format!("\n    {} verify\n", exe.display())),
        "{}",
        prompt_of(&test)
    );
}

#[test]
fn verify_outside_a_run_redacts_secrets_on_the_terminal_and_in_its_logs() {
    let test = Test::new()
        .pipeline(
            r#"pipeline "p" {
    secret "API_TOKEN"
    env "DEPLOY_KEY" "key-from-the-pipeline-5678"
    secret "DEPLOY_KEY"
}
phase "a" {
    run "true"
    gates {
        command "echo token=$API_TOKEN key=$DEPLOY_KEY; exit 1" name="leaky"
    }
}
"#,
        )
        .env("API_TOKEN", "tok-inherited-1234");
    let outcome = test.with_args(&["verify"]).run().code(1);
    let json = test.with_args(&["verify", "--json"]).run().code(1);
    let mut seen = format!(
        "{}{}{}{}",
        outcome.stdout_redacted(),
        outcome.stderr_redacted(),
        json.stdout_redacted(),
        json.stderr_redacted()
    );
    for log in std::fs::read_dir(test.path().join(".helixflow/verify")).unwrap() {
        seen.push_str(&std::fs::read_to_string(log.unwrap().path()).unwrap_or_default());
    }
    assert!(seen.contains("[REDACTED:API_TOKEN]"), "{seen}");
    assert!(!seen.contains("tok-inherited-1234"), "{seen}");
    assert!(!seen.contains("key-from-the-pipeline-5678"), "{seen}");
}

#[test]
fn self_mode_fails_an_agent_that_sees_verify_fail_and_exits_anyway() {
    let test = self_pipeline("echo 'def f(:' > out.py\n\"$HFBIN\" verify\nexit 0\n", 0);
    test.with_args(&["run", "--no-progress"]).run().code(1);
    let text = feedback(test.path(), 1);
    assert!(
        text.contains("last `helixflow verify`") && text.contains("failed"),
        "{text}"
    );
    assert!(
        text.contains("out.py:1:"),
        "the feedback says what failed: {text}"
    );
    let receipt: Value = serde_json::from_str(
        &std::fs::read_to_string(latest_run(test.path()).join("phases/a/attempt-1/receipt.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(receipt["success"], false);
}

#[test]
fn self_mode_fails_an_agent_that_edits_after_a_passing_verify() {
    let test = self_pipeline(
        "echo 'x = 1' > out.py\n\"$HFBIN\" verify || exit 1\necho 'y = 2' >> out.py\n",
        0,
    );
    test.with_args(&["run", "--no-progress"]).run().code(1);
    let text = feedback(test.path(), 1);
    assert!(
        text.contains("changed after your last passing") && text.contains("`out.py` was modified"),
        "{text}"
    );
}

#[test]
fn self_mode_passes_an_honest_agent_and_keeps_a_receipt_with_fingerprints() {
    // The JSON goes to the state folder: a file written into the workspace after verifying
    // would itself be a change after the receipt.
    let test = self_pipeline(
        "echo 'x = 1' > out.py\n\"$HFBIN\" verify --json > \"$HELIXFLOW_RUN_DIR/verify.json\" || exit 1\n",
        0,
    );
    test.with_args(&["run", "--no-progress"]).run().code(0);
    let run = latest_run(test.path());
    let receipt: Value = serde_json::from_str(
        &std::fs::read_to_string(run.join("phases/a/attempt-1/receipt.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(receipt["success"], true);
    assert!(
        receipt["fingerprints"]["out.py"]
            .as_str()
            .is_some_and(|h| h.len() == 64),
        "{receipt}"
    );
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("verify.json")).unwrap()).unwrap();
    assert_eq!(json["success"], true);
    assert_eq!(json["missing"], serde_json::json!([]));
    assert!(
        json["gates"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "syntax")
    );
}

#[test]
fn a_forged_receipt_file_proves_nothing() {
    let forged = r#"echo 'def f(:' > out.py
mkdir -p "$HELIXFLOW_RUN_DIR/phases/a/attempt-1"
echo '{"receipt": 1, "success": true, "gates": [], "fingerprints": {}}' > "$HELIXFLOW_RUN_DIR/phases/a/attempt-1/receipt.json"
"#;
    let test = self_pipeline(forged, 0);
    test.with_args(&["run", "--no-progress"]).run().code(1);
    assert!(feedback(test.path(), 1).contains("no receipt"));
}

#[test]
fn verify_outside_a_run_checks_the_gates_and_prints_json() {
    let test = Test::new()
        .pipeline("pipeline \"p\"\nphase \"a\" {\n    run \"true\"\n    outputs {\n        file \"out.py\"\n        file \"gone.py\"\n    }\n    scope \"*.py\"\n    gates {\n        syntax\n    }\n}\n")
        .file("out.py", "def f(:\n");
    let outcome = test.with_args(&["verify", "--json"]).run().code(1);
    let json = outcome.json();
    assert_eq!(json["success"], false);
    assert_eq!(json["missing"], serde_json::json!(["gone.py"]));
    assert!(
        json["syntax_errors"][0]
            .as_str()
            .unwrap()
            .starts_with("out.py:1:"),
        "{json}"
    );
    let scope = json["gates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["kind"] == "scope")
        .unwrap();
    assert_eq!(scope["status"], "skipped");
    let human = test.with_args(&["verify"]).run().code(1);
    assert!(
        human.stdout.contains("✗ syntax") && human.stdout.contains("how to fix"),
        "{}",
        human.stdout
    );
    test.with_args(&["verify", "--phase", "nope"]).run().code(2);
}

fn approval_pipeline() -> Test {
    Test::new().pipeline(
        r#"pipeline "p" {
    timeout "2m"
}
phase "a" {
    run "echo $HELIXFLOW_ATTEMPT >> attempts; echo done > out.txt"
    retries 1
    outputs {
        file "out.txt"
    }
    gates {
        approval prompt="Ship it?"
    }
}
"#,
    )
}

fn wait_for_request(workspace: &Path, attempt: u32) -> String {
    let start = Instant::now();
    loop {
        if let Some(run) = common::run_folders(&workspace.join(".helixflow/runs")).pop()
            && run
                .join(format!("phases/a/attempt-{attempt}/approval-request.json"))
                .is_file()
        {
            return run.file_name().unwrap().to_string_lossy().into_owned();
        }
        assert!(
            start.elapsed() < Duration::from_mins(1),
            "no approval request appeared"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn start_run(test: &Test) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_helixflow"))
        .args(["run", "--no-progress"])
        .current_dir(test.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// At a terminal, the question is asked there, and the progress bars (which redraw ten times a
/// second, and a second phase keeps running) are taken off the screen until it is answered.
#[test]
fn the_approval_question_is_not_drawn_over_by_the_progress_bars() {
    use std::io::Write as _;
    let test = Test::new().pipeline(
        r#"pipeline "p" {
    timeout "2m"
}
phase "a" {
    run "echo done > out.txt"
    outputs {
        file "out.txt"
    }
    gates {
        approval prompt="Ship it?"
    }
}
phase "slow" {
    run "sleep 3"
}
"#,
    );
    let line = format!("'{}' run", env!("CARGO_BIN_EXE_helixflow"));
    let Ok(mut child) = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .current_dir(test.path())
        .env("NO_COLOR", "1")
        .env("TERM", "xterm")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
    else {
        eprintln!("skipped: util-linux `script` is not available");
        return;
    };
    wait_for_request_or_question(test.path());
    // The question waits for an answer while the bars would have redrawn many times.
    std::thread::sleep(Duration::from_millis(1500));
    child.stdin.take().unwrap().write_all(b"y\n").unwrap();
    let output = child.wait_with_output().unwrap();
    let screen = String::from_utf8_lossy(&output.stdout);
    // Before the question, the bars' last frame was wiped (cursor up, erase each line), not left
    // on the screen above it.
    let summary = screen
        .find("phase \"a\", attempt 1")
        .unwrap_or_else(|| panic!("{screen:?}"));
    let after_last_bar = screen[..summary].rsplit("attempt 1/3").next().unwrap();
    assert!(after_last_bar.contains("\u{1b}[2K"), "{screen:?}");
    // After the answer, the bars are drawn anew below it: no cursor moves up over the question
    // and the answer to erase them.
    let answered = screen
        .find("Ship it? [y/N] y\r\n")
        .unwrap_or_else(|| panic!("{screen:?}"));
    let next = &screen[answered + "Ship it? [y/N] y\r\n".len()..];
    let moves_up = regex::Regex::new(r"^\u{1b}\[\d+A").unwrap();
    assert!(!moves_up.is_match(next), "{screen:?}");
    assert!(output.status.success(), "{screen}");
}

/// Waits until the run has reached the approval gate (its phase `a` has passed every other gate).
fn wait_for_request_or_question(workspace: &Path) {
    let start = Instant::now();
    while !workspace.join("out.txt").is_file() {
        assert!(
            start.elapsed() < Duration::from_mins(1),
            "phase a never ran"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
}

#[test]
fn approval_from_a_second_process_lets_the_phase_pass() {
    let test = approval_pipeline();
    let mut run = start_run(&test);
    let run_id = wait_for_request(test.path(), 1);
    let answer = test.with_args(&["approve", &run_id, "a"]).run().code(0);
    assert!(answer.stdout.contains("approved"), "{}", answer.stdout);
    assert_eq!(run.wait().unwrap().code(), Some(0));
    let approval = events(test.path())
        .into_iter()
        .find(|e| e["event"] == "gate-finished" && e["report"]["kind"] == "approval")
        .unwrap();
    assert_eq!(approval["report"]["status"], "passed");
}

/// Piped (CI, `--no-progress`), the wait for a person is a line that says what to type, so the
/// run does not look hung; the line is read as it comes, before anything answers it.
#[test]
fn a_plain_report_says_the_run_awaits_approval_and_how_to_give_it() {
    use std::io::BufRead as _;
    let test = approval_pipeline();
    let mut run = Command::new(env!("CARGO_BIN_EXE_helixflow"))
        .args(["run", "--no-progress"])
        .current_dir(test.path())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(run.stderr.take().unwrap()).lines();
    // The run's own `timeout` ends its output should the line never come.
    let waiting = lines
        .by_ref()
        .map(Result::unwrap)
        .find(|line| line.contains("awaiting approval"))
        .expect("a line saying the run awaits approval");
    let run_id = common::run_folders(&test.path().join(".helixflow/runs"))[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert_eq!(
        waiting,
        format!(
            "[a] attempt 1/2: awaiting approval: helixflow approve {run_id} a \
             (or helixflow reject {run_id} a --reason …)"
        )
    );
    test.with_args(&["approve", &run_id, "a"]).run().code(0);
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    assert_eq!(run.wait().unwrap().code(), Some(0), "{rest:?}");
    assert!(rest.iter().any(|l| l.starts_with("run passed")), "{rest:?}");
}

#[test]
fn rejection_reason_becomes_feedback_for_the_next_attempt() {
    let test = approval_pipeline();
    let mut run = start_run(&test);
    let run_id = wait_for_request(test.path(), 1);
    test.with_args(&[
        "reject",
        &run_id,
        "a",
        "--reason",
        "the output needs a header",
    ])
    .run()
    .code(0);
    wait_for_request(test.path(), 2);
    assert!(
        feedback(test.path(), 1).contains("the output needs a header"),
        "{}",
        feedback(test.path(), 1)
    );
    test.with_args(&["approve", "latest", "a"]).run().code(0);
    assert_eq!(run.wait().unwrap().code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(test.path().join("attempts")).unwrap(),
        "1\n2\n"
    );
}

#[test]
fn approve_refuses_a_phase_that_is_not_waiting() {
    let test = approval_pipeline();
    test.with_args(&["approve", "latest", "a"]).run().code(2);
}

#[test]
fn a_failed_external_check_skips_the_approval_and_later_modes() {
    let test = Test::new()
        .file(
            "agent.sh",
            "echo 'def f(:' > out.py\n\"$HFBIN\" verify\nexit 0\n",
        )
        .env("HFBIN", env!("CARGO_BIN_EXE_helixflow"))
        .pipeline(
            r#"pipeline "p"
agent "bot" {
    command "sh" "agent.sh"
}
phase "a" {
    agent "bot"
    prompt "x"
    verify "both"
    retries 0
    outputs {
        file "out.py"
    }
    gates {
        syntax
        approval
    }
}
"#,
        );
    test.with_args(&["run", "--no-progress"]).run().code(1);
    let gates: Vec<Value> = events(test.path())
        .into_iter()
        .filter(|e| e["event"] == "gate-finished")
        .collect();
    let names: Vec<&str> = gates
        .iter()
        .map(|g| g["report"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["self-verification"],
        "self failed, so external and the approval never ran"
    );
}

const VERIFIER: &str = r#"import json, os, sys
from pathlib import Path
# Recorded outside the workspace: a verifier that writes into it voids its own verdict.
Path(os.environ["MARKER_DIR"], "verifier-ran").open("a").write(os.environ["HELIXFLOW_ATTEMPT"] + "\n")
if os.environ["HELIXFLOW_ATTEMPT"] == "1":
    print(json.dumps({"success": False, "errors": ["the docs never mention mul"], "feedback": "Document mul too."}))
else:
    print("Looks good.\n```json\n" + json.dumps({"success": True, "checks_passed": ["add and mul documented"]}) + "\n```")
"#;

fn sub_agent_pipeline(worker: &str, markers: &Path) -> Test {
    Test::new()
        .env("MARKER_DIR", markers.to_str().unwrap())
        .file("verifier.py", VERIFIER)
        .file("worker.sh", worker)
        .pipeline(
            r#"pipeline "p"
agent "bot" {
    command "sh" "worker.sh" "{{ prompt }}"
}
agent "reviewer" {
    command "python3" "verifier.py" "{{ prompt }}"
}
phase "a" {
    agent "bot"
    prompt "Document add."
    verify "external" "sub-agent"
    verifier "reviewer"
    retries 1
    outputs {
        file "doc.md"
    }
}
"#,
        )
}

#[test]
fn a_verifier_rejection_reaches_the_next_prompt_and_a_pass_ends_the_phase() {
    let markers = tempfile::tempdir().unwrap();
    let test = sub_agent_pipeline("echo '# add' > doc.md\n", markers.path());
    test.with_args(&["run", "--no-progress"]).run().code(0);
    let run = latest_run(test.path());
    let prompt2 = std::fs::read_to_string(run.join("phases/a/attempt-2/prompt.md")).unwrap();
    assert!(
        prompt2.contains("the docs never mention mul") && prompt2.contains("Document mul too."),
        "{prompt2}"
    );
    assert!(run.join("phases/a/attempt-1/verdict.json").is_file());
    let verifier_prompt =
        std::fs::read_to_string(run.join("phases/a/attempt-1/verifier-prompt.md")).unwrap();
    assert!(
        verifier_prompt.contains("Document add.") && verifier_prompt.contains("doc.md"),
        "{verifier_prompt}"
    );
    assert_eq!(
        std::fs::read_to_string(markers.path().join("verifier-ran")).unwrap(),
        "1\n2\n"
    );
}

#[test]
fn a_verifier_that_writes_into_the_workspace_is_void_and_undone() {
    let test = Test::new()
        .file("verifier.py", "open('scratch.txt', 'w').write('x')\nprint('{\"success\": true}')\n")
        .file("doc.md", "original\n")
        .pipeline(
            "pipeline \"p\"\nagent \"reviewer\" {\n    command \"python3\" \"verifier.py\"\n}\nphase \"a\" {\n    run \"echo changed > doc.md\"\n    verify \"sub-agent\"\n    verifier \"reviewer\"\n    retries 0\n}\n",
        );
    test.with_args(&["run", "--no-progress"]).run().code(1);
    assert!(
        !test.path().join("scratch.txt").exists(),
        "the verifier's file was removed"
    );
    assert_eq!(
        std::fs::read_to_string(test.path().join("doc.md")).unwrap(),
        "changed\n",
        "the attempt's own work stays"
    );
    assert!(
        feedback(test.path(), 1).contains("scratch.txt"),
        "{}",
        feedback(test.path(), 1)
    );
}

#[test]
fn the_verifier_is_never_started_after_external_verification_failed() {
    let markers = tempfile::tempdir().unwrap();
    let test = sub_agent_pipeline("echo 'no doc written'\n", markers.path());
    test.with_args(&["run", "--no-progress"]).run().code(1);
    assert!(
        !markers.path().join("verifier-ran").exists(),
        "the verifier ran although the outputs gate failed"
    );
    let kinds: Vec<String> = events(test.path())
        .into_iter()
        .filter(|e| e["event"] == "gate-finished")
        .map(|e| e["report"]["kind"].as_str().unwrap().to_owned())
        .collect();
    assert!(kinds.iter().all(|k| k != "sub-agent"), "{kinds:?}");
    assert!(kinds.iter().any(|k| k == "outputs"), "{kinds:?}");
}
