//! What reaches an agent: prompts rendered strictly and byte-exact, argv placeholders replaced
//! and nothing else, `evidence` over the whole transcript, and feedback that counts the attempts
//! really left. Real pipelines, with small scripts as agents.

use crate::common;

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

// ---------------------------------------------------------------------------------------------
// Sessions, standard input and what the journal says each agent received.

/// An agent that behaves like a CLI with sessions: it records its argv and standard input, prints
/// a JSON line with the session id it works in (the value after `--id` or `--resume`), and fails
/// attempt 1 unless `PASS_FIRST` is set. With
/// `NO_SESSION_FIRST`, attempt 1 dies before it reports a session (as a CLI that never reached its
/// model).
const SESSION_AGENT: &str = r#"import json, os, sys
from pathlib import Path
phase = os.environ["HELIXFLOW_PHASE"]
attempt = os.environ["HELIXFLOW_ATTEMPT"]
role = sys.argv[1]
args = sys.argv[2:]
given = sys.stdin.read()
# Kept in the state folder, which no snapshot looks at: the records are not the agents' work.
records = Path(".helixflow/records")
records.mkdir(parents=True, exist_ok=True)
(records / f"{role}-{phase}-{attempt}.json").write_text(json.dumps({"argv": args, "stdin": given}))
if role == "worker" and attempt == "1" and os.environ.get("NO_SESSION_FIRST"):
    sys.exit(3)
if role == "worker" and args[0] == "--resume" and os.environ.get("LOST_SESSION"):
    print("Invalid session identifier", file=sys.stderr)
    sys.exit(42)
if role == "verifier":
    print(json.dumps({"success": True, "errors": [], "checks_passed": ["looked"], "feedback": ""}))
    sys.exit(0)
print(json.dumps({"type": "system", "session_id": args[1]}))
Path(f"out-{phase}.txt").write_text(attempt)
if attempt == "1" and not os.environ.get("PASS_FIRST"):
    sys.exit(1)
"#;

fn recorded(test: &Test, role: &str, phase: &str, attempt: u32) -> serde_json::Value {
    serde_json::from_str(&test.read(&format!(".helixflow/records/{role}-{phase}-{attempt}.json")))
        .unwrap_or_else(|e| panic!("{role} {phase} {attempt}: {e}"))
}

const SESSION_PIPELINE: &str = r#"pipeline "p" { max-parallel 2; }
agent "cli" {
    command "python3" "agent.py" "worker" "--id" "{{ session_id }}"
    resume "python3" "agent.py" "worker" "--resume" "{{ session_id }}"
    stdin #true
    session-id json="session_id"
}
agent "reviewer" {
    command "python3" "agent.py" "verifier" "--id" "{{ session_id }}"
    stdin #true
}
defaults { agent "cli"; retries 1; }
phase "a" {
    prompt "Task A"
    outputs { file "out-a.txt" }
    verify "external" "sub-agent"
    verifier "reviewer"
}
phase "b" { prompt "Task B"; outputs { file "out-b.txt" } }
"#;

