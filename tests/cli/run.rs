//! `helixflow run` end to end: real pipelines, real child processes acting as agents.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Test, latest_run};
use serde_json::Value;

/// Every line of a run's journal, parsed; panics on a line that is not JSON.
fn journal(workspace: &Path) -> Vec<Value> {
    let run = latest_run(workspace);
    let text = std::fs::read_to_string(run.join("events.jsonl")).expect("events.jsonl exists");
    text.lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("journal line is not JSON ({e}): {line}"))
        })
        .collect()
}

fn summary(workspace: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(latest_run(workspace).join("run.json")).unwrap())
        .unwrap()
}

fn phase_status(summary: &Value, phase: &str) -> (String, u64, String) {
    let p = summary["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == phase)
        .unwrap_or_else(|| panic!("no {phase}"));
    (
        p["status"].as_str().unwrap().to_owned(),
        p["attempts"].as_u64().unwrap(),
        p["reason"].as_str().unwrap_or("").to_owned(),
    )
}

#[test]
fn the_quickstart_passes_after_one_retry_that_reads_the_feedback() {
    let test = Test::new();
    common::copy_example(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/quickstart"),
        &test.path().join("qs"),
    );
    let outcome = test
        .with_args(&["run", "qs/pipeline.kdl", "--no-progress"])
        .run()
        .code(0);
    let workspace = test.path().join("qs");
    let summary = summary(&workspace);
    assert_eq!(summary["status"], "passed");
    assert_eq!(phase_status(&summary, "plan").0, "passed");
    assert_eq!(
        phase_status(&summary, "code"),
        ("passed".into(), 2, String::new())
    );
    assert_eq!(phase_status(&summary, "docs").1, 1);
    let feedback =
        std::fs::read_to_string(latest_run(&workspace).join("phases/code/attempt-1/feedback.md"))
            .unwrap();
    assert!(
        feedback.contains("out/calc.py:5"),
        "feedback names the error's place:\n{feedback}"
    );
    let events = journal(&workspace);
    assert_eq!(events.first().unwrap()["event"], "run-started");
    assert_eq!(events.last().unwrap()["event"], "run-finished");
    assert!(outcome.stderr.contains("code"), "{}", outcome.stderr);
}

#[test]
fn an_invalid_pipeline_runs_nothing_and_exits_2() {
    let test = Test::new()
        .pipeline("pipeline \"p\"\nphase \"a\" {\n    run \"touch ran\"\n    retries \"two\"\n}\n");
    let outcome = test.with_args(&["run"]).run().code(2);
    assert!(outcome.stderr.contains("HF105"), "{}", outcome.stderr);
    assert!(!test.path().join("ran").exists());
    assert!(!test.path().join(".helixflow").exists());
}

#[test]
fn dry_run_prints_the_plan_with_rendered_prompts_and_runs_nothing() {
    let test = Test::new().pipeline(
        r#"pipeline "p"
agent "bot" {
    command "python3" "bot.py" "--prompt" "{{ prompt }}"
}
phase "a" {
    agent "bot"
    prompt "Write {{ phase }}, attempt {{ attempt }} of {{ max_attempts }}"
}
phase "b" {
    run "touch b-ran"
    depends-on "a"
}
"#,
    );
    let outcome = test.with_args(&["run", "--dry-run"]).run().code(0);
    assert!(outcome.stdout.contains("level 0: a"), "{}", outcome.stdout);
    assert!(outcome.stdout.contains("level 1: b"), "{}", outcome.stdout);
    assert!(
        outcome
            .stdout
            .contains("python3 bot.py --prompt 'Write a, attempt 1 of 3'"),
        "{}",
        outcome.stdout
    );
    assert!(!test.path().join("b-ran").exists());
    assert!(!test.path().join(".helixflow").exists());
}

/// The plan shows how each phase's work is judged: `scope`, `protect`, the verify modes in the
/// order they run, and the verifier's argv with what goes to its standard input.
#[test]
fn dry_run_shows_scope_protect_verify_modes_and_the_verifier() {
    let test = Test::new().pipeline(
        r#"pipeline "p"
agent "bot" {
    command "bot" "--prompt-file" "{{ prompt_file }}"
}
agent "reviewer" {
    command "review" "--session" "{{ session_id }}" "--read-only"
    stdin #true
}
phase "a" {
    agent "bot"
    prompt "Write src/a.py"
    scope "src/**" "tests/**"
    protect "adr/**"
    verify "sub-agent" "both"
    verifier "reviewer"
}
phase "b" {
    run "true"
}
"#,
    );
    let outcome = test.with_args(&["run", "--dry-run"]).run().code(0);
    let lines: Vec<&str> = outcome.stdout.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("  scope:"))
        .unwrap_or_else(|| panic!("{}", outcome.stdout));
    assert_eq!(
        lines[at..at + 5],
        [
            "  scope: src/**, tests/**",
            "  protect: adr/**",
            "  verify: self, then external, then sub-agent",
            "  verifier \"reviewer\": review --session '<new session id>' --read-only",
            "  verifier's standard input: the review prompt",
        ],
        "{}",
        outcome.stdout
    );
    // A phase that declares none of them is verified externally, and says so.
    let b = lines
        .iter()
        .position(|l| *l == "phase \"b\" (up to 3 attempts)")
        .unwrap();
    assert_eq!(
        lines[b + 1..],
        [
            "  will run: never passed",
            "  run: sh -c true",
            "  verify: external"
        ],
        "{}",
        outcome.stdout
    );
}

#[test]
fn the_concurrency_limit_is_respected() {
    // Each step marks itself running, waits, records how many were running, and unmarks itself.
    let step = "mkdir -p running seen && touch running/$HELIXFLOW_PHASE && sleep 0.3 && ls running | wc -l > seen/$HELIXFLOW_PHASE && rm running/$HELIXFLOW_PHASE";
    let mut text = String::from("pipeline \"p\" {\n    max-parallel 2\n}\n");
    for i in 0..6 {
        text.push_str(&format!("phase \"p{i}\" {{\n    run \"{step}\"\n}}\n"));
    }
    let test = Test::new().pipeline(&text);
    test.with_args(&["run", "--no-progress"]).run().code(0);
    for i in 0..6 {
        let seen: u32 = std::fs::read_to_string(test.path().join(format!("seen/p{i}")))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(
            (1..=2).contains(&seen),
            "p{i} saw {seen} phases running at once; the limit is 2"
        );
    }
    Test::new()
        .pipeline(&text)
        .with_args(&["run", "--no-progress", "--jobs", "1"])
        .run()
        .code(0);
}

