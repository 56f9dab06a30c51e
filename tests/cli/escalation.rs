//! Escalation tiers (`attempt N { … }`), sessions across tiers, `runs --stats`, and an agent's
//! `no-change` declaration: scripted agents that log every call they get.

use crate::common;

use std::path::Path;

use common::{Test, latest_run, run_phase};
use serde_json::Value;

/// An agent that acts as Claude Code. `agent.py NAME MODE [SESSION]`: it appends what it was
/// called with (its name, `command` or `resume`, the session, `HELIXFLOW_ATTEMPT`, its standard
/// input) to `.helixflow/calls.jsonl`, then does what `PLAN` (comma-separated, one item per attempt, the
/// last repeating) says: `pass` writes `out/x.txt`, `fail` writes nothing, `429` is a rate limit,
/// `same` writes nothing and answers `NOTHING TO CHANGE`. It costs `COST_<NAME>` dollars (0.10
/// when unset), and reports no cost when that is `unknown`.
const AGENT: &str = r#"
import json, os, sys, uuid
name, mode = sys.argv[1], sys.argv[2]
session = sys.argv[3] if len(sys.argv) > 3 else str(uuid.uuid4())
attempt = int(os.environ["HELIXFLOW_ATTEMPT"])
# Kept in the state folder, which no check of the workspace counts.
calls = os.path.join(os.environ["HELIXFLOW_RUN_DIR"], "..", "..", "calls.jsonl")
with open(calls, "a") as log:
    log.write(json.dumps({"agent": name, "mode": mode, "session": session, "attempt": attempt,
                          "stdin": sys.stdin.read()}) + "\n")
plan = os.environ.get("PLAN", "pass").split(",")
step = plan[min(attempt, len(plan)) - 1]
print(json.dumps({"type": "system", "subtype": "init", "session_id": session}))
if step == "429":
    print(json.dumps({"type": "result", "is_error": True, "session_id": session,
                      "result": "API Error: 429 rate_limit_error", "total_cost_usd": 0}))
    sys.exit(1)
if step == "pass":
    os.makedirs("out", exist_ok=True)
    open("out/x.txt", "w").write(f"written by {name}\n")
answer = "NOTHING TO CHANGE" if step == "same" else "done"
result = {"type": "result", "is_error": False, "session_id": session, "result": answer,
          "num_turns": 2, "usage": {"input_tokens": 100, "output_tokens": 10}}
cost = os.environ.get("COST_" + name.upper(), "0.10")
if cost != "unknown":
    result["total_cost_usd"] = float(cost)
print(json.dumps(result))
"#;

/// Two agents, `small` and `big`, that continue their own sessions on a retry.
fn agents() -> String {
    ["small", "big"]
        .map(|name| {
            format!(
                r#"agent "{name}" {{
    command "python3" "agent.py" "{name}" "command"
    resume "python3" "agent.py" "{name}" "resume" "{{{{ session_id }}}}"
    stdin #true
    response "claude-stream-json"
    usage "claude"
    session-id json="session_id"
    transient-pattern "API Error: 429"
    no-change "NOTHING TO CHANGE"
}}
"#
            )
        })
        .concat()
}

/// A test folder with the agent script and a pipeline of one phase, `parser`, whose body is
/// `body`.
fn pipeline(body: &str) -> Test {
    Test::new().file("agent.py", AGENT).file(
        "pipeline.kdl",
        &format!(
            "pipeline \"p\" {{\n}}\n{}\nphase \"parser\" {{\n    prompt \"Write out/x.txt.\"\n    outputs {{\n        file \"out/x.txt\"\n    }}\n    backoff \"10ms\"\n{body}}}\n",
            agents()
        ),
    )
}

