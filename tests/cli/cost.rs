//! What a run costs, budgets, and failures told apart: scripted agents that print the real output
//! shapes of Claude Code, Codex, Gemini CLI and Aider (usage, cost, error events, 429 and 401).

use crate::common;

use std::path::Path;

use common::{Test, latest_run};
use serde_json::Value;

/// An agent that acts as one of four CLIs. `agent.py FORMAT PHASE`, its prompt `PHASE: PLAN` on
/// standard input: PLAN is a comma-separated list, one item per attempt (the last repeats): `pass:USD` writes `out/PHASE.txt`, `fail:USD`
/// writes nothing (the outputs gate fails), `429` is a rate limit, `401` an invalid API key. USD
/// is what Claude and Aider report; Codex and Gemini report a million input tokens and 100k
/// output tokens, and no dollars.
const AGENT: &str = r#"
import json, os, sys
fmt, phase = sys.argv[1], sys.argv[2]
if fmt == "verdict":
    verdict = {"success": True, "errors": [], "checks_passed": ["read it"], "feedback": ""}
    print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "num_turns": 1,
                      "result": json.dumps(verdict), "total_cost_usd": 0.07,
                      "usage": {"input_tokens": 500, "output_tokens": 20}}))
    sys.exit(0)
plan = sys.stdin.read().splitlines()[0].split(": ", 1)[-1].strip().split(",")
attempt = int(os.environ["HELIXFLOW_ATTEMPT"])
step = plan[min(attempt, len(plan)) - 1]
kind, _, usd = step.partition(":")
usd = float(usd or 0)
if kind == "pass":
    os.makedirs("out", exist_ok=True)
    open(f"out/{phase}.txt", "w").write(f"attempt {attempt}\n")

def line(obj):
    print(json.dumps(obj), flush=True)

if fmt == "claude":
    line({"type": "system", "subtype": "init", "session_id": "s-1", "model": "claude-sonnet-4-5"})
    if kind == "429":
        line({"type": "result", "subtype": "success", "is_error": True, "num_turns": 1,
              "result": 'API Error: 429 {"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}',
              "total_cost_usd": 0, "usage": {"input_tokens": 0, "output_tokens": 0}, "session_id": "s-1"})
        sys.exit(1)
    if kind == "401":
        line({"type": "result", "subtype": "success", "is_error": True, "num_turns": 1,
              "result": "Invalid API key · Please run /login", "total_cost_usd": 0,
              "usage": {"input_tokens": 0, "output_tokens": 0}, "session_id": "s-1"})
        sys.exit(1)
    line({"type": "assistant", "message": {"content": [{"type": "text", "text": "wrote it"}]}})
    line({"type": "result", "subtype": "success", "is_error": False, "num_turns": 3,
          "result": "done", "session_id": "s-1", "total_cost_usd": usd,
          "usage": {"input_tokens": 100, "cache_creation_input_tokens": 200,
                    "cache_read_input_tokens": 700, "output_tokens": 250},
          "modelUsage": {"claude-sonnet-4-5": {"inputTokens": 100, "outputTokens": 250,
                         "cacheReadInputTokens": 700, "cacheCreationInputTokens": 200, "costUSD": usd}}})
elif fmt == "codex":
    line({"type": "thread.started", "thread_id": "t-1"})
    line({"type": "turn.started"})
    if kind == "429":
        line({"type": "error", "message": "exceeded retry limit, last status: 429 Too Many Requests"})
        line({"type": "turn.failed", "error": {"message": "exceeded retry limit, last status: 429 Too Many Requests"}})
        sys.exit(1)
    line({"type": "item.completed", "item": {"id": "i0", "type": "agent_message", "text": "done"}})
    line({"type": "turn.completed", "usage": {"input_tokens": 1000000, "cached_input_tokens": 0, "output_tokens": 100000}})
elif fmt == "gemini":
    if kind == "429":
        sys.stderr.write(json.dumps({"error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota).", "status": "RESOURCE_EXHAUSTED", "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"}]}}) + "\n")
        sys.exit(1)
    print(json.dumps({"response": "done", "stats": {"models": {"gemini-2.5-pro": {
        "api": {"totalRequests": 1, "totalErrors": 0, "totalLatencyMs": 10},
        "tokens": {"prompt": 1000000, "candidates": 50000, "total": 1100000, "cached": 0, "thoughts": 50000, "tool": 0}}},
        "tools": {"totalCalls": 0}, "files": {"totalLinesAdded": 1, "totalLinesRemoved": 0}}}, indent=2))