#[test]
fn dependents_of_a_failed_phase_are_skipped_with_the_reason() {
    let test = Test::new().pipeline(
        r#"pipeline "p"
phase "a" {
    run "exit 3"
    retries 0
    on-failure "continue"
}
phase "b" {
    run "touch b-ran"
    depends-on "a"
}
phase "c" {
    run "touch c-ran"
    depends-on "b"
}
phase "d" {
    run "touch d-ran"
}
"#,
    );
    let outcome = test.with_args(&["run", "--no-progress"]).run().code(1);
    let summary = summary(test.path());
    assert_eq!(
        phase_status(&summary, "a"),
        ("failed".into(), 1, "no retries left".into())
    );
    // What failed, as the table at the end shows it: the run step's command.
    let a = summary["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "a")
        .unwrap();
    assert_eq!(a["failed-gates"], serde_json::json!(["run"]));
    assert_eq!(
        phase_status(&summary, "b"),
        ("skipped".into(), 0, "dependency \"a\" failed".into())
    );
    assert_eq!(
        phase_status(&summary, "c"),
        ("skipped".into(), 0, "dependency \"b\" was skipped".into())
    );
    assert_eq!(
        phase_status(&summary, "d").0,
        "passed",
        "on-failure continue runs independent phases"
    );
    assert!(!test.path().join("b-ran").exists() && test.path().join("d-ran").exists());
    assert!(
        outcome.stderr.contains("exit 3") || outcome.stderr.contains("code 3"),
        "{}",
        outcome.stderr
    );
}

#[test]
fn on_failure_stop_starts_no_new_phase() {
    let test = Test::new().pipeline(
        r#"pipeline "p" {
    max-parallel 1
}
phase "a" {
    run "exit 1"
    retries 0
}
phase "b" {
    run "touch b-ran"
}
"#,
    );
    test.with_args(&["run", "--no-progress"]).run().code(1);
    let summary = summary(test.path());
    let (status, attempts, reason) = phase_status(&summary, "b");
    assert_eq!((status.as_str(), attempts), ("skipped", 0));
    assert!(reason.contains("stopped after \"a\" failed"), "{reason}");
    assert!(!test.path().join("b-ran").exists());
}

#[test]
fn the_retry_budget_is_shared_and_exhausts() {
    let test = Test::new().pipeline(
        r#"pipeline "p" {
    retry-budget 1
    max-parallel 1
}
phase "a" {
    run "echo a >> attempts; exit 1"
    retries 2
    on-failure "continue"
}
phase "b" {
    run "echo b >> attempts; exit 1"
    retries 2
    on-failure "continue"
}
"#,
    );
    test.with_args(&["run", "--no-progress"]).run().code(1);
    let attempts = std::fs::read_to_string(test.path().join("attempts")).unwrap();
    assert_eq!(
        attempts.lines().count(),
        3,
        "two first attempts and one budgeted retry:\n{attempts}"
    );
    let summary = summary(test.path());
    let reasons: Vec<String> = ["a", "b"]
        .iter()
        .map(|p| phase_status(&summary, p).2)
        .collect();
    assert!(
        reasons.iter().any(|r| r.contains("retry budget")),
        "{reasons:?}"
    );
}

const ECHO_AGENT: &str = r#"import json, os, sys
from pathlib import Path
attempt = os.environ["HELIXFLOW_ATTEMPT"]
Path(f"argv-{attempt}.json").write_text(json.dumps(sys.argv[1:]))
Path(f"env-{attempt}.json").write_text(json.dumps({k: v for k, v in os.environ.items() if k.startswith("HELIXFLOW_") or k in ("FROM_PIPELINE", "FROM_AGENT", "FROM_PHASE", "SHARED")}))
if not sys.stdin.isatty():
    Path(f"stdin-{attempt}.txt").write_bytes(sys.stdin.buffer.read())
print("done")
if attempt == "1":
    sys.exit(1)
"#;

/// An agent whose sessions can be lost, as Gemini CLI's are: a session it started is kept in
/// `sessions/`, and `--resume` of one that is not there fails with exit code 42. The first
/// attempt leaves the work undone; `LOSE` names what else goes wrong: `session` (the session is
/// gone before the retry), `always` (every run of the CLI fails as fatal after the first).
const LOSING_AGENT: &str = r#"import json, os, sys
from pathlib import Path
mode, sid = sys.argv[1], sys.argv[2]
attempt = os.environ["HELIXFLOW_ATTEMPT"]
Path(f"argv-{attempt}.json").write_text(json.dumps(sys.argv[1:]))
Path(f"stdin-{attempt}.txt").write_text(sys.stdin.read())
sessions = Path("sessions")
sessions.mkdir(exist_ok=True)
lose = os.environ.get("LOSE", "")
if attempt != "1" and lose == "always":
    print("API key not valid", file=sys.stderr)
    sys.exit(42)
if mode == "resume" and not (sessions / sid).exists():
    print(f'Error resuming session: Invalid session identifier "{sid}"', file=sys.stderr)
    sys.exit(42)
(sessions / sid).write_text("kept")
if attempt == "1":
    if lose == "session":
        (sessions / sid).unlink()
    print("not yet")
else:
    Path("out.txt").write_text("done\n")
    print("done")
"#;

fn losing_pipeline(lose: &str) -> String {
    format!(
        r#"pipeline "p"
agent "cli" {{
    command "python3" "agent.py" "new" "{{{{ session_id }}}}"
    resume "python3" "agent.py" "resume" "{{{{ session_id }}}}"
    stdin #true
    env "LOSE" "{lose}"
    fatal-exit 42
}}
phase "a" {{
    agent "cli"
    prompt "Write out.txt"
    retries 1
    outputs {{
        file "out.txt"
    }}
}}
"#
    )
}

fn argv_of(test: &Test, attempt: u32) -> Vec<String> {
    let path = test.path().join(format!("argv-{attempt}.json"));
    serde_json::from_str(
        &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}: {}", path.display())),
    )
    .unwrap()
}