#[test]
fn a_retry_continues_its_own_session_never_a_verifier_s_or_a_sibling_s() {
    let test = Test::new()
        .file("agent.py", SESSION_AGENT)
        .pipeline(SESSION_PIPELINE);
    test.with_args(&["lint"]).run().code(0);
    test.with_args(&["run", "--no-progress"]).run().code(0);
    for phase in ["a", "b"] {
        let first = recorded(&test, "worker", phase, 1);
        let retry = recorded(&test, "worker", phase, 2);
        let given = first["argv"][1].as_str().unwrap().to_owned();
        uuid::Uuid::parse_str(&given).expect("a UUID for `{{ session_id }}`");
        // The session the first attempt reported, which is the one helixflow gave it.
        assert_eq!(retry["argv"][0], "--resume", "{retry}");
        assert_eq!(retry["argv"][1], given.as_str(), "{retry}");
        // A resume is given the feedback on standard input, not the task again.
        let stdin = retry["stdin"].as_str().unwrap();
        assert!(stdin.starts_with("# Attempt 1 of 2 failed"), "{stdin}");
        assert!(!stdin.contains(&format!("Task {}", phase.to_uppercase())));
        assert_eq!(first["stdin"], format!("Task {}", phase.to_uppercase()));
    }
    // The verifier of `a` reviewed attempt 1 too? No: attempt 1 failed before any review; it
    // reviewed attempt 2, in a session of its own.
    let review = recorded(&test, "verifier", "a", 2);
    assert_ne!(
        review["argv"][1],
        recorded(&test, "worker", "a", 1)["argv"][1]
    );
    // Two phases never share a session.
    assert_ne!(
        recorded(&test, "worker", "a", 1)["argv"][1],
        recorded(&test, "worker", "b", 1)["argv"][1]
    );
    // A second run (forced: every phase is up to date) starts new sessions.
    test.with_args(&["run", "--no-progress", "--force"])
        .env("PASS_FIRST", "1")
        .run()
        .code(0);
    let again = recorded(&test, "worker", "a", 1);
    assert_eq!(again["argv"][0], "--id");
    let first_run_id = std::fs::read_to_string(
        common::run_folders(&test.path().join(".helixflow/runs"))[0]
            .join("phases/a/attempt-1/invocation.json"),
    )
    .unwrap();
    assert!(!first_run_id.contains(again["argv"][1].as_str().unwrap()));
}

#[test]
fn the_journal_shows_what_each_attempt_s_agent_received() {
    let test = Test::new()
        .file("agent.py", SESSION_AGENT)
        .pipeline(SESSION_PIPELINE);
    test.with_args(&["run", "--no-progress", "--only", "a"])
        .run()
        .code(0);
    let run = latest_run(test.path());
    let invocation = |attempt: u32| -> serde_json::Value {
        serde_json::from_slice(&attempt_file(test.path(), "a", attempt, "invocation.json")).unwrap()
    };
    let first = invocation(1);
    assert_eq!(first["resume"], false);
    assert_eq!(first["stdin"], true);
    assert_eq!(first["argv"][0], "python3");
    assert_eq!(first["argv"][4], first["session_id"]);
    assert_eq!(attempt_file(test.path(), "a", 1, "stdin.txt"), b"Task A");
    let second = invocation(2);
    assert_eq!(second["resume"], true);
    assert_eq!(second["argv"][3], "--resume");
    assert_eq!(second["session_id"], first["session_id"]);
    let given = attempt_file(test.path(), "a", 2, "feedback-given.md");
    assert_eq!(attempt_file(test.path(), "a", 2, "stdin.txt"), given);
    assert_eq!(
        given,
        std::fs::read(run.join("phases/a/attempt-1/feedback.md")).unwrap()
    );
    assert!(
        !run.join("phases/a/attempt-1/feedback-given.md").exists(),
        "a first attempt is given no feedback"
    );
}

#[test]
fn a_retry_with_no_session_to_continue_starts_over_with_the_task_and_the_feedback() {
    let test = Test::new()
        .file("agent.py", SESSION_AGENT)
        .pipeline(SESSION_PIPELINE);
    test.with_args(&["run", "--no-progress", "--only", "a"])
        .env("NO_SESSION_FIRST", "1")
        .run()
        .code(0);
    let first = recorded(&test, "worker", "a", 1);
    let retry = recorded(&test, "worker", "a", 2);
    // `command` again, with a new session, not a `resume` of one that never existed.
    assert_eq!(retry["argv"][0], "--id", "{retry}");
    assert_ne!(retry["argv"][1], first["argv"][1]);
    let stdin = retry["stdin"].as_str().unwrap();
    assert!(stdin.starts_with("Task A"), "{stdin}");
    assert!(stdin.contains("exited with code 3"), "{stdin}");
}

