//! `helixflow hook`: Stop hook payloads recorded from the real Claude Code and Codex, replayed
//! against the binary; malformed ones; the cap on refusals; `hook use`; `hook install` and
//! `uninstall` on settings files that hold other things.

use std::time::{Duration, Instant};

use crate::common::Test;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/hooks");

/// A recorded payload with its `cwd` moved to the test's folder.
fn payload(test: &Test, name: &str) -> String {
    let text = std::fs::read_to_string(format!("{FIXTURES}/{name}")).unwrap();
    let folder = test.path().canonicalize().unwrap();
    text.replace("/home/me/project", &folder.display().to_string())
}

const ONE_PHASE: &str = r#"pipeline "p"
phase "code" {
    run "true"
    outputs { file "hello.py" }
    gates { syntax }
}
"#;

const BROKEN: &str = "def broken(:\n    pass\n";

fn stop(test: &Test, cli: &str, name: &str, extra: &[&str]) -> crate::common::Outcome {
    let mut args = vec!["hook", cli];
    args.extend_from_slice(extra);
    test.with_args(&args).stdin(&payload(test, name)).run()
}

/// The reason of a refusal on standard output.
fn refusal(outcome: &crate::common::Outcome) -> String {
    let answer = outcome.json();
    assert_eq!(answer["decision"], "block", "{}", outcome.stdout);
    answer["reason"].as_str().expect("a reason").to_owned()
}

#[test]
fn a_stop_with_a_syntax_error_is_refused_with_the_place_then_allowed_once_fixed() {
    let test = Test::new().pipeline(ONE_PHASE).file("hello.py", BROKEN);
    let refused = stop(&test, "claude-stop", "claude-stop.json", &[]).code(0);
    let reason = refusal(&refused);
    assert!(reason.contains("hello.py:1:12: missing `)`"), "{reason}");
    assert!(reason.contains("def broken(:\n             ^"), "{reason}");
    assert!(
        reason.contains("stop 1 of at most 5 refused in a row"),
        "{reason}"
    );
    assert!(refused.stderr.is_empty(), "{}", refused.stderr);

    std::fs::write(test.path().join("hello.py"), "print('hello')\n").unwrap();
    let allowed = stop(&test, "claude-stop", "claude-stop-active.json", &[]).code(0);
    assert_eq!(allowed.stdout, "", "a stop whose gates pass gets no answer");
    assert_eq!(allowed.stderr, "");

    let runs = test.with_args(&["runs"]).run().code(0);
    assert!(
        runs.stdout
            .contains("agent sessions judged by `helixflow hook`"),
        "{}",
        runs.stdout
    );
    let line = runs
        .stdout
        .lines()
        .find(|l| l.starts_with("dcc7ca72-cce3-4fca-9d8b-a63cdd99a197"))
        .unwrap_or_else(|| panic!("no session line:\n{}", runs.stdout));
    assert!(
        line.contains("claude") && line.contains("code") && line.contains("passed"),
        "{line}"
    );
    let show = test.with_args(&["show", "dcc7ca72"]).run().code(0);
    assert!(show.stdout.contains("── stop 1 ("), "{}", show.stdout);
    assert!(
        show.stdout.contains("refused (1 in a row)"),
        "{}",
        show.stdout
    );
    assert!(
        show.stdout.contains("   | - hello.py:1:12: missing `)`"),
        "{}",
        show.stdout
    );
    assert!(show.stdout.contains("── stop 2 ("), "{}", show.stdout);
    assert!(show.stdout.contains("): passed in "), "{}", show.stdout);
}