#[test]
fn a_retry_whose_session_is_gone_starts_a_new_session_with_the_feedback() {
    let test = Test::new()
        .file("agent.py", LOSING_AGENT)
        .pipeline(&losing_pipeline("session"));
    let outcome = test.with_args(&["run", "--no-progress"]).run().code(0);
    let first = argv_of(&test, 1);
    let resumed = argv_of(&test, 2);
    let fresh = argv_of(&test, 3);
    assert_eq!(first[0], "new");
    assert_eq!(
        resumed,
        ["resume", first[1].as_str()],
        "the retry continued the session"
    );
    assert_eq!(
        fresh[0], "new",
        "the next try started a new session: {fresh:?}"
    );
    assert_ne!(fresh[1], first[1], "with a new id");
    let invocation: Value = serde_json::from_str(
        &std::fs::read_to_string(
            latest_run(test.path()).join("phases/a/attempt-3/invocation.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let why = invocation["why"].as_str().unwrap();
    assert!(
        why.starts_with("attempt 2 of the work again, in a new session")
            && why.contains("with the full prompt and the feedback"),
        "{why}"
    );
    let stdin = std::fs::read_to_string(test.path().join("stdin-3.txt")).unwrap();
    assert!(
        stdin.contains("Write out.txt"),
        "the new session gets the full prompt: {stdin}"
    );
    assert!(
        stdin.to_lowercase().contains("attempt 1"),
        "and the feedback of the attempt that failed: {stdin}"
    );
    assert!(
        outcome
            .stderr
            .contains("could not continue the agent's session")
            && outcome.stderr.contains("Invalid session identifier"),
        "{}",
        outcome.stderr
    );
    let (status, attempts, _) = phase_status(&summary(test.path()), "a");
    assert_eq!((status.as_str(), attempts), ("passed", 3));
    assert_eq!(
        std::fs::read_to_string(test.path().join("out.txt")).unwrap(),
        "done\n"
    );
}

#[test]
fn a_fatal_failure_of_a_retry_is_tried_in_a_new_session_once_then_ends_the_phase() {
    let test = Test::new()
        .file("agent.py", LOSING_AGENT)
        .pipeline(&losing_pipeline("always"));
    let outcome = test.with_args(&["run", "--no-progress"]).run().code(1);
    assert_eq!(argv_of(&test, 2)[0], "resume");
    assert_eq!(argv_of(&test, 3)[0], "new");
    assert!(
        !test.path().join("argv-4.json").exists(),
        "no try after the new session failed as fatal too"
    );
    let (status, attempts, reason) = phase_status(&summary(test.path()), "a");
    assert_eq!((status.as_str(), attempts), ("failed", 3));
    assert!(
        reason.contains("API key not valid") && reason.contains("fatal failure"),
        "{reason}\n{}",
        outcome.stderr
    );
}

#[test]
fn retries_use_the_resume_argv_and_get_the_feedback_file() {
    let test = Test::new().file("agent.py", ECHO_AGENT).pipeline(
        r#"pipeline "p" {
    env "FROM_PIPELINE" "1"
    env "SHARED" "pipeline"
}
agent "bot" {
    command "python3" "agent.py" "first" "{{ prompt }}"
    resume "python3" "agent.py" "resume" "{{ feedback_file }}" "{{ attempt }}"
    env "FROM_AGENT" "1"
    env "SHARED" "agent"
}
phase "a" {
    agent "bot"
    prompt "Do it"
    env "FROM_PHASE" "1"
    env "SHARED" "phase"
}
"#,
    );
    test.with_args(&["run", "--no-progress"]).run().code(0);
    let argv1: Vec<String> =
        serde_json::from_str(&std::fs::read_to_string(test.path().join("argv-1.json")).unwrap())
            .unwrap();
    assert_eq!(argv1, ["first", "Do it"]);
    let argv2: Vec<String> =
        serde_json::from_str(&std::fs::read_to_string(test.path().join("argv-2.json")).unwrap())
            .unwrap();
    assert_eq!(argv2[0], "resume");
    assert!(
        argv2[1].ends_with("phases/a/attempt-1/feedback.md"),
        "{argv2:?}"
    );
    assert!(
        Path::new(&argv2[1]).is_file(),
        "the feedback file exists: {argv2:?}"
    );
    assert_eq!(argv2[2], "2");
    let env2: Value =
        serde_json::from_str(&std::fs::read_to_string(test.path().join("env-2.json")).unwrap())
            .unwrap();
    assert_eq!(env2["HELIXFLOW_PHASE"], "a");
    assert_eq!(env2["HELIXFLOW_ATTEMPT"], "2");
    assert_eq!(env2["HELIXFLOW_FEEDBACK_FILE"], argv2[1].as_str());
    assert!(
        env2["HELIXFLOW_RUN_DIR"]
            .as_str()
            .unwrap()
            .contains(".helixflow/runs/")
    );
    assert_eq!(
        (
            env2["FROM_PIPELINE"].as_str(),
            env2["FROM_AGENT"].as_str(),
            env2["FROM_PHASE"].as_str()
        ),
        (Some("1"), Some("1"), Some("1"))
    );
    assert_eq!(
        env2["SHARED"], "phase",
        "pipeline, agent, then phase env, later wins"
    );
    let env1: Value =
        serde_json::from_str(&std::fs::read_to_string(test.path().join("env-1.json")).unwrap())
            .unwrap();
    assert!(
        env1.get("HELIXFLOW_FEEDBACK_FILE").is_none(),
        "no feedback file on the first attempt"
    );
}

#[test]
fn prompts_reach_the_agent_byte_exact_in_argv_and_on_stdin() {
    let prompt = "Run $(rm -rf /) and `id`; say \"hi\" and 'bye'\nsecond line ünïcödé \\ $HOME";
    let kdl_prompt = prompt
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n");
    let test = Test::new().file("agent.py", ECHO_AGENT).pipeline(&format!(
        r#"pipeline "p"
agent "argv" {{
    command "python3" "agent.py" "{{{{ prompt }}}}"
}}
agent "stdin" {{
    command "python3" "agent.py"
    stdin #true
}}
phase "a" {{
    agent "argv"
    prompt "{kdl_prompt}"
    retries 1
}}
phase "b" {{
    agent "stdin"
    prompt "{kdl_prompt}"
    depends-on "a"
    retries 1
}}
"#
    ));
    test.with_args(&["run", "--no-progress"]).run().code(0);
    // Phase b overwrote argv-1.json; phase a's argv is in its attempt log's prompt, b's on stdin.
    let stdin = std::fs::read_to_string(test.path().join("stdin-1.txt")).unwrap();
    assert_eq!(stdin, prompt);
    let run = latest_run(test.path());
    let saved = std::fs::read_to_string(run.join("phases/a/attempt-1/prompt.md")).unwrap();
    assert_eq!(saved, prompt);
}

#[test]
fn argv_prompts_are_byte_exact() {
    let prompt = "a $(touch pwned) `touch pwned2` \"q\" 'q' ; | & > x\nline 2";
    let kdl_prompt = prompt.replace('"', "\\\"").replace('\n', "\\n");
    let test = Test::new().file("agent.py", ECHO_AGENT).pipeline(&format!(
        "pipeline \"p\"\nagent \"bot\" {{\n    command \"python3\" \"agent.py\" \"{{{{ prompt }}}}\"\n}}\nphase \"a\" {{\n    agent \"bot\"\n    prompt \"{kdl_prompt}\"\n    retries 1\n}}\n"
    ));
    test.with_args(&["run", "--no-progress"]).run().code(0);
    let argv: Vec<String> =
        serde_json::from_str(&std::fs::read_to_string(test.path().join("argv-1.json")).unwrap())
            .unwrap();
    assert_eq!(argv, [prompt]);
    assert!(!test.path().join("pwned").exists() && !test.path().join("pwned2").exists());
}

#[test]
fn secrets_are_redacted_from_logs_events_and_prompts() {
    let test = Test::new()
        .pipeline(
            r#"pipeline "p" {
    secret "API_TOKEN"
}
agent "bot" {
    command "sh" "-c" "echo token=$API_TOKEN; echo err=$API_TOKEN >&2; echo prompt={{ prompt }}"
}
phase "a" {
    agent "bot"
    prompt "use {{ vars.token }}"
    vars {
        token "s3cr3t-value"
    }
}
"#,
        )
        .env("API_TOKEN", "s3cr3t-value");
    let outcome = test
        .with_args(&["run", "--no-progress", "--events", "-"])
        .run()
        .code(0);
    assert!(!outcome.stdout.contains("s3cr3t-value") && !outcome.stderr.contains("s3cr3t-value"));
    let run = latest_run(test.path());
    for file in [
        "phases/a/attempt-1/stdout.log",
        "phases/a/attempt-1/stderr.log",
        "phases/a/attempt-1/prompt.md",
        "events.jsonl",
    ] {
        let text = std::fs::read_to_string(run.join(file)).unwrap();
        assert!(
            !text.contains("s3cr3t-value"),
            "{file} leaks the secret:\n{text}"
        );
    }
    let stdout = std::fs::read_to_string(run.join("phases/a/attempt-1/stdout.log")).unwrap();
    assert!(stdout.contains("token=[REDACTED:API_TOKEN]"), "{stdout}");
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn secrets_set_in_any_env_are_redacted_everywhere_and_the_agent_still_gets_them() {
    // One secret from the pipeline's env with characters JSON escapes, one from the agent's env,
    // one from the phase's env, and one ("event") that is also a word of the journal's JSON.
    let test = Test::new()
        .pipeline(
            r##"pipeline "p" {
    secret "PW" "SA" "SP" "WORD"
    env "PW" #"pa"ss\wo/rd"#
    env "WORD" "event"
}
agent "bot" {
    command "sh" "-c" "echo pw=$PW sa=$SA sp=$SP; echo sp=$SP >&2; cat \"$1\" > got-prompt.txt" "sh" "{{ prompt_file }}"
    env "SA" "agent-secret-value"
}
phase "a" {
    agent "bot"
    prompt "use {{ vars.token }} and {{ vars.other }}"
    env "SP" "phase-secret-value"
    vars {
        token "phase-secret-value"
        other "agent-secret-value"
    }
    retries 0
    gates {
        command "echo sp=$SP sa=$SA; exit 1" name="check-phase-secret-value"
    }
}
"##,
        )
        .dir("tmp");
    let tmp = test.path().join("tmp");
    let test = test.env("TMPDIR", tmp.to_str().unwrap());
    let secrets = [
        r#"pa"ss\wo/rd"#,
        r#"pa\"ss\\wo/rd"#,
        "agent-secret-value",
        "phase-secret-value",
    ];
    let leaks = |what: &str, text: &str| {
        for secret in secrets {
            assert!(!text.contains(secret), "{what} leaks {secret}:\n{text}");
        }
    };

    let plan = test.with_args(&["run", "--dry-run"]).run().code(0);
    leaks("the plan", &plan.stdout);

    let outcome = test
        .with_args(&[
            "run",
            "--no-progress",
            "--events",
            "-",
            "--junit",
            "tmp/../junit.xml",
        ])
        .run()
        .code(1);
    leaks("stdout", &outcome.stdout);
    leaks("stderr", &outcome.stderr);
    leaks("junit.xml", &test.read("junit.xml"));
    let run = latest_run(test.path());
    for file in files_under(&run) {
        if let Ok(text) = std::fs::read_to_string(&file) {
            leaks(&file.display().to_string(), &text);
        }
    }
    // Redaction never breaks the JSON it is applied to.
    for line in outcome.stdout.lines() {
        serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    }
    let events = journal(test.path());
    assert!(events.iter().all(|e| e["event"].is_string()), "{events:?}");
    let pipeline: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("pipeline.json")).unwrap()).unwrap();
    assert_eq!(pipeline["env"]["PW"], "[REDACTED:PW]");
    serde_json::from_str::<Value>(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
    let stdout = std::fs::read_to_string(run.join("phases/a/attempt-1/stdout.log")).unwrap();
    assert!(
        stdout.contains("pw=[REDACTED:PW] sa=[REDACTED:SA] sp=[REDACTED:SP]"),
        "{stdout}"
    );
    // The agent read the prompt as rendered, from a private copy that is gone after the attempt.
    assert_eq!(
        test.read("got-prompt.txt"),
        "use phase-secret-value and agent-secret-value"
    );
    assert_eq!(
        std::fs::read_to_string(run.join("phases/a/attempt-1/prompt.md")).unwrap(),
        "use [REDACTED:SP] and [REDACTED:SA]"
    );
    assert_eq!(
        std::fs::read_dir(&tmp).unwrap().count(),
        0,
        "a private prompt copy was left"
    );
}

