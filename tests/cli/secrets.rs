//! `secret` values stay out of what helixflow writes even when they arrive in a form the raw logs'
//! redaction cannot see (JSON `\uXXXX` escapes an agent's output decodes to), and out of
//! `compile`.

use crate::common::Test;

const SECRET: &str = "hunter2-secret";

#[test]
fn a_secret_escaped_in_the_agents_json_is_redacted_where_it_is_decoded() {
    let escaped: String = SECRET
        .chars()
        .map(|c| format!("\\u{:04x}", c as u32))
        .collect();
    let stream = format!(
        "{{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"num_turns\":1,\
         \"result\":\"done\",\"total_cost_usd\":0.01,\"modelUsage\":{{\"{escaped}\":\
         {{\"inputTokens\":1,\"outputTokens\":1,\"costUSD\":0.01}}}}}}\n"
    );
    let test = Test::new()
        .file("stream.jsonl", &stream)
        .pipeline(
            r#"pipeline "p" {
    secret "TOKEN"
}
agent "claude" {
    command "sh" "-c" "cat stream.jsonl; echo done > out.txt"
    response "claude-stream-json"
    usage "claude"
}
phase "a" {
    agent "claude"
    prompt "go"
}
"#,
        )
        .env("TOKEN", SECRET);
    let out = test
        .with_args(&["run", "--no-progress", "--events", "events.ndjson"])
        .run()
        .code(0);
    let runs = test.path().join(".helixflow/runs");
    let run = crate::common::run_folders(&runs).remove(0);
    let journal = std::fs::read_to_string(run.join("events.jsonl")).unwrap();
    assert!(journal.contains("\"models\""), "{journal}");
    assert!(journal.contains("[REDACTED:TOKEN]"), "{journal}");
    for (what, text) in [
        ("stdout", out.stdout.clone()),
        ("stderr", out.stderr.clone()),
        ("--events", test.read("events.ndjson")),
        ("events.jsonl", journal),
        (
            "run.json",
            std::fs::read_to_string(run.join("run.json")).unwrap(),
        ),
    ] {
        assert!(!text.contains(SECRET), "{what} shows the secret:\n{text}");
    }
}

#[test]
fn compile_redacts_secrets_set_in_env() {
    let out = Test::new()
        .pipeline(
            r#"pipeline "p" {
    secret "TOKEN"
    secret "PHASE_TOKEN"
    env "TOKEN" "pipeline-level-secret"
}
phase "a" {
    run "true"
    env "PHASE_TOKEN" "phase-level-secret"
}
"#,
        )
        .args(&["compile"])
        .run()
        .code(0);
    assert!(
        !out.stdout.contains("pipeline-level-secret"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("phase-level-secret"), "{}", out.stdout);
    assert!(out.stdout.contains("[REDACTED:TOKEN]"), "{}", out.stdout);
    assert!(
        out.stdout.contains("[REDACTED:PHASE_TOKEN]"),
        "{}",
        out.stdout
    );
}
