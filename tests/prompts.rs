//! What reaches an agent: prompts rendered strictly and byte-exact, argv placeholders replaced
//! and nothing else, `evidence` over the whole transcript, and feedback that counts the attempts
//! really left. Real pipelines, with small scripts as agents.

mod common;

use std::path::Path;

use common::{Test, latest_run, run_phase as phase};

fn attempt_file(workspace: &Path, phase: &str, attempt: u32, file: &str) -> Vec<u8> {
    let path = latest_run(workspace).join(format!("phases/{phase}/attempt-{attempt}/{file}"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Writes its argv (as JSON) and any standard input to files named after the attempt; fails the
/// first attempt unless `PASS_FIRST` is set, and every attempt when `ALWAYS_FAIL` is.
const RECORDING_AGENT: &str = r#"import json, os, sys
from pathlib import Path
attempt = os.environ["HELIXFLOW_ATTEMPT"]
Path(f"argv-{attempt}.json").write_text(json.dumps(sys.argv[1:]))
given = b"" if sys.stdin.isatty() else sys.stdin.buffer.read()
if given:
    Path(f"stdin-{attempt}.bin").write_bytes(given)
if os.environ.get("ALWAYS_FAIL") or (attempt == "1" and not os.environ.get("PASS_FIRST")):
    sys.exit(1)
"#;

fn argv(test: &Test, attempt: u32) -> Vec<String> {
    serde_json::from_str(&test.read(&format!("argv-{attempt}.json"))).unwrap()
}

#[test]
fn argv_text_other_than_the_placeholders_is_passed_byte_for_byte() {
    let test = Test::new().file("agent.py", RECORDING_AGENT).pipeline(
        r##"pipeline "p"
agent "bot" {
    command "python3" "agent.py" #"echo '{% if x %}' {# not a comment #} {{ x.y }} {{{ phase }}}"# "{{prompt}}" "{{\tattempt  }}"
    resume "python3" "agent.py" "{%raw%}" "{{ feedback_file }}" "{{ phase }}-{{ attempt }}"
}
phase "a" {
    agent "bot"
    prompt "Do it"
    retries 1
}
"##,
    );
    test.with_args(&["lint"]).run().code(0);
    test.with_args(&["run", "--no-progress"]).run().code(0);
    assert_eq!(
        argv(&test, 1),
        [
            "echo '{% if x %}' {# not a comment #} {{ x.y }} {a}",
            "Do it",
            "1"
        ]
    );
    let retry = argv(&test, 2);
    assert_eq!(retry[0], "{%raw%}");
    assert!(
        retry[1].ends_with("phases/a/attempt-1/feedback.md"),
        "{retry:?}"
    );
    assert_eq!(retry[2], "a-2");
}

#[test]
fn a_misspelt_argv_placeholder_or_prompt_variable_stops_the_run_before_any_agent() {
    let test = Test::new().file("agent.py", RECORDING_AGENT).pipeline(
        r#"pipeline "p"
agent "bot" {
    command "python3" "agent.py" "{{ promt }}"
}
phase "a" {
    agent "bot"
    prompt "{{ feedbak }} typo"
}
"#,
    );
    let outcome = test.with_args(&["run", "--no-progress"]).run().code(2);
    assert!(outcome.stderr.contains("HF305"), "{}", outcome.stderr);
    assert!(outcome.stderr.contains("HF307"), "{}", outcome.stderr);
    assert!(!test.path().join("argv-1.json").exists());
}

#[test]
fn feedback_is_defined_on_the_first_attempt_and_a_value_that_is_not_fails_loudly() {
    let test = Test::new().file("agent.py", RECORDING_AGENT).pipeline(
        r#"pipeline "p"
agent "bot" {
    command "python3" "agent.py" "{{ prompt }}"
}
phase "retried" {
    agent "bot"
    prompt "{% if feedback %}RETRY{% else %}FIRST{% endif %} of {{ max_attempts }}"
    retries 1
}
phase "missing" {
    agent "bot"
    prompt "Write {{ outputs[0] }}"
    depends-on "retried"
    on-failure "continue"
}
"#,
    );
    test.with_args(&["run", "--no-progress"]).run().code(1);
    // Phase "missing" started no agent: it would have overwritten argv-1.json.
    assert_eq!(argv(&test, 1), ["FIRST of 2"]);
    let retry = &argv(&test, 2)[0];
    assert!(retry.starts_with("RETRY of 2"), "{retry}");

    // `outputs[0]` of a phase without outputs is undefined: the attempt fails and says why,
    // instead of sending "Write " to the agent.
    let missing = phase(test.path(), "missing");
    assert_eq!(missing["status"], "failed");
    let reason = missing["reason"].as_str().unwrap();
    assert!(reason.contains("the prompt does not render"), "{reason}");
    assert!(reason.contains("undefined"), "{reason}");
}

#[test]
fn prompts_keep_their_trailing_newlines_in_argv_on_stdin_and_in_prompt_md() {
    let test = Test::new()
        .file("agent.py", RECORDING_AGENT)
        .file("prompts/task.md", "hello\n\n")
        .file("prompts/common.md", "Shared for {{ phase }}.\n")
        .pipeline(
            r##"pipeline "p"
agent "argv" {
    command "python3" "agent.py" "{{ prompt }}"
    env "PASS_FIRST" "1"
}
agent "stdin" {
    command "python3" "agent.py"
    stdin #true
    env "PASS_FIRST" "1"
}
phase "a" {
    agent "argv"
    prompt file="prompts/task.md"
}
phase "b" {
    agent "stdin"
    prompt "line\n"
    depends-on "a"
}
phase "c" {
    agent "argv"
    prompt #"{% include "prompts/common.md" %}"#
    depends-on "b"
}
"##,
        );
    test.with_args(&["run", "--no-progress", "--jobs", "1"])
        .run()
        .code(0);
    // Each phase overwrote argv-1.json; the saved prompts keep every phase's.
    assert_eq!(attempt_file(test.path(), "a", 1, "prompt.md"), b"hello\n\n");
    assert_eq!(attempt_file(test.path(), "b", 1, "prompt.md"), b"line\n");
    assert_eq!(
        std::fs::read(test.path().join("stdin-1.bin")).unwrap(),
        b"line\n"
    );
    assert_eq!(
        attempt_file(test.path(), "c", 1, "prompt.md"),
        b"Shared for c.\n"
    );
    assert_eq!(argv(&test, 1), ["Shared for c.\n"]);
}

#[test]
fn a_prompt_file_reaches_the_agent_argv_byte_exact() {
    let test = Test::new()
        .file("agent.py", RECORDING_AGENT)
        .file("prompts/task.md", "hello\n\n")
        .pipeline(
            r#"pipeline "p"
agent "bot" {
    command "python3" "agent.py" "{{ prompt }}"
    env "PASS_FIRST" "1"
}
phase "a" {
    agent "bot"
    prompt file="prompts/task.md"
}
"#,
        );
    test.with_args(&["run", "--no-progress"]).run().code(0);
    assert_eq!(argv(&test, 1), ["hello\n\n"]);
}

/// Prints two lines on stdout and one on stderr.
const TALKING_AGENT: &str = "import sys\nprint('a')\nprint('b')\nprint('c', file=sys.stderr)\n";

#[test]
fn evidence_is_matched_across_the_lines_of_the_transcript() {
    let test = Test::new().file("agent.py", TALKING_AGENT).pipeline(
        r##"pipeline "p"
agent "across" {
    command "python3" "agent.py"
    evidence "a\\nb"
}
agent "lines" {
    command "python3" "agent.py"
    evidence "^b$"
}
agent "stderr" {
    command "python3" "agent.py"
    evidence #"(?s)^c\n\z"#
}
agent "absent" {
    command "python3" "agent.py"
    evidence "a\\nc"
}
phase "across" {
    agent "across"
    retries 0
    on-failure "continue"
}
phase "lines" {
    agent "lines"
    retries 0
    on-failure "continue"
}
phase "stderr" {
    agent "stderr"
    retries 0
    on-failure "continue"
}
phase "absent" {
    agent "absent"
    retries 0
    on-failure "continue"
}
"##,
    );
    test.with_args(&["run", "--no-progress"]).run().code(1);
    for passing in ["across", "lines", "stderr"] {
        assert_eq!(phase(test.path(), passing)["status"], "passed", "{passing}");
    }
    // stdout and stderr are separate texts: "a\nc" spans neither.
    assert_eq!(phase(test.path(), "absent")["status"], "failed");
    let feedback =
        String::from_utf8(attempt_file(test.path(), "absent", 1, "feedback.md")).unwrap();
    assert!(feedback.contains("required evidence"), "{feedback}");
}

#[test]
fn the_last_attempt_warning_counts_what_is_left_of_the_retry_budget() {
    let test = Test::new().file("agent.py", RECORDING_AGENT).pipeline(
        r#"pipeline "p" {
    retry-budget 1
}
agent "bot" {
    command "python3" "agent.py" "{{ prompt }}"
    env "ALWAYS_FAIL" "1"
}
phase "a" {
    agent "bot"
    prompt "Do it"
    retries 5
}
"#,
    );
    test.with_args(&["run", "--no-progress"]).run().code(1);
    assert_eq!(phase(test.path(), "a")["attempts"], 2);
    let feedback = String::from_utf8(attempt_file(test.path(), "a", 1, "feedback.md")).unwrap();
    assert!(
        feedback.starts_with("# Attempt 1 of 2 failed verification"),
        "{feedback}"
    );
    assert!(
        feedback.contains("⚠ This is your last attempt"),
        "{feedback}"
    );
    // The second attempt got that feedback in its prompt.
    assert!(
        argv(&test, 2)[0].contains("⚠ This is your last attempt"),
        "{:?}",
        argv(&test, 2)
    );
}

#[test]
fn a_shared_prompt_may_use_vars_that_only_some_phases_set_when_it_guards_them() {
    let test = Test::new()
        .file(
            "prompts/task.md",
            "Implement {{ phase }}.\n{% if vars.extra is defined %}Also: {{ vars.extra }}\n{% endif %}\
             {{ vars.note | default(\"no note\") }}{% if vars.tail %} {{ vars.tail }}{% endif %}\n",
        )
        .pipeline(
            r#"pipeline "p"
agent "a" {
    command "sh" "-c" "printf '%s' \"$1\" > got-$2.txt" "sh" "{{ prompt }}" "{{ phase }}"
}
defaults {
    agent "a"
    retries 0
    prompt file="prompts/task.md"
}
phase "one" {
    vars {
        extra "docs too"
        note "n"
        tail "t"
    }
}
phase "two"
"#,
        );
    test.with_args(&["lint"]).run().code(0);
    test.with_args(&["run", "--no-progress"]).run().code(0);
    assert_eq!(
        test.read("got-one.txt"),
        "Implement one.\nAlso: docs too\nn t\n"
    );
    assert_eq!(test.read("got-two.txt"), "Implement two.\nno note\n");
}