#[test]
fn a_secret_equal_to_a_phase_name_leaves_the_phase_whole_and_gate_log_names_redacted() {
    let test = Test::new().pipeline(
        r#"pipeline "p" {
    secret "DB"
    env "DB" "postgres"
}
phase "postgres" {
    run "true"
    retries 0
    gates {
        command "true" name="check-postgres"
    }
}
"#,
    );
    test.with_args(&["run", "--no-progress"]).run().code(0);
    let (status, attempts, _) = phase_status(&summary(test.path()), "postgres");
    assert_eq!((status.as_str(), attempts), ("passed", 1));
    let show = test
        .with_args(&["show", "latest", "postgres"])
        .run()
        .code(0);
    assert!(show.stdout.contains("passed"), "{}", show.stdout);
    let attempt = latest_run(test.path()).join("phases/postgres/attempt-1");
    let names: Vec<String> = std::fs::read_dir(&attempt)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("gate-1-") && n.ends_with(".stdout")),
        "{names:?}"
    );
    assert!(
        names.iter().all(|n| !n.contains("postgres")),
        "a gate log is named after the secret: {names:?}"
    );
}

#[test]
fn a_closed_standard_error_does_not_turn_a_passed_run_into_a_panic() {
    let test = Test::new().pipeline(
        r#"pipeline "p"
phase "a" {
    run "sleep 0.3"
    retries 0
}
"#,
    );
    // As `helixflow run 2>&1 | head -1` does: the reader goes away before the run ends.
    let mut child = Command::new(env!("CARGO_BIN_EXE_helixflow"))
        .args(["run", "--no-progress"])
        .current_dir(test.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
}

#[test]
fn junit_to_standard_output_is_refused_before_the_run() {
    let test = Test::new().pipeline("pipeline \"p\"\nphase \"a\" {\n    run \"touch ran\"\n}\n");
    let outcome = test
        .with_args(&["run", "--no-progress", "--junit", "-"])
        .run()
        .code(2);
    assert!(
        outcome.stderr.contains("--junit needs a file name"),
        "{}",
        outcome.stderr
    );
    assert!(!test.path().join("ran").exists() && !test.path().join("-").exists());
}

#[test]
fn events_and_junit_reports_are_written() {
    let test = Test::new().pipeline(
        r#"pipeline "p"
phase "a" {
    run "echo hello > a.txt"
    outputs {
        file "a.txt"
    }
}
phase "b" {
    run "true"
    retries 0
    outputs {
        file "missing.txt"
    }
    on-failure "continue"
}
"#,
    );
    let outcome = test
        .with_args(&[
            "run",
            "--no-progress",
            "--events",
            "events.ndjson",
            "--junit",
            "junit.xml",
        ])
        .run()
        .code(1);
    let events = std::fs::read_to_string(test.path().join("events.ndjson")).unwrap();
    for line in events.lines() {
        let event: Value = serde_json::from_str(line).unwrap();
        assert!(event["event"].is_string() && event["time"].is_string());
    }
    let junit = std::fs::read_to_string(test.path().join("junit.xml")).unwrap();
    assert!(
        junit.contains("<testsuite") && junit.contains("missing.txt"),
        "{junit}"
    );
    assert!(outcome.stderr.contains("missing.txt"), "{}", outcome.stderr);
}

fn process_exists(pid: i32) -> bool {
    // A zombie is gone for our purposes: read its state.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

fn wait_for(path: &Path, limit: Duration) {
    let start = Instant::now();
    while !path.exists() {
        assert!(start.elapsed() < limit, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

const STUBBORN_AGENT: &str = r#"import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"])
open("pids.tmp", "w").write(f"{os.getpid()} {child.pid}")
os.rename("pids.tmp", "pids")
print("working", flush=True)
time.sleep(300)
"#;

fn start_run(test: &Test, args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_helixflow"))
        .args(args)
        .current_dir(test.path())
        .env("NO_COLOR", "1")
        .env("HELIXFLOW_KILL_GRACE", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn pids(test: &Test) -> Vec<i32> {
    std::fs::read_to_string(test.path().join("pids"))
        .unwrap()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect()
}

fn stubborn_pipeline(timeouts: &str) -> String {
    format!(
        "pipeline \"p\"\nagent \"bot\" {{\n    command \"python3\" \"agent.py\"\n{timeouts}}}\nphase \"a\" {{\n    agent \"bot\"\n    prompt \"x\"\n    retries 0\n}}\n"
    )
}

#[test]
fn sigint_stops_every_child_and_leaves_a_parseable_journal() {
    let test = Test::new()
        .file("agent.py", STUBBORN_AGENT)
        .pipeline(&stubborn_pipeline(""));
    let mut child = start_run(&test, &["run", "--no-progress"]);
    wait_for(&test.path().join("pids"), Duration::from_secs(30));
    // SAFETY: sending SIGINT to our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    for pid in pids(&test) {
        assert!(!process_exists(pid), "process {pid} survived the interrupt");
    }
    assert!(!latest_run(test.path()).join("control.sock").exists());
    let events = journal(test.path());
    let last = events.last().unwrap();
    assert_eq!(
        (last["event"].as_str(), last["status"].as_str()),
        (Some("run-finished"), Some("cancelled"))
    );
    assert_eq!(summary(test.path())["status"], "cancelled");
}

#[test]
fn sigkill_mid_run_leaves_a_parseable_journal_and_no_agent_running() {
    let test = Test::new()
        .file("agent.py", STUBBORN_AGENT)
        .pipeline(&stubborn_pipeline(""));
    let mut child = start_run(&test, &["run", "--no-progress"]);
    wait_for(&test.path().join("pids"), Duration::from_secs(30));
    child.kill().unwrap();
    child.wait().unwrap();
    let events = journal(test.path());
    assert!(events.iter().any(|e| e["event"] == "attempt-started"));
    // What it leaves behind is in the run's folder, not in the shared temporary folder.
    assert!(latest_run(test.path()).join("control.sock").exists());
    let prefix = format!("helixflow-{}-", child.id());
    assert!(
        !std::fs::read_dir(std::env::temp_dir()).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with(&prefix)),
        "a control socket of the killed run is in the temporary folder"
    );
    assert_eq!(
        summary(test.path())["status"],
        "running",
        "run.json is whole, and says the run never finished"
    );
    // The watchdog stops the agent's group, which ignores TERM: KILL after the 1 s grace.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut survivors = pids(&test);
    while !survivors.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        survivors.retain(|&pid| process_exists(pid));
    }
    for &pid in &survivors {
        // SAFETY: killing processes this test started, so a failure leaves nothing behind.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    assert!(
        survivors.is_empty(),
        "processes {survivors:?} outlived the killed helixflow"
    );
}

#[test]
fn a_private_prompt_copy_is_removed_even_when_helixflow_is_killed() {
    let test = Test::new().dir("tmp").pipeline(
        r#"pipeline "p" {
    secret "TOKEN"
    env "TOKEN" "sekrit-value"
}
agent "bot" {
    command "sh" "-c" "cat \"$1\" > got.txt; touch started; exec sleep 300" "sh" "{{ prompt_file }}"
}
phase "a" {
    agent "bot"
    prompt "use {{ vars.token }}"
    vars {
        token "sekrit-value"
    }
}
"#,
    );
    let tmp = test.path().join("tmp");
    let mut child = Command::new(env!("CARGO_BIN_EXE_helixflow"))
        .args(["run", "--no-progress"])
        .current_dir(test.path())
        .env("TMPDIR", &tmp)
        .env("HELIXFLOW_KILL_GRACE", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&test.path().join("started"), Duration::from_secs(30));
    assert_eq!(test.read("got.txt"), "use sekrit-value");
    assert_eq!(
        std::fs::read_dir(&tmp).unwrap().count(),
        1,
        "the private copy"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    // The watchdog sees helixflow gone within a second, stops the agent, then removes the copy.
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_dir(&tmp).unwrap().count() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left in the temporary folder: {left:?}");
}

/// The children of process `pid` whose command line has `word`.
fn children_running(pid: u32, word: &str) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|child| child.parse::<i32>().ok())
                .collect::<Vec<_>>()
        })
        .filter(|child| {
            std::fs::read(format!("/proc/{child}/cmdline"))
                .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(word))
        })
        .collect()
}

