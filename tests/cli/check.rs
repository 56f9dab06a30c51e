//! `helixflow check`: every phase's outputs and gates against the workspace as it is, with the
//! reporters of `run`, and nothing started that belongs to an agent or a `run` step.

use crate::common::Test;
use serde_json::Value;

/// A two-phase pipeline: `gen` is a `run` step, `parser` an agent's phase after it. The agent and
/// the step would each leave a marker file, should `check` ever start them.
const PIPELINE: &str = r#"pipeline "p" {
    secret "TOKEN"
}
agent "bot" {
    command "sh" "agent.sh"
}
phase "parser" {
    agent "bot"
    depends-on "gen"
    prompt "Write src/parser.py"
    outputs {
        file "src/parser.py"
    }
    scope "src/**"
    gates {
        syntax
        command "grep -q parse src/parser.py" name="tests"
        matches "response" "done" name="said-done"
        changes
    }
}
phase "gen" {
    run "touch step-ran"
    outputs {
        file "gen.txt"
    }
    gates {
        command "test -s gen.txt" name="generated"
    }
}
"#;

/// The workspace as agents left it: every output there, every gate passing.
fn workspace() -> Test {
    Test::new()
        .pipeline(PIPELINE)
        .file("agent.sh", "touch agent-ran\necho done\n")
        .file("gen.txt", "generated\n")
        .file("src/parser.py", "def parse(text):\n    return text\n")
}