#[test]
fn a_resume_that_finds_no_session_is_followed_by_a_fresh_start() {
    let test = Test::new()
        .file("agent.py", SESSION_AGENT)
        .pipeline(&SESSION_PIPELINE.replace("retries 1;", "retries 2;"));
    test.with_args(&["run", "--no-progress", "--only", "b"])
        .env("LOST_SESSION", "1")
        .run()
        .code(0);
    assert_eq!(recorded(&test, "worker", "b", 2)["argv"][0], "--resume");
    let third = recorded(&test, "worker", "b", 3);
    assert_eq!(third["argv"][0], "--id", "{third}");
    let stdin = third["stdin"].as_str().unwrap();
    assert!(stdin.starts_with("Task B"), "{stdin}");
    assert!(stdin.contains("exited with code 42"), "{stdin}");
}

#[test]
fn dry_run_shows_the_argv_of_a_retry_and_what_goes_to_standard_input() {
    let test = Test::new()
        .file("agent.py", SESSION_AGENT)
        .pipeline(SESSION_PIPELINE);
    let outcome = test.with_args(&["run", "--dry-run"]).run().code(0);
    let stdout = outcome.stdout_redacted();
    assert!(
        stdout.contains("agent \"cli\": python3 agent.py worker --id '<new session id>'"),
        "{stdout}"
    );
    assert!(
        stdout.contains("retries: python3 agent.py worker --resume '<the session to continue>'"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "standard input: the prompt; on a retry that continues the session, the feedback"
        ),
        "{stdout}"
    );
}

#[test]
fn an_argument_over_the_os_limit_fails_the_attempt_before_anything_starts() {
    let test = Test::new()
        .file("agent.py", RECORDING_AGENT)
        .file("big.md", &"x".repeat(200 * 1024))
        .pipeline(
            r#"pipeline "p"
agent "bot" { command "python3" "agent.py" "{{ prompt }}"; }
phase "a" { agent "bot"; prompt file="big.md"; retries 2; }
"#,
        );
    let lint = test.with_args(&["lint", "--format", "json"]).run().code(0);
    assert_eq!(lint.codes(), ["HF606"]);
    let outcome = test.with_args(&["run", "--no-progress"]).run().code(1);
    let stderr = outcome.stderr_redacted();
    assert!(
        stderr.contains("more than the 128 KiB") && stderr.contains("stdin #true"),
        "{stderr}"
    );
    assert!(!test.path().join("argv-1.json").exists(), "the agent ran");
    // It would fail the same way again: no retry.
    assert_eq!(phase(test.path(), "a")["attempts"], 1);
}

/// Prints what a CLI prints on an API error, per `SHAPE`, and exits 1 with `STDERR` on standard
/// error.
const FAILING_CLI: &str = r#"import json, os, sys
shape = os.environ["SHAPE"]
if shape == "claude":
    print(json.dumps({"type": "system", "subtype": "init", "session_id": "s"}))
    print(json.dumps({"type": "result", "subtype": "success", "is_error": True,
                      "result": "Invalid API key · Fix external API key", "session_id": "s"}))
elif shape == "gemini":
    # Gemini CLI writes its API errors to standard error, after other lines.
    sys.stderr.write("Loaded cached credentials.\n")
    sys.stderr.write(json.dumps({"error": {"type": "Error", "message": "[API Error: quota exceeded]", "code": 1}}, indent=2) + "\n")
elif shape == "codex":
    print(json.dumps({"type": "thread.started", "thread_id": "t"}))
    print(json.dumps({"type": "turn.failed", "error": {"message": "unexpected status 401 Unauthorized"}}))
sys.stderr.write(os.environ.get("STDERR", ""))
sys.exit(1)
"#;