#[test]
fn the_watchdog_lives_as_long_as_the_run() {
    let test = Test::new()
        .file("agent.sh", "touch started\nsleep 1\n")
        .pipeline(
            "pipeline \"p\"\nagent \"bot\" {\n    command \"sh\" \"agent.sh\"\n}\nphase \"a\" {\n    agent \"bot\"\n    prompt \"x\"\n}\n",
        );
    let mut child = start_run(&test, &["run", "--no-progress"]);
    wait_for(&test.path().join("started"), Duration::from_secs(30));
    let watchdogs = children_running(child.id(), "__watchdog");
    assert_eq!(watchdogs.len(), 1, "one watchdog while the run goes on");
    assert_eq!(child.wait().unwrap().code(), Some(0));
    // Ended and reaped by helixflow: not even a zombie is left.
    assert!(
        !Path::new(&format!("/proc/{}", watchdogs[0])).exists(),
        "the watchdog outlived a run that ended normally"
    );
}

#[test]
fn timeouts_kill_the_whole_group_of_an_agent_that_ignores_term() {
    // Long enough for the agent to start its children on a loaded machine before the limit hits.
    for timeouts in ["    timeout \"5s\"\n", "    idle-timeout \"5s\"\n"] {
        let test = Test::new()
            .file("agent.py", STUBBORN_AGENT)
            .pipeline(&stubborn_pipeline(timeouts));
        let mut child = start_run(&test, &["run", "--no-progress"]);
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(1), "{timeouts}");
        for pid in pids(&test) {
            assert!(
                !process_exists(pid),
                "process {pid} survived the timeout ({timeouts})"
            );
        }
        let run = latest_run(test.path());
        let feedback = std::fs::read_to_string(run.join("phases/a/attempt-1/feedback.md")).unwrap();
        assert!(
            feedback.to_lowercase().contains("timeout")
                || feedback.to_lowercase().contains("timed out"),
            "{feedback}"
        );
    }
}

#[test]
fn the_run_timeout_cancels_running_phases_and_fails_the_run() {
    let test = Test::new().file("agent.py", STUBBORN_AGENT).pipeline(
        "pipeline \"p\" {\n    timeout \"2s\"\n}\nagent \"bot\" {\n    command \"python3\" \"agent.py\"\n}\nphase \"a\" {\n    agent \"bot\"\n    prompt \"x\"\n}\n",
    );
    let mut child = start_run(&test, &["run", "--no-progress"]);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1));
    for pid in pids(&test) {
        assert!(
            !process_exists(pid),
            "process {pid} survived the run timeout"
        );
    }
    assert_eq!(summary(test.path())["status"], "timed-out");
}

#[test]
fn runs_and_show_list_past_runs_and_feedback() {
    let test = Test::new().pipeline("pipeline \"p\"\nphase \"a\" {\n    run \"true\"\n    retries 0\n    outputs {\n        file \"nope.txt\"\n    }\n}\n");
    test.with_args(&["run", "--no-progress"]).run().code(1);
    let listed = test.with_args(&["runs"]).run().code(0);
    assert!(listed.stdout.contains("failed"), "{}", listed.stdout);
    let shown = test.with_args(&["show"]).run().code(0);
    assert!(
        shown.stdout.contains('a') && shown.stdout.contains("outputs"),
        "{}",
        shown.stdout
    );
    let phase = test
        .with_args(&[
            "show",
            &latest_run(test.path())
                .file_name()
                .unwrap()
                .to_string_lossy(),
            "a",
        ])
        .run()
        .code(0);
    assert!(phase.stdout.contains("nope.txt"), "{}", phase.stdout);
}