elif fmt == "aider":
    print("Aider v0.86.2\nModel: openai/m with whole edit format")
    if kind == "401":
        print("litellm.AuthenticationError: AuthenticationError: OpenAIException - Incorrect API key provided")
        sys.exit(1)
    print(f"Applied edit to out/{phase}.txt")
    print(f"Tokens: 1.2k sent, 300 received. Cost: ${usd / 2:.2f} message, ${usd / 2:.2f} session.")
    print(f"Tokens: 800 sent, 200 received. Cost: ${usd / 2:.2f} message, ${usd:.2f} session.")
"#;

/// The four agents, as `examples/agents.kdl` declares their usage and failure markers.
const AGENTS: &str = r##"
agent "claude" {
    command "python3" "agent.py" "claude" "{{ phase }}"
    stdin #true
    response "claude-stream-json"
    usage "claude"
    transient-pattern #"API Error: (429|529|5\d\d)|rate_limit_error|overloaded_error"#
    fatal-pattern #"Invalid API key|API Error: 401|authentication_error"#
}
agent "codex" {
    command "python3" "agent.py" "codex" "{{ phase }}"
    stdin #true
    response "codex-json"
    usage "codex" model="gpt-5-codex"
    transient-pattern #"\b429\b|Too Many Requests|stream disconnected"#
}
agent "gemini" {
    command "python3" "agent.py" "gemini" "{{ phase }}"
    stdin #true
    response "json"
    usage "gemini"
    transient-pattern #"RESOURCE_EXHAUSTED|"code": ?429"#
}
agent "reviewer" {
    command "python3" "agent.py" "verdict" "{{ phase }}"
    stdin #true
    response "claude-stream-json"
    usage "claude"
}
agent "aider" {
    command "python3" "agent.py" "aider" "{{ phase }}"
    stdin #true
    usage "aider"
    fatal-pattern "AuthenticationError"
}
"##;

/// A test folder with the agent script and a pipeline of `settings` (inside `pipeline`) and
/// `phases`.
fn pipeline(settings: &str, phases: &str) -> Test {
    Test::new().file("agent.py", AGENT).file(
        "pipeline.kdl",
        &format!("pipeline \"p\" {{\n{settings}\n}}\n{AGENTS}\n{phases}"),
    )
}

fn run_json(workspace: &Path) -> Value {
    let text = std::fs::read_to_string(latest_run(workspace).join("run.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn journal(workspace: &Path) -> Vec<Value> {
    std::fs::read_to_string(latest_run(workspace).join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn phase<'v>(run: &'v Value, name: &str) -> &'v Value {
    run["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no phase {name} in {run:#}"))
}

fn close(value: &Value, expected: f64) -> bool {
    value.as_f64().is_some_and(|v| (v - expected).abs() < 1e-9)
}

/// The `attempt-finished` events of a phase, in order.
fn attempts<'j>(journal: &'j [Value], phase: &str) -> Vec<&'j Value> {
    journal
        .iter()
        .filter(|e| e["event"] == "attempt-finished" && e["phase"] == phase)
        .collect()
}