#[test]
fn the_error_an_agent_reports_reaches_the_feedback_and_run_json_whatever_its_exit() {
    for (shape, format, message) in [
        ("claude", "claude-stream-json", "Invalid API key"),
        ("gemini", "json", "quota exceeded"),
        ("codex", "codex-json", "401 Unauthorized"),
    ] {
        let test = Test::new().file("cli.py", FAILING_CLI).pipeline(&format!(
            r#"pipeline "p"
agent "cli" {{ command "python3" "cli.py"; response "{format}"; }}
phase "a" {{ agent "cli"; prompt "go"; retries 0; }}
"#
        ));
        test.with_args(&["run", "--no-progress"])
            .env("SHAPE", shape)
            .run()
            .code(1);
        let feedback = String::from_utf8(attempt_file(test.path(), "a", 1, "feedback.md")).unwrap();
        let reported = feedback
            .find(message)
            .unwrap_or_else(|| panic!("{feedback}"));
        let exit = feedback.find("exited with code 1").unwrap();
        assert!(
            reported < exit,
            "the agent's own message comes first: {feedback}"
        );
        let summary = std::fs::read_to_string(latest_run(test.path()).join("run.json")).unwrap();
        assert!(summary.contains(message), "{shape}: {summary}");
    }
}

#[test]
fn feedback_keeps_the_start_and_end_of_a_long_stderr_without_terminal_codes() {
    let mut stderr = String::from("\u{1b}[31mError: unknown option '--bogus'\u{1b}[0m\n");
    for i in 0..200 {
        stderr.push_str(&format!("  usage line {i}\n"));
    }
    stderr.push_str("the last line\n");
    let test = Test::new().file("cli.py", FAILING_CLI).pipeline(
        r#"pipeline "p"
agent "cli" { command "python3" "cli.py"; }
phase "a" { agent "cli"; prompt "go"; retries 0; }
"#,
    );
    test.with_args(&["run", "--no-progress"])
        .env("SHAPE", "none")
        .env("STDERR", &stderr)
        .run()
        .code(1);
    let feedback = String::from_utf8(attempt_file(test.path(), "a", 1, "feedback.md")).unwrap();
    assert!(
        feedback.contains("Error: unknown option '--bogus'"),
        "{feedback}"
    );
    assert!(feedback.contains("the last line"), "{feedback}");
    assert!(feedback.contains("lines left out"), "{feedback}");
    assert!(!feedback.contains('\u{1b}'), "{feedback:?}");
}

/// Prints a Claude Code transcript: a `Write` call that was refused (plan mode), and with
/// `ALLOWED` a `Bash` call that ran.
const TOOL_CALLS: &str = r#"import json, os
def out(event): print(json.dumps(event))
out({"type": "assistant", "message": {"content": [{"type": "tool_use", "id": "1", "name": "Write", "input": {}}]}})
out({"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "1", "is_error": True,
     "content": "Claude requested permissions to use Write, but you haven't granted it yet."}]}})
