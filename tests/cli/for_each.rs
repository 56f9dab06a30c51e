//! `for-each`: a phase made at run time into one verified phase per item (`migrate[KEY]`), each
//! with its own prompt, journal folder, gates, retries and record.

use crate::common::{Test, latest_run};

/// An agent that writes its prompt (standard input) to the file named by `TARGET`, with its
/// first argument on the first line, and notes the call in `calls.log`. It writes nothing while
/// `fail-<KEY>` exists (`KEY` from `HELIXFLOW_ITEM_KEY`).
const AGENT: &str = r#"
import os, sys
prompt = sys.stdin.read()
key = os.environ["HELIXFLOW_ITEM_KEY"]
with open("calls.log", "a") as log:
    log.write(key + "\n")
if not os.path.exists("fail-" + key):
    target = os.environ["TARGET"]
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "w") as out:
        out.write(sys.argv[1] + "\n" + prompt)
"#;

const PIPELINE: &str = r#"pipeline "p" { max-parallel 4; }
agent "bot" {
    command "python3" "agent.py" "{{ item.title }}"
    stdin #true
    cost 0
}
phase "plan" { run "mkdir -p plan"; }
phase "migrate" {
    depends-on "plan"
    for-each json="plan/modules.json" key="id"
    max-parallel 2
    agent "bot"
    env "TARGET" "out/{{ item.id }}.txt"
    prompt "Migrate {{ item.key }} (item {{ item.index }}): {{ item.title }}"
    outputs { file "out/{{ item.id }}.txt" }
    gates { command "grep -qF -- {{ item.id }} out/{{ item.key }}.txt" name="mentions"; }
    retries 0
    on-failure "continue"
}
phase "index" {
    depends-on "migrate"
    run "ls out > index.txt"
}
"#;

fn modules(items: &[(&str, &str)]) -> String {
    let items: Vec<serde_json::Value> = items
        .iter()
        .map(|(id, title)| serde_json::json!({"id": id, "title": title}))
        .collect();
    serde_json::to_string_pretty(&items).unwrap()
}

fn project(items: &[(&str, &str)]) -> Test {
    Test::new()
        .file("agent.py", AGENT)
        .file("plan/modules.json", &modules(items))
        .pipeline(PIPELINE)
}

/// The keys the agent was called for since the log was last taken, sorted.
fn take_calls(test: &Test) -> Vec<String> {
    let path = test.path().join("calls.log");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let _ = std::fs::remove_file(&path);
    let mut calls: Vec<String> = text.lines().map(str::to_owned).collect();
    calls.sort();
    calls
}