#[test]
fn costs_add_up_across_retries_phases_and_the_four_clis() {
    let test = pipeline(
        r#"    price "gpt-5-codex" input=1.25 cached-input=0.125 output=10
    price "gemini-2.5-pro" input=1.25 output=10"#,
        r#"
defaults { retries 2; on-failure "continue" }
phase "a" { agent "claude"; prompt "a: fail:0.10,pass:0.20"; outputs { file "out/a.txt" } }
phase "b" { agent "codex"; prompt "b: pass"; outputs { file "out/b.txt" } }
phase "c" { agent "gemini"; prompt "c: pass"; outputs { file "out/c.txt" } }
phase "d" { agent "aider"; prompt "d: pass:0.06"; outputs { file "out/d.txt" } }
"#,
    );
    // The prompt is the plan: the agent reads its third argument.
    let outcome = test
        .with_args(&[
            "run",
            "pipeline.kdl",
            "--no-progress",
            "--junit",
            "junit.xml",
        ])
        .run()
        .code(0);
    let run = run_json(test.path());
    // Claude: $0.10 + $0.20 reported; Codex: 1M input at $1.25 and 100k output at $10 = $2.25;
    // Gemini: 1M prompt at $1.25, 50k candidates and 50k thoughts at $10 = $2.25; Aider: $0.06.
    assert!(
        close(&phase(&run, "a")["cost"]["known-usd"], 0.30),
        "{run:#}"
    );
    assert_eq!(phase(&run, "a")["cost"]["attempts"], 2);
    assert!(
        close(&phase(&run, "b")["cost"]["known-usd"], 2.25),
        "{run:#}"
    );
    assert!(
        close(&phase(&run, "c")["cost"]["known-usd"], 2.25),
        "{run:#}"
    );
    assert!(
        close(&phase(&run, "d")["cost"]["known-usd"], 0.06),
        "{run:#}"
    );
    assert!(close(&run["cost"]["known-usd"], 4.86), "{run:#}");
    assert_eq!(run["cost"].get("unknown-attempts"), None);

    let journal = journal(test.path());
    let a = attempts(&journal, "a");
    assert_eq!(a.len(), 2);
    assert!(close(&a[0]["usage"]["cost_usd"], 0.10));
    assert_eq!(a[0]["class"], "work");
    assert_eq!(a[1]["usage"]["input_tokens"], 1000);
    assert_eq!(a[1]["usage"]["cached_input_tokens"], 700);
    assert_eq!(a[1]["usage"]["turns"], 3);
    let b = attempts(&journal, "b");
    assert_eq!(b[0]["usage"]["priced"], true);
    assert_eq!(b[0]["usage"]["output_tokens"], 100_000);
    let d = attempts(&journal, "d");
    assert_eq!(d[0]["usage"]["input_tokens"], 2000);
    assert_eq!(d[0]["usage"]["turns"], 2);

    // The table's cost and tokens columns, and the run's total.
    let table: Vec<&str> = outcome
        .stderr
        .lines()
        .skip_while(|l| !l.starts_with("phase "))
        .collect();
    assert!(
        table[0].contains("cost") && table[0].contains("tokens"),
        "{}",
        outcome.stderr
    );
    let row = |name: &str| {
        *table
            .iter()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap()
    };
    assert!(row("a").contains("$0.30"), "{}", outcome.stderr);
    assert!(
        row("b").contains("$2.25") && row("b").contains("1.1M"),
        "{}",
        outcome.stderr
    );
    assert!(row("d").contains("$0.06"), "{}", outcome.stderr);
    assert!(outcome.stderr.contains("cost $4.86"), "{}", outcome.stderr);
    // Plain lines: each attempt's cost.
    assert!(
        outcome.stderr.contains("[a] attempt 1/3 failed in") && outcome.stderr.contains("($0.10,"),
        "{}",
        outcome.stderr
    );
    let junit = test.read("junit.xml");
    assert!(
        junit.contains(r#"<property name="cost-usd" value="0.300000"/>"#),
        "{junit}"
    );
    // `runs` and `show` read it back.
    let runs = test
        .with_args(&["runs", "--file", "pipeline.kdl"])
        .run()
        .code(0);
    assert!(runs.stdout.contains("$4.86"), "{}", runs.stdout);
    let show = test
        .with_args(&["show", "--file", "pipeline.kdl", "latest", "a"])
        .run()
        .code(0);
    assert!(show.stdout.contains("used: $0.10"), "{}", show.stdout);
    assert!(
        show.stdout.contains("failure class: work"),
        "{}",
        show.stdout
    );
}

#[test]
fn a_phase_budget_stops_retries_at_the_attempt_that_reaches_it() {
    let test = pipeline(
        "",
        r#"
phase "a" {
    agent "claude"
    prompt "a: fail:0.10"
    outputs { file "out/a.txt" }
    retries 9
    max-cost 0.25
}
"#,
    );
    test.with_args(&["run", "pipeline.kdl", "--no-progress"])
        .run()
        .code(1);
    let run = run_json(test.path());
    let a = phase(&run, "a");
    // $0.10, $0.20: under the budget; the third attempt brings it to $0.30, and no fourth starts.
    assert_eq!(a["attempts"], 3, "{run:#}");
    assert!(close(&a["cost"]["known-usd"], 0.30));
    let reason = a["reason"].as_str().unwrap();
    assert!(
        reason.contains("max-cost of $0.25 is spent: $0.30"),
        "{reason}"
    );
}

#[test]
fn the_run_budget_holds_across_phases() {
    let test = pipeline(
        "    max-cost 0.15",
        r#"
defaults { retries 3; on-failure "continue" }
phase "a" { agent "claude"; prompt "a: pass:0.10"; outputs { file "out/a.txt" } }
phase "b" { agent "claude"; depends-on "a"; prompt "b: fail:0.10"; outputs { file "out/b.txt" } }
"#,
    );
    test.with_args(&["run", "pipeline.kdl", "--no-progress"])
        .run()
        .code(1);
    let run = run_json(test.path());
    assert_eq!(phase(&run, "a")["status"], "passed");
    let b = phase(&run, "b");
    assert_eq!(b["attempts"], 1, "{run:#}");
    assert!(
        b["reason"]
            .as_str()
            .unwrap()
            .contains("the run's max-cost of $0.15 is spent: $0.20"),
        "{run:#}"
    );
}

#[test]
fn a_rate_limit_then_success_passes_without_spending_a_retry() {
    let test = pipeline(
        "    retry-budget 0",
        r#"
phase "a" {
    agent "claude"
    prompt "a: 429,pass:0.05"
    outputs { file "out/a.txt" }
    retries 0
    backoff "10ms"
}
"#,
    );
    let outcome = test
        .with_args(&["run", "pipeline.kdl", "--no-progress"])
        .run()
        .code(0);
    let run = run_json(test.path());
    assert_eq!(phase(&run, "a")["status"], "passed");
    assert_eq!(phase(&run, "a")["attempts"], 2);
    let journal = journal(test.path());
    let a = attempts(&journal, "a");
    assert_eq!(a[0]["class"], "transient");
    assert_eq!(a[0]["outcome"], "failed");
    assert_eq!(a[1]["outcome"], "passed");
    assert!(
        outcome.stderr.contains("transient: ") && outcome.stderr.contains("API Error: 429"),
        "{}",
        outcome.stderr
    );
    let feedback =
        std::fs::read_to_string(latest_run(test.path()).join("phases/a/attempt-1/feedback.md"))
            .unwrap();
    assert!(feedback.contains("Failure class: transient"), "{feedback}");
}

#[test]
fn a_transient_wait_honours_the_retry_delay_the_output_gives() {
    let test = pipeline(
        r#"    price "gemini-2.5-pro" input=1.25 output=10"#,
        r#"
phase "c" { agent "gemini"; prompt "c: 429,pass"; outputs { file "out/c.txt" }; retries 0 }
"#,
    );
    test.with_args(&["run", "pipeline.kdl", "--no-progress"])
        .run()
        .code(0);
    let journal = journal(test.path());
    let retry = journal
        .iter()
        .find(|e| e["event"] == "retry-scheduled")
        .expect("a retry");
    // Gemini's `"retryDelay": "1s"`, not the default backoff of 2s.
    assert_eq!(retry["backoff_ms"], 1000, "{retry}");
}

#[test]
fn transient_tries_are_bounded() {
    let test = pipeline(
        "",
        r#"
phase "b" {
    agent "codex"
    prompt "b: 429"
    retries 1
    transient-retries 2
    backoff "10ms"
}
"#,
    );
    test.with_args(&["run", "pipeline.kdl", "--no-progress"])
        .run()
        .code(1);
    let run = run_json(test.path());
    let b = phase(&run, "b");
    // Two transient tries, then the one retry: four attempts in all.
    assert_eq!(b["attempts"], 4, "{run:#}");
    assert_eq!(b["failure-class"], "transient");
    assert!(b["reason"].as_str().unwrap().contains("429"), "{run:#}");
}

#[test]
fn an_invalid_api_key_fails_after_one_attempt_with_the_message_first() {
    for agent in ["claude", "aider"] {
        let test = pipeline(
            "",
            &format!(
                r#"
phase "a" {{ agent "{agent}"; prompt "a: 401"; outputs {{ file "out/a.txt" }}; retries 3 }}
"#
            ),
        );
        let outcome = test
            .with_args(&["run", "pipeline.kdl", "--no-progress"])
            .run()
            .code(1);
        let run = run_json(test.path());
        let a = phase(&run, "a");
        assert_eq!(a["attempts"], 1, "{agent}: {run:#}");
        assert_eq!(a["failure-class"], "fatal", "{agent}");
        let reason = a["reason"].as_str().unwrap();
        let expected = if agent == "claude" {
            "Invalid API key"
        } else {
            "AuthenticationError"
        };
        assert!(
            reason.contains(expected) && reason.contains("fatal failure: not retried"),
            "{agent}: {reason}"
        );
        assert!(outcome.stderr.contains("fatal: "), "{}", outcome.stderr);
    }
}

#[test]
fn an_unknown_cost_is_never_summed_as_zero() {
    // Codex reports tokens only, and no price is given for its model.
    let test = pipeline(
        "",
        r#"
defaults { on-failure "continue" }
phase "a" { agent "claude"; prompt "a: pass:0.10"; outputs { file "out/a.txt" } }
phase "b" { agent "codex"; prompt "b: pass"; outputs { file "out/b.txt" } }
"#,
    );
    let outcome = test
        .with_args(&["run", "pipeline.kdl", "--no-progress"])
        .run()
        .code(0);
    let run = run_json(test.path());
    assert_eq!(phase(&run, "b")["cost"]["unknown-attempts"], 1, "{run:#}");
    assert!(close(&phase(&run, "b")["cost"]["known-usd"], 0.0));
    assert_eq!(run["cost"]["unknown-attempts"], 1);
    let journal = journal(test.path());
    let b = attempts(&journal, "b");
    assert_eq!(b[0]["usage"].get("cost_usd"), None, "{}", b[0]);
    assert_eq!(b[0]["usage"]["input_tokens"], 1_000_000);
    assert!(
        outcome
            .stderr
            .contains("cost $0.10 and the unknown cost of 1 attempt"),
        "{}",
        outcome.stderr
    );
    let row = outcome
        .stderr
        .lines()
        .find(|l| l.starts_with("b "))
        .unwrap();
    assert!(row.contains(" ? "), "{row}");
}

#[test]
fn a_budget_with_an_unknown_cost_fails_or_warns_as_declared() {
    let phases = r#"
phase "b" { agent "codex"; prompt "b: fail"; outputs { file "out/b.txt" }; retries 2 }
"#;
    let fail = pipeline("    max-cost 10", phases);
    fail.with_args(&["run", "pipeline.kdl", "--no-progress"])
        .run()
        .code(1);
    let run = run_json(fail.path());
    let b = phase(&run, "b");
    assert_eq!(b["attempts"], 1, "{run:#}");
    assert!(
        b["reason"].as_str().unwrap().contains("cannot be held"),
        "{run:#}"
    );

    let allow = pipeline("    max-cost 10\n    unknown-cost \"allow\"", phases);
    let outcome = allow
        .with_args(&["run", "pipeline.kdl", "--no-progress"])
        .run()
        .code(1);
    let run = run_json(allow.path());
    assert_eq!(phase(&run, "b")["attempts"], 3, "{run:#}");
    assert!(
        outcome
            .stderr
            .contains("warning: the cost of attempt 1 of \"b\" is unknown"),
        "{}",
        outcome.stderr
    );
}

/// `cost 0` declares an agent free: a script that reports nothing costs `$0.00` instead of an
/// unknown amount, so a budget with `unknown-cost "fail"` holds it through its retries. A declared
/// cost wins over what the output reports, for a worker and a reviewer alike, and the tokens are
/// still read.
#[test]
fn an_agent_declared_free_costs_nothing_and_a_budget_holds_it() {
    let test = pipeline(
        "    max-cost 10",
        r#"
agent "script" {
    command "python3" "agent.py" "plain" "{{ phase }}"
    stdin #true
    cost 0
}
agent "flat-rate" {
    command "python3" "agent.py" "claude" "{{ phase }}"
    stdin #true
    response "claude-stream-json"
    usage "claude"
    cost 0.02
}
agent "free-reviewer" {
    command "python3" "agent.py" "verdict" "{{ phase }}"
    stdin #true
    response "claude-stream-json"
    usage "claude"
    cost 0
}
phase "a" { agent "script"; prompt "a: fail,pass"; outputs { file "out/a.txt" } }
phase "b" {
    agent "flat-rate"
    prompt "b: pass:0.10"
    outputs { file "out/b.txt" }
    verify "external" "sub-agent"
    verifier "free-reviewer"
}
"#,
    );
    let outcome = test
        .with_args(&["run", "pipeline.kdl", "--no-progress"])
        .run()
        .code(0);
    let run = run_json(test.path());
    let a = phase(&run, "a");
    assert_eq!(a["attempts"], 2, "{run:#}");
    assert!(close(&a["cost"]["known-usd"], 0.0), "{run:#}");
    assert_eq!(a["cost"].get("unknown-attempts"), None, "{run:#}");
    assert!(
        close(&phase(&run, "b")["cost"]["known-usd"], 0.02),
        "{run:#}"
    );
    assert!(close(&run["cost"]["known-usd"], 0.02), "{run:#}");
    let journal = journal(test.path());
    for attempt in attempts(&journal, "a") {
        assert!(close(&attempt["usage"]["cost_usd"], 0.0), "{attempt}");
    }
    let b = attempts(&journal, "b");
    assert!(close(&b[0]["usage"]["cost_usd"], 0.02), "{}", b[0]);
    assert_eq!(b[0]["usage"]["input_tokens"], 1500, "{}", b[0]);
    assert!(
        outcome.stderr.contains("[a] attempt 1/3 failed in ")
            && outcome.stderr.contains("[a] passed after 2 attempts in ")
            && outcome.stderr.contains("cost $0.00\n"),
        "{}",
        outcome.stderr
    );
    assert!(!outcome.stderr.contains("unknown"), "{}", outcome.stderr);
}

#[test]
fn max_turns_fails_an_attempt_that_took_more() {
    let test = pipeline(
        "",
        r#"
phase "a" { agent "claude"; prompt "a: pass:0.01"; outputs { file "out/a.txt" }; retries 0; max-turns 2 }
"#,
    );
    test.with_args(&["run", "pipeline.kdl", "--no-progress"])
        .run()
        .code(1);
    let journal = journal(test.path());
    let a = attempts(&journal, "a");
    assert!(
        a[0]["error"]
            .as_str()
            .unwrap()
            .contains("took 3 turns, more than the phase's `max-turns` of 2"),
        "{}",
        a[0]
    );
    assert_eq!(a[0]["class"], "work");
}

#[test]
fn max_turns_is_passed_to_a_cli_that_takes_it() {
    let agents = AGENTS.replace(
        "    usage \"claude\"\n    transient-pattern",
        "    usage \"claude\"\n    max-turns-option \"--max-turns\"\n    transient-pattern",
    );
    let test = Test::new().file("agent.py", AGENT).file(
        "pipeline.kdl",
        &format!(
            "pipeline \"p\"\n{agents}\n{}",
            r#"
phase "a" { agent "claude"; prompt "a: pass:0.01"; outputs { file "out/a.txt" }; max-turns 7 }
phase "b" { agent "claude"; prompt "b: pass:0.01"; outputs { file "out/b.txt" } }
"#
        ),
    );
    test.with_args(&["run", "pipeline.kdl", "--no-progress"])
        .run()
        .code(0);
    let argv = |phase: &str| -> Vec<String> {
        let path =
            latest_run(test.path()).join(format!("phases/{phase}/attempt-1/invocation.json"));
        let invocation: Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        invocation["argv"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(argv("a")[argv("a").len() - 2..], ["--max-turns", "7"]);
    assert!(
        !argv("b").contains(&"--max-turns".to_owned()),
        "{:?}",
        argv("b")
    );
    let dry = test
        .with_args(&["run", "pipeline.kdl", "--dry-run", "--force"])
        .run()
        .code(0);
    assert!(dry.stdout.contains("--max-turns 7"), "{}", dry.stdout);
}

#[test]
fn a_sub_agent_review_is_paid_for_too() {
    let test = pipeline(
        "",
        r#"
phase "a" {
    agent "claude"
    prompt "a: pass:0.10"
    outputs { file "out/a.txt" }
    verify "external" "sub-agent"
    verifier "reviewer"
}
"#,
    );
    test.with_args(&["run", "pipeline.kdl", "--no-progress"])
        .run()
        .code(0);
    let journal = journal(test.path());
    let a = attempts(&journal, "a");
    // The worker's $0.10 and the reviewer's $0.07; the turns stay the worker's.
    assert!(close(&a[0]["usage"]["cost_usd"], 0.17), "{}", a[0]);
    assert_eq!(a[0]["usage"]["input_tokens"], 1500);
    assert_eq!(a[0]["usage"]["turns"], 3);
    assert!(close(&run_json(test.path())["cost"]["known-usd"], 0.17));
}

#[test]
fn lint_checks_budgets_prices_and_markers() {
    let lint = |text: &str| {
        Test::new()
            .pipeline(text)
            .args(&["lint", "--format", "json", "pipeline.kdl"])
            .run()
            .codes()
    };
    let agent = r#"agent "bot" { command "bot"; stdin #true; usage "claude" }
phase "a" { agent "bot"; prompt "go" }
"#;
    // A negative budget, a budget in quotes, a price without its output price.
    assert_eq!(
        lint(&format!("pipeline \"p\" {{ max-cost -1 }}\n{agent}")),
        ["HF106"]
    );
    assert_eq!(
        lint(&format!("pipeline \"p\" {{ max-cost \"5\" }}\n{agent}")),
        ["HF105"]
    );
    assert_eq!(
        lint(&format!(
            "pipeline \"p\" {{ price \"m\" input=1 }}\n{agent}"
        )),
        ["HF109"]
    );
    assert_eq!(
        lint(&format!(
            "pipeline \"p\" {{ max-cost 2.5; unknown-cost \"alow\" }}\n{agent}"
        )),
        ["HF107"]
    );
    // A marker that does not compile, an exit code that is not one.
    assert_eq!(
        lint(
            r#"pipeline "p"
agent "bot" { command "bot"; stdin #true; transient-pattern "(429"; fatal-exit "x" }
phase "a" { agent "bot"; prompt "go" }
"#
        ),
        ["HF302", "HF105"]
    );
    assert_eq!(
        lint(&format!(
            "pipeline \"p\" {{ max-cost 2.5 }}\n{agent}phase \"b\" {{ agent \"bot\"; prompt \"go\"; max-cost 0.5; max-turns 10; transient-retries 0 }}\n"
        )),
        Vec::<String>::new()
    );
    // An agent's declared cost: dollars, never negative, once; it lets a budget hold an agent
    // that reports no usage.
    let declared = |cost: &str| {
        lint(&format!(
            "pipeline \"p\" {{ max-cost 1 }}\nagent \"bot\" {{ command \"bot\"; stdin #true; {cost} }}\nphase \"a\" {{ agent \"bot\"; prompt \"go\" }}\n"
        ))
    };
    assert_eq!(declared("cost -1"), ["HF106", "HF608"]);
    assert_eq!(declared("cost \"free\""), ["HF105", "HF608"]);
    assert_eq!(declared("cost 0; cost 1"), ["HF108"]);
    assert_eq!(declared("cost 0"), Vec::<String>::new());
    assert_eq!(declared("stdin #true"), ["HF108", "HF608"]);
}

#[test]
fn an_up_to_date_phase_costs_nothing_and_says_so() {
    let test = pipeline(
        "",
        r#"
phase "a" { agent "claude"; prompt "a: pass:0.10"; outputs { file "out/a.txt" } }
"#,
    );
    let first = test
        .with_args(&["run", "pipeline.kdl", "--no-progress"])
        .run()
        .code(0);
    assert!(first.stderr.contains("cost $0.10"), "{}", first.stderr);
    let second = test
        .with_args(&["run", "pipeline.kdl", "--no-progress"])
        .run()
        .code(0);
    assert!(
        second.stderr.contains("[a] up to date: passed in run")
            && second.stderr.contains("(cost $0.00)"),
        "{}",
        second.stderr
    );
    let row = second.stderr.lines().find(|l| l.starts_with("a ")).unwrap();
    assert!(row.contains("$0.00"), "{row}");
    assert_eq!(run_json(test.path()).get("cost"), None);
}