if os.environ.get("ALLOWED"):
    out({"type": "assistant", "message": {"content": [{"type": "tool_use", "id": "2", "name": "Bash", "input": {}}]}})
    out({"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "2", "content": "ok"}]}})
out({"type": "result", "subtype": "success", "is_error": False, "result": "done"})
"#;

#[test]
fn only_tool_calls_that_succeeded_count_as_evidence() {
    let test = Test::new().file("cli.py", TOOL_CALLS).pipeline(
        r#"pipeline "p"
agent "cli" {
    command "python3" "cli.py"
    response "claude-stream-json"
    evidence-tools
}
phase "a" { agent "cli"; prompt "go"; retries 0; }
"#,
    );
    test.with_args(&["lint"]).run().code(0);
    test.with_args(&["run", "--no-progress"]).run().code(1);
    let feedback = String::from_utf8(attempt_file(test.path(), "a", 1, "feedback.md")).unwrap();
    assert!(
        feedback.contains("1 were refused or failed (Write)"),
        "{feedback}"
    );
    test.with_args(&["run", "--no-progress"])
        .env("ALLOWED", "1")
        .run()
        .code(0);
}

#[test]
fn codex_events_give_the_response_and_the_session() {
    let test = Test::new()
        .file(
            "cli.py",
            r#"import json, os, sys
from pathlib import Path
attempt = os.environ["HELIXFLOW_ATTEMPT"]
Path(f"argv-{attempt}.json").write_text(json.dumps(sys.argv[1:]))
def out(event): print(json.dumps(event))
out({"type": "thread.started", "thread_id": "thread-" + attempt})
out({"type": "item.completed", "item": {"id": "0", "type": "agent_message", "text": "thinking"}})
out({"type": "item.completed", "item": {"id": "1", "type": "command_execution", "command": "x",
     "aggregated_output": "", "exit_code": 0, "status": "completed"}})
out({"type": "item.completed", "item": {"id": "2", "type": "agent_message", "text": "DONE " + attempt}})
out({"type": "turn.completed", "usage": {"input_tokens": 1, "cached_input_tokens": 0, "output_tokens": 1}})
"#,
        )
        .pipeline(
            r#"pipeline "p"
agent "codex" {
    command "python3" "cli.py" "new"
    resume "python3" "cli.py" "resume" "{{ session_id }}"
    stdin #true
    session-id json="thread_id"
    response "codex-json"
    evidence-tools "command_execution"
}
phase "a" {
    agent "codex"
    prompt "go"
    gates { matches "response" "^DONE 2$" }
}
"#,
        );
    test.with_args(&["run", "--no-progress"]).run().code(0);
    let retry: Vec<String> = serde_json::from_str(&test.read("argv-2.json")).unwrap();
    assert_eq!(retry, ["resume", "thread-1"]);
}

#[test]
fn bookkeeping_files_escape_scope_and_changes_but_not_protect() {
    let agent = r#"from pathlib import Path
Path(".aider.chat.history.md").write_text("history")
Path(".aider.tags.cache.v4").mkdir(exist_ok=True)
Path(".aider.tags.cache.v4/cache.db").write_text("x")
Path("src").mkdir(exist_ok=True)
Path("src/a.py").write_text("x = 1\n")
"#;
    let pipeline = |protect: &str| {
        format!(
            r#"pipeline "p"
agent "aider" {{
    command "python3" "agent.py"
    bookkeeping ".aider.chat.history.md" ".aider.tags.cache.v4/**"
}}
phase "a" {{
    agent "aider"
    prompt "go"
    retries 0
    scope "src/**"
    {protect}
    gates {{ changes min=2 }}
}}
"#
        )
    };
    let test = Test::new().file("agent.py", agent).pipeline(&pipeline(""));
    let outcome = test.with_args(&["run", "--no-progress"]).run().code(1);
    // `scope` passed; `changes` saw one file, not three.
    let gates = String::from_utf8(attempt_file(test.path(), "a", 1, "gates.json")).unwrap();
    assert!(
        gates.contains("the attempt changed 1 file"),
        "{gates}\n{outcome:?}"
    );
    let scope = gates.find("\"scope\"").unwrap();
    assert!(gates[scope..].contains("\"passed\""), "{gates}");
    let listed = String::from_utf8(attempt_file(test.path(), "a", 1, "bookkeeping.json")).unwrap();
    assert!(listed.contains(".aider.chat.history.md"), "{listed}");
    assert!(listed.contains(".aider.tags.cache.v4/cache.db"), "{listed}");
    let changes = String::from_utf8(attempt_file(test.path(), "a", 1, "changes.json")).unwrap();
    assert!(!changes.contains(".aider"), "{changes}");

    let protected = Test::new()
        .file("agent.py", agent)
        .file(".aider.chat.history.md", "old")
        .pipeline(&pipeline(r#"protect ".aider.chat.history.md""#));
    protected.with_args(&["run", "--no-progress"]).run().code(1);
    let gates = String::from_utf8(attempt_file(protected.path(), "a", 1, "gates.json")).unwrap();
    assert!(
        gates.contains("protected file `.aider.chat.history.md` was modified"),
        "{gates}"
    );
}