/// The cells of a phase's row in the summary table, split at blanks.
fn row(stderr: &str, phase: &str) -> Vec<String> {
    stderr
        .lines()
        .find(|line| line.split_whitespace().next() == Some(phase))
        .unwrap_or_else(|| panic!("no row for {phase}:\n{stderr}"))
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

fn run_json(test: &Test) -> serde_json::Value {
    let text = std::fs::read_to_string(latest_run(test.path()).join("run.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn status_of(run: &serde_json::Value, phase: &str) -> String {
    run["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == phase)
        .unwrap_or_else(|| panic!("no {phase} in {run:#}"))["status"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn three_json_items_become_three_verified_phases_with_their_own_prompts_and_folders() {
    let test = project(&[("parser", "Parser"), ("lexer", "Lexer"), ("docs", "Docs")]);
    let out = test
        .with_args(&["run", "--no-progress", "pipeline.kdl"])
        .run()
        .code(0);
    assert!(
        out.stderr
            .contains("[migrate] 3 phases made: migrate[parser], migrate[lexer], migrate[docs]"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("[migrate] passed after 3 attempts"));
    assert_eq!(
        row(&out.stderr, "migrate"),
        [
            "migrate",
            "passed",
            "3",
            row(&out.stderr, "migrate")[3].as_str(),
            "-",
            "-",
            "3",
            "passed"
        ]
    );
    assert_eq!(take_calls(&test), ["docs", "lexer", "parser"]);
    let run = latest_run(test.path());
    for (index, (key, title)) in [("parser", "Parser"), ("lexer", "Lexer"), ("docs", "Docs")]
        .into_iter()
        .enumerate()
    {
        let attempt = run.join(format!("phases/migrate[{key}]/attempt-1"));
        let prompt = std::fs::read_to_string(attempt.join("prompt.md")).unwrap();
        assert_eq!(prompt, format!("Migrate {key} (item {index}): {title}"));
        let gates = std::fs::read_to_string(attempt.join("gates.json")).unwrap();
        assert!(gates.contains("\"mentions\""), "{gates}");
        assert_eq!(
            test.read(&format!("out/{key}.txt")),
            format!("{title}\n{prompt}")
        );
        assert!(
            test.path()
                .join(format!(".helixflow/passed/migrate[{key}].json"))
                .is_file()
        );
    }
    let summary = run_json(&test);
    for phase in [
        "migrate",
        "migrate[parser]",
        "migrate[lexer]",
        "migrate[docs]",
        "index",
    ] {
        assert_eq!(status_of(&summary, phase), "passed", "{phase}");
    }
    // The items are listed under their phase.
    let names: Vec<&str> = summary["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "plan",
            "migrate",
            "migrate[parser]",
            "migrate[lexer]",
            "migrate[docs]",
            "index"
        ]
    );
    // `graph` draws the phase as one node, with its items counted.
    let graph = test.with_args(&["graph", "pipeline.kdl"]).run().code(0);
    assert!(
        graph
            .stdout
            .contains("\"migrate\" [label=\"migrate (3 items)\"];"),
        "{}",
        graph.stdout
    );
    // `check` judges each item as its phase, without starting an agent.
    let checked = test
        .with_args(&["check", "--no-progress", "pipeline.kdl"])
        .run()
        .code(0);
    assert!(
        checked.stderr.contains("[migrate[docs]]"),
        "{}",
        checked.stderr
    );
    assert_eq!(take_calls(&test), Vec::<String>::new());
    std::fs::remove_file(test.path().join("out/docs.txt")).unwrap();
    let checked = test
        .with_args(&["check", "--no-progress", "pipeline.kdl"])
        .run()
        .code(1);
    assert!(
        checked.stderr.contains("out/docs.txt"),
        "{}",
        checked.stderr
    );
    // `show` knows an item as a phase.
    let shown = test
        .with_args(&["show", "pipeline.kdl", "latest", "migrate[lexer]"])
        .run()
        .code(0);
    assert!(shown.stdout.contains("attempt 1"), "{}", shown.stdout);
}

#[test]
fn a_rerun_after_editing_one_item_and_adding_one_starts_exactly_two_agents() {
    let test = project(&[("a", "A"), ("b", "B"), ("c", "C"), ("d", "D")]);
    test.with_args(&["run", "--no-progress", "pipeline.kdl"])
        .run()
        .code(0);
    assert_eq!(take_calls(&test).len(), 4);
    // Nothing changed: nothing starts, and the phase after them is up to date too.
    let again = test
        .with_args(&["run", "--no-progress", "pipeline.kdl"])
        .run()
        .code(0);
    assert!(take_calls(&test).is_empty(), "{}", again.stderr);
    assert!(again.stderr.contains("[migrate] up to date: 4 up to date"));
    assert!(
        again.stderr.contains("[index] up to date"),
        "{}",
        again.stderr
    );

    // Edit `b`, drop `d`, add `e` (the prompt shows each item's place: the others keep theirs).
    std::fs::write(
        test.path().join("plan/modules.json"),
        modules(&[("a", "A"), ("b", "B, edited"), ("c", "C"), ("e", "E")]),
    )
    .unwrap();
    let status = test.with_args(&["status", "pipeline.kdl"]).run().code(0);
    assert!(status.stdout.contains("migrate[b]"), "{}", status.stdout);
    let out = test
        .with_args(&["run", "--no-progress", "pipeline.kdl"])
        .run()
        .code(0);
    assert_eq!(take_calls(&test), ["b", "e"], "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "[migrate[b]] will run: definition changed: `item.title` changed: `B` → `B, edited`; prompt changed"
        ),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("[migrate[e]] will run: never passed"));
    assert!(
        out.stderr.contains("dropped: 1 item (migrate[d])"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("[migrate] passed after 2 attempts")
            && out
                .stderr
                .contains("2 passed, 2 up to date; dropped: 1 item"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("[index] will run: upstream re-runs: `migrate`")
    );
    assert!(
        !test
            .path()
            .join(".helixflow/passed/migrate[d].json")
            .exists()
    );
    assert!(
        test.path()
            .join(".helixflow/passed/migrate[e].json")
            .exists()
    );
}

#[test]
fn a_failing_item_does_not_stop_the_others_and_the_next_run_retries_only_it() {
    let test = project(&[("a", "A"), ("b", "B"), ("c", "C")]).file("fail-b", "");
    let out = test
        .with_args(&["run", "--no-progress", "pipeline.kdl"])
        .run()
        .code(1);
    assert_eq!(take_calls(&test), ["a", "b", "c"], "{}", out.stderr);
    let summary = run_json(&test);
    assert_eq!(status_of(&summary, "migrate[a]"), "passed");
    assert_eq!(status_of(&summary, "migrate[b]"), "failed");
    assert_eq!(status_of(&summary, "migrate[c]"), "passed");
    assert_eq!(status_of(&summary, "migrate"), "failed");
    assert_eq!(status_of(&summary, "index"), "skipped");
    assert_eq!(row(&out.stderr, "migrate")[..3], ["migrate", "failed", "3"]);
    assert!(out.stderr.contains("2 passed, 1 failed"), "{}", out.stderr);
    assert_eq!(
        row(&out.stderr, "migrate[b]")[..3],
        ["migrate[b]", "failed", "1/1"]
    );

    std::fs::remove_file(test.path().join("fail-b")).unwrap();
    let out = test
        .with_args(&["run", "--no-progress", "pipeline.kdl"])
        .run()
        .code(0);
    assert_eq!(take_calls(&test), ["b"], "{}", out.stderr);
    assert!(
        out.stderr.contains("[migrate[b]] will run: failed in run"),
        "{}",
        out.stderr
    );
    assert_eq!(status_of(&run_json(&test), "index"), "passed");
}

#[test]
fn more_items_than_max_items_start_nothing_and_the_count_is_named() {
    let items: Vec<(String, String)> = (0..7).map(|i| (format!("m{i}"), format!("M{i}"))).collect();
    let items: Vec<(&str, &str)> = items
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let test = project(&items);
    std::fs::write(
        test.path().join("pipeline.kdl"),
        PIPELINE.replace("max-parallel 2", "max-parallel 2\n    max-items 5"),
    )
    .unwrap();
    let out = test
        .with_args(&["run", "--no-progress", "pipeline.kdl"])
        .run()
        .code(1);
    assert!(take_calls(&test).is_empty(), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("7 items, more than its `max-items` of 5: no item started"),
        "{}",
        out.stderr
    );
    assert_eq!(status_of(&run_json(&test), "migrate"), "failed");
}

#[test]
fn item_values_are_used_byte_exact_and_never_as_shell_text() {
    let hostile = "it's \"quoted\" $(touch pwned) `touch pwned2`; *\nsecond line";
    let items = serde_json::json!([{"id": "k1", "title": hostile}]);
    let test = Test::new()
        .file("items.json", &items.to_string())
        .file(
            "agent.py",
            "import sys, os\nopen('argv.txt', 'w').write(sys.argv[1])\nopen('env.txt', 'w').write(os.environ['TITLE'])\nopen('stdin.txt', 'w').write(sys.stdin.read())\n",
        )
        .pipeline(
            r#"pipeline "p"
agent "bot" {
    command "python3" "agent.py" "{{ item.title }}"
    stdin #true
    cost 0
}
phase "write" {
    for-each json="items.json" key="id"
    agent "bot"
    env "TITLE" "{{ item.title }}"
    prompt "<{{ item.title }}>"
    gates {
        command "printf '%s' {{ item.title }} > shell-bare.txt; printf '%s' \"{{ item.title }}\" > shell-double.txt; printf '%s' 'x{{ item.title }}y' > shell-single.txt" name="shell"
        matches "stdin.txt" "^<{{ item.title }}>$"
    }
    retries 0
}
"#,
        );
    let out = test
        .with_args(&["run", "--no-progress", "pipeline.kdl"])
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(test.read("argv.txt"), hostile);
    assert_eq!(test.read("env.txt"), hostile);
    assert_eq!(test.read("stdin.txt"), format!("<{hostile}>"));
    assert_eq!(test.read("shell-bare.txt"), hostile);
    assert_eq!(test.read("shell-double.txt"), hostile);
    assert_eq!(test.read("shell-single.txt"), format!("x{hostile}y"));
    assert!(!test.path().join("pwned").exists());
    assert!(!test.path().join("pwned2").exists());
    let prompt = std::fs::read_to_string(
        latest_run(test.path()).join("phases/write[k1]/attempt-1/prompt.md"),
    )
    .unwrap();
    assert_eq!(prompt, format!("<{hostile}>"));
}

#[test]
fn glob_and_literal_items_force_and_only_name_single_items() {
    let test = Test::new()
        .file("src/a.py", "a = 1\n")
        .file("src/pkg/b.py", "b = 2\n")
        .file("src/c.txt", "not python\n")
        .pipeline(
            r#"pipeline "p"
phase "copy" {
    for-each glob="src/**/*.py"
    run "mkdir -p out && cp {{ item.path }} out/{{ item.stem }}.py && echo {{ item.name }} >> calls.log"
    outputs { file "out/{{ item.stem }}.py" }
    gates { syntax; }
}
phase "say" {
    for-each "one" "two words"
    run "echo {{ item }}-{{ item.index }} >> said.log"
}
"#,
        );
    test.with_args(&["run", "--no-progress", "pipeline.kdl"])
        .run()
        .code(0);
    let mut calls: Vec<String> = test.read("calls.log").lines().map(str::to_owned).collect();
    calls.sort();
    assert_eq!(calls, ["a.py", "b.py"]);
    let mut said: Vec<String> = test.read("said.log").lines().map(str::to_owned).collect();
    said.sort();
    assert_eq!(said, ["one-0", "two words-1"]);
    assert_eq!(test.read("out/b.py"), "b = 2\n");

    // An item's gates, checked outside a run.
    let verified = test
        .with_args(&[
            "verify",
            "--phase",
            "copy[src/pkg/b.py]",
            "--file",
            "pipeline.kdl",
        ])
        .run()
        .code(0);
    assert!(verified.stdout.contains("✓ syntax"), "{}", verified.stdout);
    // One item forced; the others are up to date.
    let out = test
        .with_args(&[
            "run",
            "--no-progress",
            "pipeline.kdl",
            "--force",
            "copy[src/pkg/b.py]",
        ])
        .run()
        .code(0);
    assert_eq!(test.read("calls.log").lines().count(), 3, "{}", out.stderr);
    assert!(out.stderr.contains("[copy[src/pkg/b.py]] will run: forced"));
    assert!(out.stderr.contains("[copy[src/a.py]] up to date"));
    // `--only` one item: only it is made, and the other items' records stay.
    let out = test
        .with_args(&[
            "run",
            "--no-progress",
            "--only",
            "say[one]",
            "--force",
            "pipeline.kdl",
        ])
        .run()
        .code(0);
    assert!(
        out.stderr.contains("[say] 1 phase made: say[one]"),
        "{}",
        out.stderr
    );
    assert_eq!(test.read("said.log").lines().count(), 3);
    let kept: Vec<String> = std::fs::read_dir(test.path().join(".helixflow/passed"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("say[two_words]-"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    // An item of a phase without `for-each`, or of no phase, is no phase.
    let out = test
        .with_args(&[
            "run",
            "--no-progress",
            "--only",
            "nope[one]",
            "pipeline.kdl",
        ])
        .run()
        .code(2);
    assert!(
        out.stderr.contains("no phase \"nope[one]\""),
        "{}",
        out.stderr
    );
}

#[test]
fn items_whose_keys_cannot_name_a_phase_are_refused_by_name() {
    let test = Test::new()
        .file("items.json", r#"[{"id": "ok"}, {"id": "../up"}]"#)
        .file("dup.json", r#"["x", "y", "x"]"#)
        .pipeline(
            r#"pipeline "p"
phase "bad" {
    for-each json="items.json" key="id"
    run "true"
    on-failure "continue"
}
phase "dup" {
    for-each json="dup.json"
    run "true"
}
"#,
        );
    let out = test
        .with_args(&["run", "--no-progress", "pipeline.kdl"])
        .run()
        .code(1);
    assert!(
        out.stderr.contains(
            "item 1 (`../up`): its key has an empty, `.` or `..` part: it would not name one folder"
        ),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("items 0 and 2 have the same key `x`: keys must be unique"),
        "{}",
        out.stderr
    );
}

#[test]
fn items_stop_starting_once_the_phase_s_budget_is_spent_and_the_rest_never_start() {
    let test = Test::new()
        .file(
            "agent.py",
            "import os\nopen('calls.log', 'a').write(os.environ['HELIXFLOW_ITEM_KEY'] + '\\n')\n",
        )
        .pipeline(
            r#"pipeline "p"
agent "paid" {
    command "python3" "agent.py"
    cost 0.1
}
phase "each" {
    for-each "a" "b" "c" "d"
    max-parallel 1
    max-cost 0.15
    agent "paid"
    prompt "do {{ item }}"
    retries 0
    on-failure "continue"
}
"#,
        );
    let out = test
        .with_args(&["run", "--no-progress", "pipeline.kdl"])
        .run()
        .code(1);
    assert_eq!(take_calls(&test), ["a", "b"], "{}", out.stderr);
    assert!(
        out.stderr.contains("[each] failed after 2 attempts")
            && out.stderr.contains("2 passed, 2 never started"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(
            "[each[c]] skipped: never started: \"each\"'s (for all its items) max-cost of $0.15 is spent: $0.20 so far"
        ),
        "{}",
        out.stderr
    );
}

#[test]
fn a_sibling_item_s_file_is_never_offered_as_a_near_miss() {
    // Both items write a `mod.txt`, each in its own folder; `b` writes nothing.
    let test = Test::new()
        .file(
            "items.json",
            r#"[{"id": "a", "dir": "pkg/a"}, {"id": "b", "dir": "pkg/b"}]"#,
        )
        .pipeline(
            r#"pipeline "p"
phase "write" {
    for-each json="items.json" key="id"
    run "test {{ item.key }} = b || (mkdir -p {{ item.dir }} && echo x > {{ item.dir }}/mod.txt)"
    outputs { file "{{ item.dir }}/mod.txt" }
    retries 0
    on-failure "continue"
    max-parallel 1
}
"#,
        );
    test.with_args(&["run", "--no-progress", "pipeline.kdl"])
        .run()
        .code(1);
    let feedback = std::fs::read_to_string(
        latest_run(test.path()).join("phases/write[b]/attempt-1/feedback.md"),
    )
    .unwrap();
    assert!(feedback.contains("pkg/b/mod.txt"), "{feedback}");
    assert!(!feedback.contains("pkg/a/mod.txt"), "{feedback}");
}

/// A `for-each` phase of `run` steps whose item fails is not up to date afterwards, though it
/// passed before: its record is never set aside with the records of `run` steps removed ahead of
/// their start (which come back at the end of the run when their phase did not start).
#[test]
fn a_for_each_phase_whose_item_failed_is_not_up_to_date_after_the_run() {
    let test = Test::new().pipeline(
        r#"pipeline "p"
phase "first" { run "true"; }
phase "x" {
    for-each "a" "b"
    run "test ! -e fail-{{ item.key }}"
    retries 0
    on-failure "continue"
}
phase "after" {
    depends-on "x"
    run "true"
}
"#,
    );
    test.with_args(&["run", "--no-progress", "pipeline.kdl"])
        .run()
        .code(0);
    std::fs::write(test.path().join("fail-b"), "").unwrap();
    test.with_args(&["run", "--no-progress", "--force", "pipeline.kdl"])
        .run()
        .code(1);
    let status = test.with_args(&["status", "pipeline.kdl"]).run().code(0);
    assert!(
        !status.stdout.contains("x: up to date") && status.stdout.contains("x[b]"),
        "{}",
        status.stdout
    );
    let after = test
        .with_args(&["run", "--no-progress", "pipeline.kdl"])
        .run()
        .code(1);
    assert!(after.stderr.contains("[x[b]]"), "{}", after.stderr);
}