/// Every call the agents got, in order.
fn calls(workspace: &Path) -> Vec<Value> {
    std::fs::read_to_string(workspace.join(".helixflow/calls.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// `invocation.json` of attempt `n` of `parser` in the newest run.
fn invocation(workspace: &Path, n: u32) -> Value {
    let path = latest_run(workspace).join(format!("phases/parser/attempt-{n}/invocation.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The events of the newest run.
fn journal(workspace: &Path) -> Vec<Value> {
    std::fs::read_to_string(latest_run(workspace).join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn attempt_2_runs_another_agent_with_the_full_prompt_and_the_feedback() {
    let test = pipeline(
        r#"    agent "small"
    retries 2
    attempt 2 { agent "big"; }
"#,
    );
    let outcome = test
        .with_args(&["run", "--no-progress"])
        .env("PLAN", "fail,pass")
        .run()
        .code(0);
    let calls = calls(test.path());
    let who: Vec<(&str, &str)> = calls
        .iter()
        .map(|c| (c["agent"].as_str().unwrap(), c["mode"].as_str().unwrap()))
        .collect();
    // A new session of the other agent: its `command`, not a `resume` of small's session.
    assert_eq!(who, [("small", "command"), ("big", "command")]);
    assert_ne!(calls[0]["session"], calls[1]["session"]);
    let given = calls[1]["stdin"].as_str().unwrap();
    assert!(
        given.starts_with("Write out/x.txt.") && given.contains("missing `out/x.txt`"),
        "attempt 2 gets the full prompt and the feedback:\n{given}"
    );
    let second = invocation(test.path(), 2);
    assert_eq!(second["resume"], false);
    assert_eq!(second["tier"]["work_attempt"], 2);
    assert_eq!(second["tier"]["agent"], "big");
    assert_eq!(second["tier"]["blocks"], serde_json::json!(["2"]));
    let why = second["why"].as_str().unwrap();
    assert!(
        why.contains("`attempt 2` sets agent \"big\"")
            && why.contains("the agent changed from \"small\""),
        "{why}"
    );
    let first = invocation(test.path(), 1);
    assert_eq!(first["tier"]["agent"], "small");
    assert!(first["tier"].get("blocks").is_none(), "{first}");
    // The plain lines name the agent of an attempt that is not the phase's first.
    assert!(
        outcome.stderr.contains("[parser] attempt 1/3 started\n")
            && outcome
                .stderr
                .contains("[parser] attempt 2/3 (big) started\n")
            && outcome
                .stderr
                .contains("[parser] attempt 2/3 (big) passed in "),
        "{}",
        outcome.stderr
    );
    // The events, run.json and show carry each attempt's tier.
    let started: Vec<Value> = journal(test.path())
        .into_iter()
        .filter(|e| e["event"] == "attempt-started")
        .map(|e| e["tier"].clone())
        .collect();
    assert_eq!(started[0]["agent"], "small");
    assert_eq!(started[1]["agent"], "big");
    assert_eq!(started[1]["blocks"], serde_json::json!(["2"]));
    let tiers = run_phase(test.path(), "parser")["tiers"].clone();
    assert_eq!(
        tiers,
        serde_json::json!([
            {"attempt": 1, "work-attempt": 1, "agent": "small", "outcome": "failed"},
            {"attempt": 2, "work-attempt": 2, "agent": "big", "blocks": ["2"], "outcome": "passed"},
        ])
    );
    let shown = test
        .with_args(&["show", "latest", "parser"])
        .run()
        .code(0)
        .stdout;
    assert!(
        shown.contains("tier: attempt 1 of the work, agent \"small\", the phase's own settings")
            && shown.contains("tier: attempt 2 of the work, agent \"big\", set by `attempt 2`"),
        "{shown}"
    );
}

#[test]
fn a_range_from_3_applies_to_attempts_3_and_4_and_a_new_prompt_continues_the_session() {
    let test = pipeline(
        r#"    agent "small"
    retries 3
    attempt 2 { agent "big"; }
    attempt "3.." {
        agent "big"
        prompt "Strictly: write out/x.txt. {{ feedback }}"
        max-turns 80
    }
"#,
    );
    test.with_args(&["run", "--no-progress", "--junit", "junit.xml"])
        .env("PLAN", "fail,fail,fail,pass")
        .run()
        .code(0);
    let calls = calls(test.path());
    let who: Vec<(&str, &str)> = calls
        .iter()
        .map(|c| (c["agent"].as_str().unwrap(), c["mode"].as_str().unwrap()))
        .collect();
    assert_eq!(
        who,
        [
            ("small", "command"),
            ("big", "command"),
            ("big", "resume"),
            ("big", "resume")
        ]
    );
    // Attempt 3 keeps the agent but changes the prompt: it continues big's session with the new
    // prompt's text and the feedback; attempt 4, in the same tier, with the feedback alone.
    assert_eq!(calls[2]["session"], calls[1]["session"]);
    assert_eq!(calls[3]["session"], calls[1]["session"]);
    let third = calls[2]["stdin"].as_str().unwrap();
    assert!(
        third.starts_with("Strictly: write out/x.txt.") && third.contains("# Attempt 2 of 4"),
        "{third}"
    );
    let fourth = calls[3]["stdin"].as_str().unwrap();
    assert!(
        fourth.starts_with("# Attempt 3 of 4") && !fourth.contains("Strictly"),
        "{fourth}"
    );
    for n in [3, 4] {
        let tier = &invocation(test.path(), n)["tier"];
        assert_eq!(tier["work_attempt"], n);
        assert_eq!(tier["agent"], "big");
        assert_eq!(tier["blocks"], serde_json::json!(["3.."]));
    }
    let why = invocation(test.path(), 3)["why"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        why.contains("max-turns 80")
            && why.contains("continues the session with the new prompt's text and the feedback"),
        "{why}"
    );
    assert!(
        invocation(test.path(), 4)["why"]
            .as_str()
            .unwrap()
            .ends_with("continues the session with the feedback")
    );
    let junit = test.read("junit.xml");
    for property in [
        r#"<property name="attempt-1-agent" value="small"/>"#,
        r#"<property name="attempt-2-tier" value="2"/>"#,
        r#"<property name="attempt-3-tier" value="3.."/>"#,
        r#"<property name="attempt-4-work-attempt" value="4"/>"#,
        r#"<property name="attempt-4-agent" value="big"/>"#,
    ] {
        assert!(junit.contains(property), "{property} in\n{junit}");
    }
}

#[test]
fn a_rate_limit_on_attempt_2_repeats_attempt_2_s_tier() {
    let test = pipeline(
        r#"    agent "small"
    retries 2
    attempt 2 { agent "big"; }
    attempt "3.." { agent "small"; prompt "Last try: write out/x.txt."; }
"#,
    );
    test.with_args(&["run", "--no-progress"])
        .env("PLAN", "fail,429,pass")
        .run()
        .code(0);
    let agents: Vec<String> = calls(test.path())
        .iter()
        .map(|c| c["agent"].as_str().unwrap().to_owned())
        .collect();
    // The try after the rate limit is attempt 2 of the work again, on big: not attempt 3's tier.
    assert_eq!(agents, ["small", "big", "big"]);
    let tiers = run_phase(test.path(), "parser")["tiers"].clone();
    let work: Vec<u64> = tiers
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["work-attempt"].as_u64().unwrap())
        .collect();
    assert_eq!(work, [1, 2, 2]);
    let why = invocation(test.path(), 3)["why"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        why.starts_with("attempt 2 of the work again, after a transient failure: the same tier"),
        "{why}"
    );
    assert_eq!(
        invocation(test.path(), 3)["tier"]["blocks"],
        serde_json::json!(["2"])
    );
}

#[test]
fn an_overlapping_range_is_a_lint_error_and_nothing_runs() {
    let test = pipeline(
        r#"    agent "small"
    retries 3
    attempt "2.." { agent "big"; }
    attempt 3 { prompt "Strictly."; }
"#,
    );
    let lint = test
        .with_args(&["lint", "--format", "json", "pipeline.kdl"])
        .run()
        .code(1);
    assert_eq!(lint.codes(), ["HF141"]);
    assert!(
        lint.json()[0]["message"]
            .as_str()
            .unwrap()
            .contains("both cover attempt 3")
    );
    test.with_args(&["run", "--no-progress"]).run().code(2);
    assert!(calls(test.path()).is_empty());
}

#[test]
fn attempt_blocks_are_part_of_the_phase_s_definition() {
    let test = pipeline(
        r#"    agent "small"
    retries 1
    attempt 2 { agent "big"; }
"#,
    );
    test.with_args(&["run", "--no-progress"]).run().code(0);
    let up_to_date = test.with_args(&["status"]).run().code(0).stdout;
    assert!(up_to_date.contains("up to date"), "{up_to_date}");
    let text = test.read("pipeline.kdl").replace(
        "attempt 2 { agent \"big\"; }",
        "attempt 2 { agent \"big\"; timeout \"5m\"; }",
    );
    std::fs::write(test.path().join("pipeline.kdl"), text).unwrap();
    let status = test.with_args(&["status"]).run().code(0).stdout;
    assert!(
        status.contains("attempt `2` timeout-ms added: `300000`"),
        "{status}"
    );
}

#[test]
fn runs_stats_counts_three_recorded_runs_per_phase_and_tier() {
    let test = pipeline(
        r#"    agent "small"
    retries 1
    attempt 2 { agent "big"; }
"#,
    );
    // Run 1: small fails, big passes. Run 2: small passes. Run 3: small fails, and big fails
    // without reporting its cost.
    let runs = [
        ("fail,pass", "1.00", 0),
        ("pass", "1.00", 0),
        ("fail,fail", "unknown", 1),
    ];
    for (plan, big, code) in runs {
        // Each run starts without the output: a failing attempt leaves none.
        let _ = std::fs::remove_dir_all(test.path().join("out"));
        test.with_args(&["run", "--force", "--no-progress"])
            .env("PLAN", plan)
            .env("COST_SMALL", "0.10")
            .env("COST_BIG", big)
            .run()
            .code(code);
    }
    let stats = test
        .with_args(&["runs", "--stats", "--json"])
        .run()
        .code(0)
        .json();
    assert_eq!(stats["runs"], 3);
    let rows = stats["tiers"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{stats:#}");
    let close =
        |value: &Value, expected: f64| value.as_f64().is_some_and(|v| (v - expected).abs() < 1e-9);
    let small = &rows[0];
    assert_eq!(
        (small["attempt"].clone(), small["agent"].clone()),
        (1.into(), "small".into())
    );
    assert_eq!(
        (small["attempts"].clone(), small["passed"].clone()),
        (3.into(), 1.into())
    );
    assert!(close(&small["cost"]["known-usd"], 0.30), "{small:#}");
    assert!(small["cost"].get("unknown-attempts").is_none());
    assert!(close(&small["mean-cost-usd"], 0.10));
    assert!(close(&small["cost-per-pass-usd"], 0.30));
    assert!(close(&small["cost-per-passed-phase-usd"], 0.30));
    let big = &rows[1];
    assert_eq!(
        (big["attempt"].clone(), big["agent"].clone()),
        (2.into(), "big".into())
    );
    assert_eq!(
        (big["attempts"].clone(), big["passed"].clone()),
        (2.into(), 1.into())
    );
    assert!(close(&big["cost"]["known-usd"], 1.00), "{big:#}");
    assert_eq!(big["cost"]["unknown-attempts"], 1);
    // An unknown cost is never a zero: what depends on it is unknown.
    assert_eq!(big["mean-cost-usd"], Value::Null);
    assert_eq!(big["cost-per-pass-usd"], Value::Null);
    assert_eq!(big["cost-per-passed-phase-usd"], Value::Null);
    let all = &rows[2];
    assert!(all.get("attempt").is_none());
    assert_eq!(
        (all["attempts"].clone(), all["passed"].clone()),
        (5.into(), 2.into())
    );
    assert!(close(&all["cost"]["known-usd"], 1.30));
    assert_eq!(all["cost"]["unknown-attempts"], 1);
    let durations: u64 = rows[..2]
        .iter()
        .map(|r| r["duration-ms"].as_u64().unwrap())
        .sum();
    assert_eq!(all["duration-ms"].as_u64().unwrap(), durations);

    let table = test.with_args(&["runs", "--stats"]).run().code(0).stdout;
    let row = |start: &str| -> Vec<String> {
        table
            .lines()
            .find(|line| line.starts_with(start))
            .unwrap_or_else(|| panic!("no row {start:?} in\n{table}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    let small = row("parser  1");
    assert_eq!(
        &small[2..7],
        ["small", "3", "1", "$0.30", "$0.10"],
        "{table}"
    );
    assert_eq!(&small[9..], ["$0.30", "$0.30"], "{table}");
    let big = row("parser  2");
    assert_eq!(&big[2..7], ["big", "2", "1", "$1.00+?", "?"], "{table}");
    assert_eq!(&big[9..], ["?", "?"], "{table}");
    let all = row("parser  all");
    assert_eq!(&all[2..5], ["5", "2", "$1.30+?"], "{table}");
}

/// A re-run whose work is already in place, but not as an earlier pass left it (someone edited
/// the file since): without `no-change` it fails `changes`; with the agent's declaration it
/// passes, as "passed, nothing to change", but only while every other gate passes.
#[test]
fn no_change_passes_a_rerun_whose_work_is_there_and_fails_one_where_a_gate_fails() {
    let test = pipeline(
        r#"    agent "small"
    retries 0
    gates {
        changes
        command "grep -q written out/x.txt" name="content"
    }
"#,
    );
    test.with_args(&["run", "--no-progress"]).run().code(0);
    std::fs::write(
        test.path().join("out/x.txt"),
        "written, and edited by hand\n",
    )
    .unwrap();

    // The agent changes nothing and does not say why: `changes` fails.
    let silent = test
        .with_args(&["run", "--force", "--no-progress"])
        .env("PLAN", "fail")
        .run()
        .code(1);
    assert!(
        silent.stderr.contains("gate changes failed"),
        "{}",
        silent.stderr
    );

    // It says there was nothing to change: the attempt passes, and says so everywhere.
    let declared = test
        .with_args(&["run", "--force", "--no-progress"])
        .env("PLAN", "same")
        .run()
        .code(0);
    assert!(
        declared
            .stderr
            .contains("[parser] attempt 1/1 passed, nothing to change, in "),
        "{}",
        declared.stderr
    );
    assert!(
        declared
            .stderr
            .lines()
            .any(|l| l.starts_with("parser") && l.contains("passed, nothing to change")),
        "the summary: {}",
        declared.stderr
    );
    let phase = run_phase(test.path(), "parser");
    assert_eq!(phase["status"], "passed");
    assert_eq!(phase["nothing-to-change"], true);
    let gates: Value = serde_json::from_str(
        &std::fs::read_to_string(
            latest_run(test.path()).join("phases/parser/attempt-1/gates.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let changes = gates
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "changes")
        .unwrap();
    assert_eq!(changes["status"], "passed");
    assert!(
        changes["details"][0]
            .as_str()
            .unwrap()
            .starts_with("passed, nothing to change: the agent declared it"),
        "{changes}"
    );
    let finished = journal(test.path())
        .into_iter()
        .find(|e| e["event"] == "attempt-finished")
        .unwrap();
    assert_eq!(finished["nothing_to_change"], true);

    // Another gate fails: the declaration does not count, and the feedback says why.
    std::fs::write(test.path().join("out/x.txt"), "edited by hand\n").unwrap();
    let failing = test
        .with_args(&["run", "--force", "--no-progress"])
        .env("PLAN", "same")
        .run()
        .code(1);
    assert!(
        failing.stderr.contains("gate content failed")
            && failing.stderr.contains("gate changes failed")
            && failing
                .stderr
                .contains("you declared that there was nothing to change"),
        "{}",
        failing.stderr
    );
    assert_ne!(run_phase(test.path(), "parser")["nothing-to-change"], true);
}