/// `runs` and `show` take the pipeline file as every other command does, first, and `--file`
/// still works; a file not named `pipeline.kdl` is found by neither without it.
#[test]
fn runs_and_show_take_the_pipeline_file_as_their_first_argument() {
    let test = Test::new().file(
        "project/flow.kdl",
        "pipeline \"p\"\nphase \"a\" {\n    run \"true\"\n    retries 0\n    outputs {\n        file \"nope.txt\"\n    }\n}\n",
    );
    test.with_args(&["run", "--no-progress", "project/flow.kdl"])
        .run()
        .code(1);
    let run_id = latest_run(&test.path().join("project"))
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let listed = test.with_args(&["runs", "project/flow.kdl"]).run().code(0);
    assert!(
        listed.stdout.contains(&run_id) && listed.stdout.contains("failed"),
        "{}",
        listed.stdout
    );
    let by_option = test
        .with_args(&["runs", "--file", "project/flow.kdl"])
        .run()
        .code(0);
    assert_eq!(by_option.stdout, listed.stdout);
    let shown = test.with_args(&["show", "project/flow.kdl"]).run().code(0);
    assert!(
        shown.stdout.starts_with(&format!("run {run_id} of \"p\"")),
        "{}",
        shown.stdout
    );
    let phase = test
        .with_args(&["show", "project/flow.kdl", "latest", "a"])
        .run()
        .code(0);
    assert!(phase.stdout.contains("nope.txt"), "{}", phase.stdout);
    let by_option = test
        .with_args(&["show", "--file", "project/flow.kdl", &run_id, "a"])
        .run()
        .code(0);
    assert_eq!(by_option.stdout, phase.stdout);
    // Given twice, the file is refused rather than one of the two silently chosen.
    for args in [
        &["runs", "project/flow.kdl", "--file", "project/flow.kdl"][..],
        &["show", "project/flow.kdl", "--file", "project/flow.kdl"][..],
    ] {
        let twice = test.with_args(args).run().code(2);
        assert!(twice.stderr.contains("given twice"), "{}", twice.stderr);
    }
    // Without the file, the default lookup finds no pipeline here.
    test.with_args(&["runs"]).run().code(2);
    // A run is named by its id or `latest`, also where a file of that name exists.
    let inside = test
        .with_args(&["show", "latest", "a"])
        .current_dir("project");
    std::fs::write(test.path().join("project/latest"), "").unwrap();
    std::fs::copy(
        test.path().join("project/flow.kdl"),
        test.path().join("project/pipeline.kdl"),
    )
    .unwrap();
    let latest = inside.run().code(0);
    assert!(
        latest
            .stdout
            .contains(&format!("(./.helixflow/runs/{run_id}/phases/a/attempt-1)"))
            && latest.stdout.contains("missing `nope.txt`"),
        "{}",
        latest.stdout
    );
}

#[test]
fn every_attempt_records_its_changes_and_every_passing_phase_its_bundle() {
    let test = Test::new().pipeline(
        "pipeline \"p\"\n\
         phase \"plain\" {\n    run \"echo hi > plain.txt\"\n}\n\
         phase \"scoped\" {\n    depends-on \"plain\"\n    run \"echo hi > scoped.txt\"\n    scope \"scoped.txt\"\n}\n\
         phase \"stray\" {\n    depends-on \"scoped\"\n    run \"echo hi > stray.txt\"\n    scope \"elsewhere/**\"\n    retries 0\n}\n",
    );
    // By default a `run` step leaves no bundle (and a plain one is not snapshotted at all).
    let default =
        Test::new().pipeline(&std::fs::read_to_string(test.path().join("pipeline.kdl")).unwrap());
    default.with_args(&["run", "--no-progress"]).run().code(1);
    let run = latest_run(default.path());
    assert!(!run.join("phases/plain/bundle.hxb").exists());
    assert!(!run.join("phases/plain/attempt-1/changes.json").exists());
    assert!(!run.join("phases/scoped/bundle.hxb").exists());
    test.with_args(&["run", "--no-progress", "--bundles"])
        .run()
        .code(1);
    let run = latest_run(test.path());
    let changes = |phase: &str| run.join(format!("phases/{phase}/attempt-1/changes.json"));
    // With `--bundles`, a plain step too: its bundle is made of its changes.
    let plain: Value =
        serde_json::from_str(&std::fs::read_to_string(changes("plain")).unwrap()).unwrap();
    assert_eq!(
        plain["created"],
        serde_json::json!(["plain.txt"]),
        "{plain:#}"
    );
    assert!(run.join("phases/plain/bundle.hxb").is_file());
    assert!(run.join("phases/scoped/bundle.hxb").is_file());
    assert!(!run.join("phases/stray/bundle.hxb").exists());
    let scoped: Value =
        serde_json::from_str(&std::fs::read_to_string(changes("scoped")).unwrap()).unwrap();
    assert_eq!(
        scoped["created"],
        serde_json::json!(["scoped.txt"]),
        "{scoped:#}"
    );
    // The scope is still judged against the snapshot taken before the attempt.
    let summary = summary(test.path());
    assert_eq!(phase_status(&summary, "scoped").0, "passed");
    assert_eq!(phase_status(&summary, "stray").0, "failed");
}