fn events(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

#[test]
fn passes_when_every_output_exists_and_every_gate_passes() {
    let test = workspace();
    let out = test
        .with_args(&["check", "--no-progress", "--junit", "junit.xml"])
        .run()
        .code(0);
    assert!(out.stderr.contains("2 passed, 0 failed"), "{}", out.stderr);
    // Nothing that belongs to an agent or a `run` step ran, and no run was recorded.
    assert!(!test.path().join("agent-ran").exists(), "the agent ran");
    assert!(!test.path().join("step-ran").exists(), "the run step ran");
    assert!(!test.path().join(".helixflow/runs").exists());
    let junit = test.read("junit.xml");
    assert!(junit.contains(r#"<testsuite name="parser""#), "{junit}");
    assert!(junit.contains(r#"<testcase name="tests" classname="parser""#));
    assert!(junit.contains(r#"failures="0""#), "{junit}");
    // The markers are real: a run starts both.
    test.with_args(&["run", "--no-progress"]).run();
    assert!(test.path().join("agent-ran").exists() && test.path().join("step-ran").exists());
    // Gates that only an attempt can judge are not applicable, with the reason, not failures.
    assert!(
        junit.contains(r#"<testcase name="scope" classname="parser""#)
            && junit
                .contains("judged only inside a run, against the attempt&apos;s starting point")
            && junit.contains("the response exists only inside a run"),
        "{junit}"
    );
}

#[test]
fn a_missing_output_fails_naming_the_phase_and_the_gate() {
    let test = workspace();
    std::fs::remove_file(test.path().join("src/parser.py")).unwrap();
    let out = test.with_args(&["check", "--no-progress"]).run().code(1);
    assert!(
        out.stderr
            .contains("[parser] attempt 1/1: gate outputs failed"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("src/parser.py"), "{}", out.stderr);
    assert!(out.stderr.contains("[gen] passed"), "{}", out.stderr);
    assert!(out.stderr.contains("1 passed, 1 failed"), "{}", out.stderr);
}

#[test]
fn a_syntax_error_fails_with_its_location() {
    let test = workspace().file("src/parser.py", "def parse(:\n    return parse\n");
    let out = test.with_args(&["check", "--no-progress"]).run().code(1);
    assert!(
        out.stderr
            .contains("[parser] attempt 1/1: gate syntax failed"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("src/parser.py:1:"), "{}", out.stderr);
}

#[test]
fn a_failing_command_gate_fails_and_its_fix_is_not_run() {
    let test = workspace().file("gen.txt", "").pipeline(&PIPELINE.replace(
        r#"name="generated""#,
        r#"name="generated" fix="echo fixed > gen.txt""#,
    ));
    let out = test
        .with_args(&["check", "--no-progress", "--junit", "reports/junit.xml"])
        .run()
        .code(1);
    assert!(
        out.stderr
            .contains("[gen] attempt 1/1: gate generated failed"),
        "{}",
        out.stderr
    );
    assert_eq!(test.read("gen.txt"), "", "the fix changed the workspace");
    let junit = test.read("reports/junit.xml");
    assert!(
        junit.contains(r#"<testcase name="generated" classname="gen""#)
            && junit.contains(r#"type="command""#),
        "{junit}"
    );
    // Checked all the same: a check changes nothing, so CI learns of every problem at once.
    assert!(junit.contains(r#"<testsuite name="parser""#), "{junit}");
}

#[test]
fn phases_are_checked_in_dependency_order() {
    // `parser` comes first in the file but depends on `gen`.
    let out = workspace()
        .args(&["check", "--no-progress", "--events", "-"])
        .run()
        .code(0);
    let finished: Vec<String> = events(&out.stdout)
        .iter()
        .filter(|e| e["event"] == "phase-finished")
        .map(|e| e["phase"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(finished, ["gen", "parser"]);
    let all = events(&out.stdout);
    assert_eq!(all.first().unwrap()["event"], "run-started");
    assert_eq!(all.last().unwrap()["event"], "run-finished");
    assert_eq!(all.last().unwrap()["exit_code"], 0);
}

#[test]
fn secrets_are_redacted_from_every_report() {
    let test = workspace().pipeline(&PIPELINE.replace(
        r#"command "test -s gen.txt" name="generated""#,
        r#"command "echo the token is $TOKEN; exit 1" name="generated""#,
    ));
    let out = test
        .with_args(&[
            "check",
            "--no-progress",
            "--junit",
            "junit.xml",
            "--events",
            "events.jsonl",
        ])
        .env("TOKEN", "hunter2-secret")
        .run()
        .code(1);
    assert!(out.stderr.contains("the token is"), "{}", out.stderr);
    for (what, text) in [
        ("stderr", out.stderr.clone()),
        ("junit", test.read("junit.xml")),
        ("events", test.read("events.jsonl")),
    ] {
        assert!(
            !text.contains("hunter2-secret"),
            "{what} shows the secret:\n{text}"
        );
    }
}

#[test]
fn an_invalid_pipeline_exits_2_and_checks_nothing() {
    let out = workspace()
        .pipeline(
            "pipeline \"p\"\nphase \"a\" {\n    run \"true\"\n    depends-on \"nowhere\"\n}\n",
        )
        .args(&["check", "--no-progress"])
        .run()
        .code(2);
    assert!(out.stderr.contains("nowhere"), "{}", out.stderr);
}

#[test]
fn help_says_what_check_does_and_what_it_never_starts() {
    let out = Test::new().args(&["check", "--help"]).run().code(0);
    let text = out.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    for needle in [
        "in dependency order",
        "No agent is started and no `run` step's command runs",
        "--junit <FILE>",
        "--events <FILE>",
        "Exits 0 when every phase's checks pass, 1 when one fails, 2 when the pipeline is invalid",
    ] {
        assert!(text.contains(needle), "{needle:?} missing:\n{}", out.stdout);
    }
}

#[test]
fn a_state_folder_that_is_a_file_is_helixflows_failure_not_the_gates() {
    let out = Test::new()
        .pipeline("pipeline \"p\"\nphase \"a\" {\n    run \"true\"\n    gates {\n        command \"true\"\n    }\n}\n")
        .file(".helixflow", "not a folder")
        .args(&["check", "--no-progress"])
        .run()
        .code(3);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(all.contains("cannot create the log folder"), "{all}");
    assert!(!all.contains("could not be started"), "{all}");
}