#[test]
fn after_the_cap_a_failing_stop_is_allowed_and_said_so_and_a_new_row_starts() {
    let test = Test::new().pipeline(ONE_PHASE).file("hello.py", BROKEN);
    let cap = ["--max-blocks", "2"];
    let first = stop(&test, "claude-stop", "claude-stop.json", &cap).code(0);
    assert!(refusal(&first).contains("stop 1 of at most 2"));
    let second = stop(&test, "claude-stop", "claude-stop-active.json", &cap).code(0);
    let reason = refusal(&second);
    assert!(reason.contains("stop 2 of at most 2"), "{reason}");
    assert!(
        reason.contains("This is the last time helixflow refuses your stop"),
        "{reason}"
    );
    let third = stop(&test, "claude-stop", "claude-stop-active.json", &cap).code(0);
    assert!(
        third
            .stderr
            .contains("phase \"code\" still fails (gate `syntax`) after 2 stops refused in a row; this stop is allowed (--max-blocks 2)"),
        "{}",
        third.stderr
    );
    assert_eq!(
        third.json()["systemMessage"]
            .as_str()
            .map(|m| m.starts_with("helixflow: phase")),
        Some(true)
    );
    assert!(third.json().get("decision").is_none());
    // The stop was allowed: the next one starts a new row, whatever the CLI says.
    let fourth = stop(&test, "claude-stop", "claude-stop-active.json", &cap).code(0);
    assert!(refusal(&fourth).contains("stop 1 of at most 2"));
    // A stop the CLI says follows no refusal (`stop_hook_active: false`) starts one too.
    let fifth = stop(&test, "claude-stop", "claude-stop.json", &cap).code(0);
    assert!(refusal(&fifth).contains("stop 1 of at most 2"));
    let show = test
        .with_args(&["show", "dcc7ca72-cce3-4fca-9d8b-a63cdd99a197"])
        .run()
        .code(0);
    assert!(
        show.stdout.contains("): allowed at the cap in "),
        "{}",
        show.stdout
    );
}

#[test]
fn max_blocks_zero_judges_and_keeps_the_journal_but_never_refuses() {
    let test = Test::new().pipeline(ONE_PHASE).file("hello.py", BROKEN);
    let outcome = stop(
        &test,
        "codex-stop",
        "codex-stop.json",
        &["--max-blocks", "0"],
    )
    .code(0);
    assert!(
        outcome.json().get("decision").is_none(),
        "{}",
        outcome.stdout
    );
    let runs = test.with_args(&["runs"]).run().code(0);
    assert!(
        runs.stdout
            .contains("01a21c61-0687-73c3-9d5f-e7d4ea940a44 codex"),
        "{}",
        runs.stdout
    );
}