#[test]
fn report_files_written_into_the_workspace_are_not_the_phases_changes() {
    // The reports are written while the step runs: outside the scope, they would fail it.
    let test = Test::new().pipeline(
        r#"pipeline "p"
phase "a" {
    run "mkdir -p src && sleep 0.5 && echo x > src/a.txt"
    scope "src/**"
    outputs {
        file "src/a.txt"
    }
    retries 0
}
"#,
    );
    test.with_args(&[
        "run",
        "--no-progress",
        "--events",
        "ev.jsonl",
        "--junit",
        "reports/junit.xml",
    ])
    .run()
    .code(0);
    assert!(test.path().join("ev.jsonl").is_file());
    assert!(test.path().join("reports/junit.xml").is_file());

    // Nor do they count as work done; paths are taken from the current folder, not the workspace.
    let test = Test::new()
        .pipeline(
            "pipeline \"p\"\nphase \"a\" {\n    run \"sleep 0.3\"\n    gates {\n        changes min=1\n    }\n    retries 0\n}\n",
        )
        .dir("sub")
        .current_dir("sub");
    test.with_args(&[
        "run",
        "../pipeline.kdl",
        "--no-progress",
        "--events",
        "../ev.jsonl",
        "--junit",
        "junit.xml",
    ])
    .run()
    .code(1);
    let changes: Value = serde_json::from_str(
        &std::fs::read_to_string(latest_run(test.path()).join("phases/a/attempt-1/changes.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        (&changes["created"], &changes["modified"]),
        (&serde_json::json!([]), &serde_json::json!([])),
        "{changes:#}"
    );
}

#[test]
fn dry_run_shows_the_effective_limit_and_the_prompt_the_run_gives() {
    let test = Test::new().pipeline(
        r#"pipeline "p" {
    max-parallel 3
}
agent "bot" {
    command "sh" "-c" "true" "{{ prompt }}"
}
phase "a" {
    agent "bot"
    prompt "Write x.txt"
    verify "self"
    outputs {
        file "x.txt"
    }
    retries 0
}
"#,
    );
    let plan = test
        .with_args(&["run", "--dry-run", "--jobs", "1"])
        .run()
        .code(0);
    assert!(
        plan.stdout
            .starts_with("pipeline \"p\": 1 phase, at most 1 at once, workspace "),
        "{}",
        plan.stdout
    );
    let shown: Vec<&str> = plan
        .stdout
        .lines()
        .filter_map(|line| line.strip_prefix("    | "))
        .collect();
    test.with_args(&["run", "--no-progress"]).run().code(1);
    let given =
        std::fs::read_to_string(latest_run(test.path()).join("phases/a/attempt-1/prompt.md"))
            .unwrap();
    assert!(given.contains("helixflow verify"), "{given}");
    assert_eq!(shown, given.lines().collect::<Vec<_>>(), "{}", plan.stdout);
}

#[test]
fn a_junit_report_that_cannot_be_written_is_refused_before_the_run() {
    let pipeline = "pipeline \"p\"\nphase \"a\" {\n    run \"touch ran\"\n}\n";
    for target in [".", "reports", "/proc/junit.xml"] {
        let test = Test::new().pipeline(pipeline).dir("reports");
        let outcome = test
            .with_args(&["run", "--no-progress", "--junit", target])
            .run()
            .code(2);
        assert!(
            outcome
                .stderr
                .contains(&format!("--junit: cannot write {target}:")),
            "{}",
            outcome.stderr
        );
        assert!(!test.path().join("ran").exists(), "{target}");
        assert!(!test.path().join(".helixflow").exists(), "{target}");
    }
}

#[test]
fn a_junit_report_that_cannot_be_written_at_the_end_fails_the_run() {
    // The step takes the report's folder away: the report is written only when the run ends.
    let test = Test::new()
        .pipeline("pipeline \"p\"\nphase \"a\" {\n    run \"rm -r reports && touch reports\"\n}\n");
    let outcome = test
        .with_args(&["run", "--no-progress", "--junit", "reports/junit.xml"])
        .run()
        .code(3);
    assert!(
        outcome
            .stderr
            .contains("JUnit report reports/junit.xml failed"),
        "{}",
        outcome.stderr
    );
    let summary = summary(test.path());
    assert_eq!(summary["status"], "passed");
    assert_eq!(summary["exit-code"], 3);
}

#[test]
fn attempts_that_fail_before_any_gate_say_why_everywhere() {
    let test = Test::new().pipeline(
        r#"pipeline "p"
agent "ghost" {
    command "no-such-agent-on-path" "{{ prompt }}"
}
agent "text" {
    command "sh" "-c" "echo plain words"
    response "json"
}
agent "unfinished" {
    command "sh" "-c" "echo '{\"type\":\"assistant\"}'"
    response "claude-stream-json"
}
agent "erring" {
    command "sh" "-c" "echo '{\"type\":\"result\",\"is_error\":true,\"result\":\"quota exceeded\"}'"
    response "claude-stream-json"
}
agent "idle" {
    command "sh" "-c" "echo done"
    evidence "tool_use"
}
defaults {
    retries 0
    on-failure "continue"
    prompt "work"
}
phase "missing" {
    agent "ghost"
}
phase "unrendered" {
    agent "text"
    // Lint can tell that `word` is declared, not that a string has no attribute `field`.
    prompt "{{ vars.word.field }}"
    vars {
        word "text"
    }
}
phase "notjson" {
    agent "text"
}
phase "noresult" {
    agent "unfinished"
}
phase "iserror" {
    agent "erring"
}
phase "noevidence" {
    agent "idle"
}
"#,
    );
    let outcome = test
        .with_args(&["run", "--no-progress", "--junit", "junit.xml"])
        .run()
        .code(1);
    let expected = [
        ("missing", "program not found on PATH"),
        ("unrendered", "the prompt does not render"),
        ("notjson", "is not one JSON document"),
        ("noresult", "has no `result` event"),
        ("iserror", "reported an error: quota exceeded"),
        ("noevidence", "evidence `tool_use`"),
    ];
    let events = journal(test.path());
    let summary = summary(test.path());
    let junit = test.read("junit.xml");
    let run = latest_run(test.path());
    for (phase, why) in expected {
        let finished = events
            .iter()
            .find(|e| e["event"] == "attempt-finished" && e["phase"] == phase)
            .unwrap_or_else(|| panic!("{phase}: no attempt-finished in the journal"));
        assert!(
            finished["error"].as_str().unwrap_or("").contains(why),
            "{phase}: {finished}"
        );
        let line = format!("[{phase}] attempt 1/1 failed in ");
        assert!(
            outcome
                .stderr
                .lines()
                .any(|l| l.starts_with(&line) && l.contains(why)),
            "{phase}: {}",
            outcome.stderr
        );
        assert!(
            outcome
                .stderr
                .lines()
                .any(|l| l.starts_with(&format!("{phase} "))
                    && l.contains("agent (")
                    && l.contains(why)),
            "{phase}: {}",
            outcome.stderr
        );
        let recorded = summary["phases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == phase)
            .unwrap();
        assert_eq!(
            recorded["failed-gates"],
            serde_json::json!(["agent"]),
            "{phase}"
        );
        assert!(
            recorded["error"].as_str().unwrap_or("").contains(why),
            "{phase}: {recorded}"
        );
        let case = format!("<testcase name=\"agent\" classname=\"{phase}\"");
        let at = junit
            .find(&case)
            .unwrap_or_else(|| panic!("{phase}: no agent case in\n{junit}"));
        let end = at + junit[at..].find("</testcase>").unwrap();
        assert!(
            junit[at..end].contains("<failure") && junit[at..end].contains(why),
            "{phase}: {}",
            &junit[at..end]
        );
        let attempt = run.join(format!("phases/{phase}/attempt-1"));
        assert!(attempt.join("gates.json").is_file(), "{phase}");
        let shown = test
            .with_args(&["show", &run.file_name().unwrap().to_string_lossy(), phase])
            .run()
            .code(0);
        assert!(shown.stdout.contains(why), "{phase}: {}", shown.stdout);
    }
}

#[test]
fn run_json_and_show_are_current_while_a_phase_runs() {
    let test = Test::new().pipeline(
        "pipeline \"p\"\nphase \"first\" {\n    run \"true\"\n}\nphase \"slow\" {\n    depends-on \"first\"\n    run \"touch started && sleep 4\"\n}\n",
    );
    let mut child = start_run(&test, &["run", "--no-progress"]);
    wait_for(&test.path().join("started"), Duration::from_secs(30));
    // No event comes while `slow` sleeps; the summary must catch up within about a second.
    std::thread::sleep(Duration::from_millis(1600));
    let during = summary(test.path());
    let run_id = latest_run(test.path())
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let shown = test.with_args(&["show", &run_id, "slow"]).run().code(0);
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert_eq!(during["status"], "running", "{during:#}");
    assert_eq!(phase_status(&during, "first").0, "passed", "{during:#}");
    assert_eq!(phase_status(&during, "slow").0, "running", "{during:#}");
    assert!(
        shown
            .stdout
            .contains("running: this attempt has not finished yet"),
        "{}",
        shown.stdout
    );
    assert!(!shown.stdout.contains("no feedback"), "{}", shown.stdout);
}

/// The run id of the latest run of `workspace`.
fn latest_run_id(workspace: &Path) -> String {
    latest_run(workspace)
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

#[test]
fn a_killed_run_is_crashed_in_runs_and_in_show() {
    let test = Test::new()
        .pipeline("pipeline \"p\"\nphase \"a\" {\n    run \"touch started && sleep 30\"\n}\n");
    let mut child = start_run(&test, &["run", "--no-progress"]);
    wait_for(&test.path().join("started"), Duration::from_secs(30));
    // Give run.json the second it may take to list the phase as running.
    std::thread::sleep(Duration::from_millis(1200));
    child.kill().unwrap();
    child.wait().unwrap();
    let listed = test.with_args(&["runs"]).run().code(0);
    assert!(listed.stdout.contains(" crashed "), "{}", listed.stdout);
    let shown = test.with_args(&["show"]).run().code(0);
    assert!(shown.stdout.contains("status: crashed"), "{}", shown.stdout);
    // When the phase and the run stopped is not known: the latest event was the attempt's start.
    assert!(
        shown
            .stdout
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["a", "unfinished", "1/3", "?", "-", "-"]),
        "{}",
        shown.stdout
    );
    assert!(
        shown
            .stdout
            .contains("0 passed, 0 failed, 0 skipped, 1 unfinished; the run did not finish, its length is unknown\n"),
        "{}",
        shown.stdout
    );
    let phase = test.with_args(&["show", "latest", "a"]).run().code(0);
    assert!(
        phase
            .stdout
            .contains("unfinished: the run ended before this attempt did"),
        "{}",
        phase.stdout
    );
}

#[test]
fn show_gives_a_cancelled_phase_the_reason_the_final_table_gives() {
    let test = Test::new().pipeline(
        "pipeline \"p\"\nagent \"bot\" {\n    command \"sh\" \"-c\" \"touch started && sleep 30\"\n}\nphase \"a\" {\n    agent \"bot\"\n    prompt \"x\"\n}\n",
    );
    let child = start_run(&test, &["run", "--no-progress"]);
    wait_for(&test.path().join("started"), Duration::from_secs(30));
    // SAFETY: sending SIGINT to our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let table_row = stderr
        .lines()
        .find(|l| l.starts_with("a ") && l.contains("cancelled"))
        .unwrap_or_else(|| panic!("no row for a:\n{stderr}"));
    assert!(table_row.ends_with("(the run was interrupted)"), "{stderr}");
    let shown = test.with_args(&["show"]).run().code(0);
    let row = shown
        .stdout
        .lines()
        .find(|l| l.starts_with("a "))
        .unwrap_or_else(|| panic!("{}", shown.stdout));
    assert!(
        row.contains("cancelled") && row.ends_with("(the run was interrupted)"),
        "{row}"
    );
    assert_eq!(
        summary(test.path())["phases"][0]["failed-gates"],
        serde_json::json!([])
    );
    let phase = test.with_args(&["show", "latest", "a"]).run().code(0);
    assert!(
        phase.stdout.contains("cancelled: the run was interrupted"),
        "{}",
        phase.stdout
    );
}

#[test]
fn show_explains_skipped_and_unknown_phases_and_takes_latest() {
    let test = Test::new().pipeline(
        "pipeline \"p\"\nphase \"a\" {\n    run \"exit 3\"\n    retries 0\n}\nphase \"dep\" {\n    depends-on \"a\"\n    run \"true\"\n}\n",
    );
    test.with_args(&["run", "--no-progress"]).run().code(1);
    let run_id = latest_run_id(test.path());
    let skipped = test.with_args(&["show", &run_id, "dep"]).run().code(0);
    assert_eq!(
        skipped.stdout,
        format!("phase \"dep\" was skipped: dependency \"a\" failed (run {run_id})\n")
    );
    let unknown = test.with_args(&["show", &run_id, "nope"]).run().code(2);
    assert_eq!(
        unknown.stderr,
        format!("error: no phase named \"nope\" in run {run_id}; its phases: a, dep\n")
    );
    let latest = test.with_args(&["show", "latest"]).run().code(0);
    assert!(
        latest.stdout.starts_with(&format!("run {run_id} of \"p\"")),
        "{}",
        latest.stdout
    );
    let mistaken = test.with_args(&["show", "a"]).run().code(2);
    assert!(
        mistaken.stderr.contains("`helixflow show latest a`"),
        "{}",
        mistaken.stderr
    );
}

#[test]
fn runs_and_show_keep_working_while_the_pipeline_has_errors() {
    let valid =
        "pipeline \"p\" {\n    state-dir \"state\"\n}\nphase \"a\" {\n    run \"true\"\n}\n";
    let test = Test::new().pipeline(valid);
    test.with_args(&["run", "--no-progress"]).run().code(0);
    let run_id = common::run_folders(&test.path().join("state/runs"))
        .first()
        .expect("a run in the state-dir")
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    // A lint error, then a syntax error (a brace never closed), as while editing the file.
    for broken in [
        valid.replace("run \"true\"", "run \"true\"\n    retries \"two\""),
        valid.replace("run \"true\"\n}", "run \"true\""),
    ] {
        std::fs::write(test.path().join("pipeline.kdl"), &broken).unwrap();
        let listed = test.with_args(&["runs"]).run().code(0);
        assert!(
            listed.stdout.contains(&run_id),
            "{broken}\n{}",
            listed.stdout
        );
        assert!(
            listed
                .stderr
                .starts_with("warning: pipeline.kdl has errors"),
            "{}",
            listed.stderr
        );
        let shown = test.with_args(&["show", &run_id, "a"]).run().code(0);
        assert!(shown.stdout.contains("passed"), "{}", shown.stdout);
    }
}

#[test]
fn only_takes_one_phase_per_option_and_leaves_the_file_argument_alone() {
    let test = Test::new().pipeline(
        "pipeline \"p\"\nphase \"a\" {\n    run \"touch a-ran\"\n}\nphase \"b\" {\n    run \"touch b-ran\"\n}\nphase \"c\" {\n    run \"touch c-ran\"\n}\n",
    );
    test.with_args(&["run", "--only", "a", "pipeline.kdl", "--no-progress"])
        .run()
        .code(0);
    assert!(test.path().join("a-ran").exists() && !test.path().join("b-ran").exists());
    test.with_args(&["run", "--only", "b", "--only", "c", "--no-progress"])
        .run()
        .code(0);
    assert!(test.path().join("b-ran").exists() && test.path().join("c-ran").exists());
    let mistaken = test
        .with_args(&["run", "--only", "a", "b", "--no-progress"])
        .run()
        .code(2);
    assert_eq!(
        mistaken.stderr,
        "error: no pipeline file b; --only takes one phase, so for more phases repeat it: --only a --only b\n"
    );
}

#[test]
fn a_state_dir_that_is_a_file_is_named_in_the_error() {
    let test = Test::new()
        .pipeline("pipeline \"p\"\nphase \"a\" {\n    run \"true\"\n}\n")
        .file(".helixflow", "");
    let outcome = test.with_args(&["run", "--no-progress"]).run().code(3);
    assert!(
        outcome
            .stderr_redacted()
            .contains("error: cannot lock the state folder [TMP]/.helixflow: it is not a folder\n"),
        "{}",
        outcome.stderr
    );
}

#[test]
fn the_state_folder_keeps_itself_out_of_git() {
    let test = Test::new()
        .file(".gitignore", "out.txt\n")
        .pipeline("pipeline \"p\"\nphase \"a\" {\n    run \"touch out.txt\"\n}\n");
    let git = |args: &[&str]| {
        let output = Command::new("git")
            .args(args)
            .current_dir(test.path())
            .output()
            .expect("git runs");
        assert!(output.status.success(), "git {args:?}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    git(&["init", "--quiet"]);
    git(&["add", "-A"]);
    git(&[
        "-c",
        "user.name=helixflow",
        "-c",
        "user.email=helixflow@example.com",
        "commit",
        "--quiet",
        "-m",
        "start",
    ]);
    test.with_args(&["run", "--no-progress"]).run().code(0);
    assert!(test.path().join(".helixflow/passed").is_dir());
    assert_eq!(
        git(&["status", "--porcelain", "--untracked-files=all"]),
        "",
        "a run left the working tree dirty"
    );
    assert_eq!(
        test.read(".helixflow/.gitignore").lines().last(),
        Some("/*")
    );
}
