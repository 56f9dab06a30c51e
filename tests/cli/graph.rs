//! `helixflow graph`: the phase DAG as Graphviz dot, Mermaid and JSON.

use crate::common;

use common::Test;
use serde_json::json;

/// A diamond: `a` first, then `b` and `c` side by side, then `d`.
const DIAMOND: &str = r#"pipeline "diamond"
agent "bot" { command "bot" "{{ prompt }}"; }
defaults { agent "bot"; }
phase "a" { prompt "x"; }
phase "b" { depends-on "a"; prompt "x"; }
phase "c" { depends-on "a"; prompt "x"; }
phase "d" { depends-on "b" "c"; prompt "x"; }
"#;

#[test]
fn dot_is_the_default_format() {
    let test = Test::new().pipeline(DIAMOND);
    let default = test.with_args(&["graph", "pipeline.kdl"]).run().code(0);
    let dot = test
        .with_args(&["graph", "--format", "dot", "pipeline.kdl"])
        .run()
        .code(0);
    assert_eq!(default.stdout, dot.stdout);
    assert_eq!(dot.stderr, "");
    insta::assert_snapshot!("diamond-dot", dot.stdout);
}

#[test]
fn mermaid_is_a_flowchart() {
    let outcome = Test::new()
        .pipeline(DIAMOND)
        .args(&["graph", "--format", "mermaid", "pipeline.kdl"])
        .run()
        .code(0);
    assert_eq!(outcome.stderr, "");
    insta::assert_snapshot!("diamond-mermaid", outcome.stdout);
}

#[test]
fn json_has_phases_edges_and_levels() {
    let outcome = Test::new()
        .pipeline(DIAMOND)
        .args(&["graph", "--format", "json", "pipeline.kdl"])
        .run()
        .code(0);
    let graph = outcome.json();
    assert_eq!(graph["pipeline"], "diamond");
    assert_eq!(graph["levels"], json!([["a"], ["b", "c"], ["d"]]));
    assert_eq!(
        graph["phases"],
        json!([
            { "name": "a", "level": 0, "depends-on": [] },
            { "name": "b", "level": 1, "depends-on": ["a"] },
            { "name": "c", "level": 1, "depends-on": ["a"] },
            { "name": "d", "level": 2, "depends-on": ["b", "c"] },
        ])
    );
    assert_eq!(
        graph["edges"],
        json!([
            { "from": "a", "to": "b" },
            { "from": "a", "to": "c" },
            { "from": "b", "to": "d" },
            { "from": "c", "to": "d" },
        ])
    );
}

#[test]
fn levels_follow_the_longest_path_not_the_file_order() {
    // `late` is written first but depends on the end of a chain; `free` depends on nothing.
    let pipeline = r#"pipeline "p"
phase "late" { run "true"; depends-on "one" "two"; }
phase "two" { run "true"; depends-on "one"; }
phase "one" { run "true"; }
phase "free" { run "true"; }
"#;
    let outcome = Test::new()
        .pipeline(pipeline)
        .args(&["graph", "--format", "json", "pipeline.kdl"])
        .run()
        .code(0);
    assert_eq!(
        outcome.json()["levels"],
        json!([["one", "free"], ["two"], ["late"]])
    );
}

#[test]
fn names_with_quotes_and_backslashes_are_escaped() {
    let pipeline = r#"pipeline "say \"hi\""
phase "a \"quoted\" \\ name" { run "true"; }
phase "b" { run "true"; depends-on "a \"quoted\" \\ name"; }
"#;
    let test = Test::new().pipeline(pipeline);
    let dot = test
        .with_args(&["graph", "--format", "dot", "pipeline.kdl"])
        .run()
        .code(0);
    assert_eq!(
        dot.stdout,
        "digraph \"say \\\"hi\\\"\" {\n    rankdir=LR;\n    \"a \\\"quoted\\\" \\\\ name\";\n    \
         \"b\";\n    \"a \\\"quoted\\\" \\\\ name\" -> \"b\";\n}\n"
    );
    let mermaid = test
        .with_args(&["graph", "--format", "mermaid", "pipeline.kdl"])
        .run()
        .code(0);
    assert_eq!(
        mermaid.stdout,
        "flowchart LR\n    p0[\"a #quot;quoted#quot; \\ name\"]\n    p1[\"b\"]\n    p0 --> p1\n"
    );
    let json = test
        .with_args(&["graph", "--format", "json", "pipeline.kdl"])
        .run()
        .code(0);
    assert_eq!(
        json.json()["levels"],
        json!([["a \"quoted\" \\ name"], ["b"]])
    );
}

#[test]
fn warnings_do_not_stop_the_graph() {
    let pipeline =
        "pipeline \"p\"\nagent \"spare\" { command \"spare\"; }\nphase \"a\" { run \"true\"; }\n";
    let outcome = Test::new()
        .pipeline(pipeline)
        .args(&["graph", "--format", "json", "pipeline.kdl"])
        .run()
        .code(0);
    assert_eq!(outcome.json()["levels"], json!([["a"]]));
}

#[test]
fn invalid_pipeline_prints_diagnostics_on_stderr_and_exits_2() {
    let pipeline = r#"pipeline "p"
phase "a" { run "true"; depends-on "b"; }
phase "b" { run "true"; depends-on "a"; }
"#;
    for format in ["dot", "mermaid", "json"] {
        let outcome = Test::new()
            .pipeline(pipeline)
            .args(&["graph", "--format", format, "pipeline.kdl"])
            .run()
            .code(2);
        assert_eq!(outcome.stdout, "", "{format}");
        assert!(
            outcome.stderr.contains("HF206"),
            "{format}: {}",
            outcome.stderr
        );
        assert!(
            outcome.stderr.contains("dependency cycle: a → b → a"),
            "{format}: {}",
            outcome.stderr
        );
    }
    let outcome = Test::new()
        .pipeline(pipeline)
        .args(&["graph", "pipeline.kdl"])
        .run()
        .code(2);
    insta::assert_snapshot!("cycle-stderr", outcome.stderr_redacted());
}

#[test]
fn missing_file_and_bad_format_exit_2() {
    let missing = Test::new().args(&["graph", "missing.kdl"]).run().code(2);
    assert_eq!(missing.stdout, "");
    assert!(
        missing
            .stderr
            .starts_with("error: cannot read missing.kdl: "),
        "{}",
        missing.stderr
    );

    let bad = Test::new()
        .pipeline(DIAMOND)
        .args(&["graph", "--format", "svg", "pipeline.kdl"])
        .run()
        .code(2);
    assert_eq!(bad.stdout, "");
    assert!(
        bad.stderr.contains("[possible values: dot, mermaid, json]"),
        "{}",
        bad.stderr
    );
}

#[test]
fn without_a_file_graph_uses_the_nearest_pipeline_file() {
    let outcome = Test::new()
        .pipeline(DIAMOND)
        .dir("sub")
        .current_dir("sub")
        .args(&["graph", "--format", "json"])
        .run()
        .code(0);
    assert_eq!(outcome.json()["pipeline"], "diamond");
}