#[test]
fn codex_payloads_are_judged_as_claude_codes_are() {
    let test = Test::new().pipeline(ONE_PHASE).file("hello.py", BROKEN);
    let refused = stop(&test, "codex-stop", "codex-stop.json", &[]).code(0);
    assert!(refusal(&refused).contains("hello.py:1:12"));
    std::fs::write(test.path().join("hello.py"), "print('hello')\n").unwrap();
    let allowed = stop(&test, "codex-stop", "codex-stop-active.json", &[]).code(0);
    assert_eq!(allowed.stdout, "");
    let journal = test.read(
        ".helixflow/hooks/sessions/codex-01a21c61-0687-73c3-9d5f-e7d4ea940a44/judgements.jsonl",
    );
    let verdicts: Vec<String> = journal
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["verdict"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(verdicts, ["refused", "passed"]);
}

#[test]
fn what_the_hook_cannot_judge_allows_the_stop_with_exit_1_never_2() {
    let test = Test::new().pipeline(ONE_PHASE).file("hello.py", BROKEN);
    for (input, said) in [
        ("", "not JSON"),
        ("not json", "not JSON"),
        ("[]", "not a JSON object"),
        (r#"{"cwd": "/"}"#, "no `session_id`"),
    ] {
        let outcome = test
            .with_args(&["hook", "claude-stop"])
            .stdin(input)
            .run()
            .code(1);
        assert_eq!(outcome.stdout, "", "{input}");
        assert!(outcome.stderr.contains(said), "{input}: {}", outcome.stderr);
        assert!(
            outcome.stderr.contains("the stop is allowed"),
            "{}",
            outcome.stderr
        );
    }
    // A typo in the hook's own arguments: exit 2 would refuse every stop with the usage text.
    let typo = test
        .with_args(&["hook", "claude-stop", "--max-block", "3"])
        .stdin(&payload(&test, "claude-stop.json"))
        .run()
        .code(1);
    assert!(
        typo.stderr.contains("the stop is allowed"),
        "{}",
        typo.stderr
    );
    // A broken pipeline file, and one whose phase cannot be told.
    let broken = Test::new().pipeline("pipeline \"p\"\nphase \"code\" {\n    bogus 1\n}\n");
    let outcome = stop(&broken, "claude-stop", "claude-stop.json", &[]).code(1);
    assert!(
        outcome.stderr.contains("has errors (`helixflow lint"),
        "{}",
        outcome.stderr
    );
    let two = Test::new().pipeline(&format!(
        "{ONE_PHASE}phase \"docs\" {{\n    run \"true\"\n}}\n"
    ));
    let outcome = stop(&two, "codex-stop", "codex-stop.json", &[]).code(1);
    assert!(
        outcome
            .stderr
            .contains("no phase chosen: run `helixflow hook use PHASE`"),
        "{}",
        outcome.stderr
    );
    let outcome = stop(&two, "codex-stop", "codex-stop.json", &["--phase", "nope"]).code(1);
    assert!(
        outcome.stderr.contains("no phase \"nope\""),
        "{}",
        outcome.stderr
    );
    // No pipeline anywhere above the session's folder.
    let none = Test::new();
    let outcome = stop(&none, "claude-stop", "claude-stop.json", &[]).code(1);
    assert!(
        outcome.stderr.contains("no helixflow.kdl or pipeline.kdl"),
        "{}",
        outcome.stderr
    );
}

#[test]
fn a_judgement_past_the_timeout_kills_the_gate_and_allows_the_stop() {
    let test = Test::new().pipeline(
        r#"pipeline "p"
phase "slow" {
    run "true"
    gates { command "sleep 30" name="tests" }
}
"#,
    );
    let started = Instant::now();
    let outcome = stop(
        &test,
        "claude-stop",
        "claude-stop.json",
        &["--timeout", "1s"],
    )
    .code(1);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the gate was waited for"
    );
    assert!(
        outcome
            .stderr
            .contains("took longer than the hook's --timeout"),
        "{}",
        outcome.stderr
    );
    let journal = test.read(
        ".helixflow/hooks/sessions/claude-dcc7ca72-cce3-4fca-9d8b-a63cdd99a197/judgements.jsonl",
    );
    assert!(
        journal.contains(r#""verdict":"allowed-on-error""#),
        "{journal}"
    );
}

const TWO_PHASES: &str = r#"pipeline "p"
agent "writer" {
    command "true"
}
phase "code" {
    run "true"
    outputs { file "hello.py" }
    scope "hello.py"
    gates { syntax }
}
phase "docs" {
    agent "writer"
    outputs { file "README.md" }
    gates { matches "response" "(?i)documented" }
}
"#;

#[test]
fn hook_use_chooses_the_phase_and_scope_is_judged_from_where_it_started() {
    let test = Test::new()
        .pipeline(TWO_PHASES)
        .file("before.txt", "there before\n");
    let chose = test.with_args(&["hook", "use", "code"]).run().code(0);
    assert!(
        chose.stdout.starts_with("phase \"code\" chosen"),
        "{}",
        chose.stdout
    );
    test.with_args(&["hook", "use"]).run().code(0);
    std::fs::write(test.path().join("hello.py"), "print('hello')\n").unwrap();
    std::fs::write(test.path().join("stray.txt"), "x\n").unwrap();
    // The CLIs' own settings, written during the session, are not the phase's work.
    test.with_args(&["hook", "install", "claude"]).run().code(0);
    let refused = stop(&test, "claude-stop", "claude-stop.json", &[]).code(0);
    let reason = refusal(&refused);
    assert!(
        reason.contains("`stray.txt` was created, but the phase's scope is `hello.py`"),
        "{reason}"
    );
    assert!(!reason.contains("before.txt"), "{reason}");
    assert!(!reason.contains(".claude"), "{reason}");
    // Given with `--phase` and never chosen, `scope` cannot be judged: it is not run, and the
    // stop is not refused for it.
    let fresh = Test::new()
        .pipeline(TWO_PHASES)
        .file("hello.py", "print('hello')\n")
        .file("stray.txt", "x\n");
    let allowed = stop(
        &fresh,
        "claude-stop",
        "claude-stop.json",
        &["--phase", "code"],
    )
    .code(0);
    assert_eq!(allowed.stdout, "");
    let journal = fresh.read(
        ".helixflow/hooks/sessions/claude-dcc7ca72-cce3-4fca-9d8b-a63cdd99a197/judgements.jsonl",
    );
    assert!(
        journal.contains("`helixflow hook use PHASE` records it"),
        "{journal}"
    );
}

#[test]
fn gates_on_the_response_read_the_agents_last_message() {
    let test = Test::new()
        .pipeline(TWO_PHASES)
        .file("README.md", "# docs\n");
    let refused = stop(
        &test,
        "claude-stop",
        "claude-stop.json",
        &["--phase", "docs"],
    )
    .code(0);
    assert!(refusal(&refused).contains("(?i)documented"));
    let said = payload(&test, "claude-stop.json").replace("\"done 1\"", "\"I documented it.\"");
    let allowed = test
        .with_args(&["hook", "claude-stop", "--phase", "docs"])
        .stdin(&said)
        .run()
        .code(0);
    assert_eq!(allowed.stdout, "");
    // Without a last message the gate is not run, and a stop is not refused for it.
    let silent =
        payload(&test, "claude-stop.json").replace(",\"last_assistant_message\":\"done 1\"", "");
    let allowed = test
        .with_args(&["hook", "claude-stop", "--phase", "docs"])
        .stdin(&silent)
        .run()
        .code(0);
    assert_eq!(allowed.stdout, "");
}

#[test]
fn a_long_feedback_is_cut_to_what_the_hook_channel_carries_and_kept_whole_in_the_journal() {
    let mut files = String::new();
    for i in 0..400 {
        files.push_str(&format!(
            "        file \"missing/output-number-{i:04}.txt\"\n"
        ));
    }
    let test = Test::new().pipeline(&format!(
        "pipeline \"p\"\nphase \"many\" {{\n    run \"true\"\n    outputs {{\n{files}    }}\n}}\n"
    ));
    let reason = refusal(&stop(&test, "claude-stop", "claude-stop.json", &[]).code(0));
    assert!(reason.len() <= 8 * 1024, "{} bytes", reason.len());
    assert!(reason.contains("judgement-1.md"), "{reason}");
    let whole = test.read(
        ".helixflow/hooks/sessions/claude-dcc7ca72-cce3-4fca-9d8b-a63cdd99a197/judgement-1.md",
    );
    assert!(
        whole.contains("output-number-0399"),
        "the journal keeps all of it"
    );
    assert!(whole.len() > reason.len());
}

const SETTINGS: &str = r#"{"permissions": {"allow": ["Bash(ls:*)"]}, "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo mine"}]}], "PreToolUse": []}, "model": "x"}"#;

#[test]
fn install_merges_keeps_everything_else_in_order_is_idempotent_and_uninstall_takes_only_its_own() {
    let test = Test::new()
        .pipeline(TWO_PHASES)
        .file(".claude/settings.json", SETTINGS);
    let dry = test
        .with_args(&["hook", "install", "claude", "--dry-run"])
        .run()
        .code(0);
    assert!(
        dry.stdout.contains("+            \"command\": \""),
        "{}",
        dry.stdout
    );
    assert_eq!(
        test.read(".claude/settings.json"),
        SETTINGS,
        "--dry-run changes nothing"
    );

    test.with_args(&["hook", "install", "claude", "--phase", "code"])
        .run()
        .code(0);
    let installed = test.read(".claude/settings.json");
    let order: Vec<usize> = [
        "\"permissions\"",
        "\"hooks\"",
        "\"Stop\"",
        "echo mine",
        "hook claude-stop --phase code",
        "\"PreToolUse\"",
        "\"model\"",
    ]
    .iter()
    .map(|needle| {
        installed
            .find(needle)
            .unwrap_or_else(|| panic!("{needle} in {installed}"))
    })
    .collect();
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "keys out of order:\n{installed}"
    );
    let value: serde_json::Value = serde_json::from_str(&installed).unwrap();
    assert_eq!(value["hooks"]["Stop"][1]["hooks"][0]["timeout"], 600);

    let again = test
        .with_args(&["hook", "install", "claude", "--phase", "code"])
        .run()
        .code(0);
    assert!(
        again.stdout.contains("already has the hook"),
        "{}",
        again.stdout
    );
    assert_eq!(
        test.read(".claude/settings.json"),
        installed,
        "installing again changes nothing"
    );

    test.with_args(&["hook", "install", "claude"]).run().code(0);
    let replaced = test.read(".claude/settings.json");
    assert_eq!(
        replaced.matches("hook claude-stop").count(),
        1,
        "{replaced}"
    );
    assert!(!replaced.contains("--phase"), "{replaced}");

    let removed = test
        .with_args(&["hook", "uninstall", "claude"])
        .run()
        .code(0);
    assert!(removed.stdout.contains("(1 entry)"), "{}", removed.stdout);
    let after: serde_json::Value =
        serde_json::from_str(&test.read(".claude/settings.json")).unwrap();
    let before: serde_json::Value = serde_json::from_str(SETTINGS).unwrap();
    assert_eq!(after, before, "uninstall leaves what was there");
    let nothing = test
        .with_args(&["hook", "uninstall", "claude"])
        .run()
        .code(0);
    assert!(
        nothing.stdout.contains("nothing to remove"),
        "{}",
        nothing.stdout
    );
}

#[test]
fn install_for_codex_writes_its_hooks_file_and_refuses_settings_it_cannot_read() {
    let test = Test::new().pipeline(ONE_PHASE);
    let out = test.with_args(&["hook", "install", "codex"]).run().code(0);
    assert!(out.stdout.contains("trusted"), "{}", out.stdout);
    let hooks: serde_json::Value = serde_json::from_str(&test.read(".codex/hooks.json")).unwrap();
    let command = hooks["hooks"]["Stop"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap();
    assert!(command.ends_with("helixflow hook codex-stop"), "{command}");
    test.with_args(&["hook", "uninstall", "codex"])
        .run()
        .code(0);
    assert_eq!(test.read(".codex/hooks.json"), "{}\n");

    let bad = Test::new()
        .pipeline(ONE_PHASE)
        .file(".claude/settings.json", "{ not json");
    let outcome = bad.with_args(&["hook", "install", "claude"]).run().code(2);
    assert!(
        outcome.stderr.contains("is not valid JSON"),
        "{}",
        outcome.stderr
    );
    assert_eq!(bad.read(".claude/settings.json"), "{ not json");
    let outcome = bad
        .with_args(&["hook", "install", "codex", "--phase", "nope"])
        .run()
        .code(2);
    assert!(
        outcome.stderr.contains("no phase \"nope\""),
        "{}",
        outcome.stderr
    );
}

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap()
}

/// The README's fenced block that opens with `fence` and then `first`, without its fences.
fn readme_block(fence: &str, first: &str) -> String {
    let readme = readme();
    let opening = format!("{fence}\n{first}");
    let start = readme
        .find(&opening)
        .unwrap_or_else(|| panic!("the README has no block starting {opening:?}"))
        + fence.len()
        + 1;
    let closing = format!(
        "\n{}\n",
        &fence[..fence.len() - fence.trim_start_matches('`').len()]
    );
    let end = start + readme[start..].find(&closing).expect("a closing fence");
    readme[start..end].to_owned()
}

#[test]
fn the_readme_quotes_what_the_hook_answers_and_what_install_adds() {
    let test = Test::new().pipeline(ONE_PHASE).file("hello.py", BROKEN);
    let reason = refusal(&stop(&test, "claude-stop", "claude-stop.json", &[]).code(0));
    let quoted = readme_block("````text", "# helixflow: phase `code` is not done yet");
    assert_eq!(
        reason.trim_end(),
        quoted,
        "the README quotes another refusal"
    );

    test.with_args(&["hook", "install", "claude"]).run().code(0);
    let settings = test.read(".claude/settings.json");
    let program = env!("CARGO_BIN_EXE_helixflow");
    let added: serde_json::Value =
        serde_json::from_str(&settings.replace(program, "helixflow")).unwrap();
    let quoted: serde_json::Value =
        serde_json::from_str(&readme_block("```json", "{\n  \"hooks\": {\n    \"Stop\"")).unwrap();
    assert_eq!(added, quoted, "the README quotes another hook");
}

#[test]
fn an_agent_started_by_a_run_is_left_to_the_run() {
    let test = Test::new().pipeline(ONE_PHASE).file("hello.py", BROKEN);
    let outcome = test
        .with_args(&["hook", "claude-stop"])
        .env("HELIXFLOW_RUN_DIR", test.path().to_str().unwrap())
        .stdin(&payload(&test, "claude-stop.json"))
        .run()
        .code(0);
    assert_eq!((outcome.stdout.as_str(), outcome.stderr.as_str()), ("", ""));
    assert!(!test.path().join(".helixflow/hooks").exists());
    // Without it, the same stop is refused.
    refusal(&stop(&test, "claude-stop", "claude-stop.json", &[]).code(0));
}
