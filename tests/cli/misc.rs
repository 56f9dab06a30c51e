//! `helixflow explain`, `compile`, `completions` and `--help`, and imports and templates as seen
//! through `lint` and `compile`.

use crate::common;

use common::Test;
use helixflow::ALL_RULES;
use serde_json::json;

// ---------------------------------------------------------------------------------------------
// explain

#[test]
fn explain_prints_the_code_what_it_catches_why_and_an_example() {
    let outcome = Test::new().args(&["explain", "HF101"]).run().code(0);
    assert_eq!(outcome.stderr, "");
    let text = &outcome.stdout;
    assert!(
        text.starts_with(
            "HF101 (unknown-node), error\n\nA node that the pipeline language does not define.\n\n"
        ),
        "{text}"
    );
    for expected in [
        "## What it catches\nA node name that the pipeline language does not define at all.\n",
        "## Why\nA misspelt node would otherwise be ignored silently",
        "## Example\n```kdl\nphase \"docs\" {\n    depend-on \"parser\"",
    ] {
        assert!(text.contains(expected), "{expected:?} missing from\n{text}");
    }

    // The whole text of a rule whose documentation has every part.
    let cycle = Test::new().args(&["explain", "HF206"]).run().code(0);
    insta::assert_snapshot!("explain-HF206", cycle.stdout);
}

#[test]
fn every_rule_is_explained_with_all_three_sections() {
    for rule in ALL_RULES {
        let outcome = Test::new().args(&["explain", rule.code]).run().code(0);
        let text = &outcome.stdout;
        let heading = format!(
            "{} ({}), {}\n\n{}\n",
            rule.code,
            rule.name,
            rule.severity.as_str(),
            rule.summary
        );
        assert!(text.starts_with(&heading), "{}:\n{text}", rule.code);
        let sections = ["## What it catches\n", "## Why\n", "## Example\n"];
        let positions: Vec<Option<usize>> = sections.iter().map(|s| text.find(s)).collect();
        assert!(
            positions.iter().all(Option::is_some) && positions.is_sorted(),
            "{}: sections missing or out of order:\n{text}",
            rule.code
        );
        assert!(
            text.ends_with(&format!("Help: {}\n", rule.help)),
            "{}:\n{text}",
            rule.code
        );
    }
}

#[test]
fn no_explanation_sends_the_reader_back_to_itself() {
    for rule in ALL_RULES {
        let outcome = Test::new().args(&["explain", rule.code]).run().code(0);
        assert!(
            !outcome
                .stdout
                .contains(&format!("helixflow explain {}", rule.code)),
            "{}:\n{}",
            rule.code,
            outcome.stdout
        );
    }
}

#[test]
fn explain_accepts_any_case_and_the_rule_name() {
    let test = Test::new();
    let canonical = test.with_args(&["explain", "HF101"]).run().code(0);
    for spelling in ["hf101", "Hf101", "unknown-node", "UNKNOWN-NODE"] {
        let outcome = test.with_args(&["explain", spelling]).run().code(0);
        assert_eq!(outcome.stdout, canonical.stdout, "{spelling}");
    }
}

#[test]
fn explain_list_lists_every_rule_in_order() {
    let outcome = Test::new().args(&["explain", "--list"]).run().code(0);
    let lines: Vec<&str> = outcome.stdout.lines().collect();
    assert_eq!(lines.len(), ALL_RULES.len(), "{}", outcome.stdout);
    for (line, rule) in lines.iter().zip(ALL_RULES) {
        assert!(line.starts_with(&format!("{}  ", rule.code)), "{line}");
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(words[1], rule.severity.as_str(), "{line}");
        assert_eq!(words[2], rule.name, "{line}");
        assert!(line.ends_with(rule.summary), "{line}");
    }
}

#[test]
fn unknown_code_exits_2_with_a_suggestion() {
    let close = Test::new().args(&["explain", "HF10"]).run().code(2);
    assert_eq!(close.stdout, "");
    assert_eq!(
        close.stderr,
        "error: unknown code `HF10`; did you mean `HF101`?\n"
    );

    let far = Test::new().args(&["explain", "HF999"]).run().code(2);
    assert_eq!(far.stdout, "");
    assert_eq!(
        far.stderr,
        "error: unknown code `HF999`; `helixflow explain --list` lists them all\n"
    );
}

#[test]
fn a_misspelt_rule_name_gets_a_suggestion() {
    let outcome = Test::new().args(&["explain", "unknow-node"]).run().code(2);
    assert_eq!(
        outcome.stderr,
        "error: unknown code `unknow-node`; did you mean `unknown-node`?\n"
    );
}

#[test]
fn explain_needs_a_code_or_list_but_not_both() {
    let none = Test::new().args(&["explain"]).run().code(2);
    assert!(none.stderr.contains("<CODE>"), "{}", none.stderr);
    let both = Test::new()
        .args(&["explain", "--list", "HF101"])
        .run()
        .code(2);
    assert!(
        both.stderr.contains("cannot be used with"),
        "{}",
        both.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// compile

#[test]
fn compile_prints_the_checked_model_as_json() {
    let pipeline = r#"pipeline "demo" {
    description "A demo"
    max-parallel 2
    retry-budget 3
    timeout "1h 30m"
    env "CI" "1"
    secret "TOKEN"
}
agent "bot" {
    command "bot" "{{ prompt }}"
    response "json"
    timeout "2m"
}
defaults {
    agent "bot"
    retries 1
}
phase "build" {
    prompt "Build it"
    outputs { file "out.txt"; glob "docs/*.md" min=2; }
    gates { command "make test" name="tests" timeout="5m"; changes; }
    verify "self" "external"
}
phase "ship" {
    depends-on "build"
    run "make ship"
    retries 0
    on-failure "continue"
}
"#;
    let outcome = Test::new()
        .pipeline(pipeline)
        .args(&["compile", "pipeline.kdl"])
        .run()
        .code(0);
    assert_eq!(outcome.stderr, "");
    let model = outcome.json();
    assert_eq!(model["name"], "demo");
    assert_eq!(model["description"], "A demo");
    assert_eq!(model["file"], "pipeline.kdl");
    assert_eq!(model["max-parallel"], 2);
    assert_eq!(model["retry-budget"], 3);
    assert_eq!(model["timeout-ms"], 5_400_000);
    assert_eq!(model["state-dir"], ".helixflow");
    assert_eq!(model["env"], json!({ "CI": "1" }));
    assert_eq!(model["secrets"], json!(["TOKEN"]));
    assert_eq!(
        model["agents"]["bot"],
        json!({
            "name": "bot",
            "file": "pipeline.kdl",
            "command": ["bot", "{{ prompt }}"],
            "stdin": false,
            "response": "json",
            "timeout-ms": 120_000,
            "env": {},
        })
    );
    let build = &model["phases"][0];
    assert_eq!(build["name"], "build");
    assert_eq!(build["worker"], json!({ "agent": "bot" }));
    assert_eq!(build["prompt"], json!({ "inline": "Build it" }));
    assert_eq!(build["retries"], 1);
    assert_eq!(build["verify"], json!(["self", "external"]));
    assert_eq!(
        build["outputs"],
        json!([
            { "kind": "file", "path": "out.txt" },
            { "kind": "glob", "pattern": "docs/*.md", "min": 2 },
        ])
    );
    assert_eq!(
        build["gates"],
        json!([
            { "name": "tests", "kind": "command", "run": "make test", "timeout-ms": 300_000 },
            { "name": "changes", "kind": "changes", "min": 1 },
        ])
    );
    let ship = &model["phases"][1];
    assert_eq!(ship["worker"], json!({ "run": "make ship" }));
    assert_eq!(ship["depends-on"], json!(["build"]));
    assert_eq!(ship["retries"], 0);
    assert_eq!(ship["on-failure"], "continue");
    assert_eq!(ship["verify"], json!(["external"]));
}

#[test]
fn compile_names_a_workspace_even_for_a_file_in_the_current_folder() {
    let outcome = Test::new()
        .pipeline("pipeline \"p\"\nphase \"a\" { run \"true\"; }\n")
        .args(&["compile", "pipeline.kdl"])
        .run()
        .code(0);
    let workspace = outcome.json()["workspace"].as_str().unwrap().to_owned();
    assert!(!workspace.is_empty(), "workspace is {workspace:?}");
}

#[test]
fn compile_of_an_invalid_pipeline_exits_2_with_diagnostics_on_stderr() {
    let outcome = Test::new()
        .pipeline("pipeline \"p\"\nphase \"a\" {\n    run \"true\"\n    depend-on \"b\"\n}\n")
        .args(&["compile", "pipeline.kdl"])
        .run()
        .code(2);
    assert_eq!(outcome.stdout, "");
    insta::assert_snapshot!("compile-invalid-stderr", outcome.stderr_redacted());
}

#[test]
fn compile_of_a_missing_file_exits_2() {
    let outcome = Test::new().args(&["compile", "missing.kdl"]).run().code(2);
    assert_eq!(outcome.stdout, "");
    assert!(
        outcome
            .stderr
            .starts_with("error: cannot read missing.kdl: "),
        "{}",
        outcome.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// completions and help

#[test]
fn completions_name_every_subcommand() {
    for shell in ["bash", "zsh", "fish"] {
        let outcome = Test::new().args(&["completions", shell]).run().code(0);
        assert!(outcome.stdout.len() > 1000, "{shell}: {}", outcome.stdout);
        for subcommand in [
            "lint",
            "graph",
            "fmt",
            "explain",
            "compile",
            "schema",
            "completions",
        ] {
            assert!(
                outcome.stdout.contains(subcommand),
                "{shell} completion does not mention {subcommand}"
            );
        }
        assert!(outcome.stdout.contains("stdin-filename"), "{shell}");
        assert!(outcome.stdout.contains("sarif"), "{shell}");
    }
}

#[test]
fn completions_for_an_unknown_shell_exit_2() {
    let outcome = Test::new().args(&["completions", "nushell"]).run().code(2);
    assert_eq!(outcome.stdout, "");
    assert!(
        outcome.stderr.contains("invalid value 'nushell'"),
        "{}",
        outcome.stderr
    );
}

#[test]
fn top_level_help_lists_the_subcommands_and_the_exit_codes() {
    let outcome = Test::new().args(&["--help"]).run().code(0);
    let help = &outcome.stdout;
    for subcommand in [
        "lint",
        "graph",
        "fmt",
        "explain",
        "compile",
        "schema",
        "completions",
    ] {
        assert!(
            help.lines()
                .any(|l| l.trim_start().starts_with(&format!("{subcommand} "))),
            "{subcommand} missing from\n{help}"
        );
    }
    let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains(
            "Exit codes: 0 success, 1 failure (lint: errors found), 2 invalid pipeline or bad \
             usage, 3 internal error, 130 interrupted."
        ),
        "{help}"
    );
    assert!(flat.contains("helixflow explain --list"), "{help}");
    assert!(flat.contains("Graphviz dot, Mermaid or JSON"), "{help}");
}

#[test]
fn top_level_help_names_the_lint_formats() {
    let outcome = Test::new().args(&["--help"]).run().code(0);
    for format in ["json", "github", "sarif"] {
        assert!(
            outcome.stdout.to_lowercase().contains(format),
            "{format} missing from\n{}",
            outcome.stdout
        );
    }
}

#[test]
fn lint_help_names_the_formats_and_the_exit_codes() {
    let outcome = Test::new().args(&["lint", "--help"]).run().code(0);
    let flat = outcome
        .stdout
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for expected in [
        "--format <FORMAT>",
        "- human:",
        "- json: A JSON array with one object per diagnostic",
        "- github: GitHub Actions workflow commands",
        "- sarif: SARIF 2.1.0",
        "[default: human]",
        "--stdin-filename <NAME>",
        "`-` reads standard input",
        "Exits 0 when there are no errors (warnings allowed), 1 when there are, 2 when a file \
         cannot be read.",
    ] {
        assert!(
            flat.contains(expected),
            "{expected:?} missing from\n{}",
            outcome.stdout
        );
    }
}

#[test]
fn version_and_missing_subcommand() {
    let version = Test::new().args(&["--version"]).run().code(0);
    assert_eq!(version.stdout_redacted(), "helixflow [VERSION]\n");
    let nothing = Test::new().run().code(2);
    assert_eq!(nothing.stdout, "");
    assert!(
        nothing.stderr.contains("Usage: helixflow <COMMAND>"),
        "{}",
        nothing.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// imports

/// An agent library with a misspelt `timeout` on its line 4.
const BAD_AGENTS: &str = "// shared agents\nagent \"bot\" {\n    command \"bot\" \"{{ prompt_file }}\"\n    timout \"5m\"\n}\n";

/// A pipeline that imports `lib/agents.kdl` and uses its agent.
const USES_AGENTS: &str =
    "pipeline \"p\"\nimport \"lib/agents.kdl\"\nphase \"a\" { agent \"bot\"; prompt \"hi\"; }\n";

#[test]
fn findings_in_an_imported_file_name_that_file_and_point_into_it() {
    let test = Test::new()
        .file("lib/agents.kdl", BAD_AGENTS)
        .pipeline(USES_AGENTS);
    let json = test
        .with_args(&["lint", "--format", "json", "pipeline.kdl"])
        .run()
        .code(1);
    let found = &json.json()[0];
    assert_eq!(json.codes(), ["HF101"]);
    assert_eq!(found["file"], "lib/agents.kdl");
    assert_eq!(found["offset"], BAD_AGENTS.find("timout").unwrap());
    assert_eq!(found["length"], 6);
    assert_eq!([&found["line"], &found["column"]], [4, 5]);
    assert_eq!([&found["end_line"], &found["end_column"]], [4, 11]);
    assert_eq!(found["help"], "did you mean `timeout`?");

    let human = test.with_args(&["lint", "pipeline.kdl"]).run().code(1);
    insta::assert_snapshot!("imported-file-finding", human.stdout_redacted());

    // compile refuses it too, pointing at the same place.
    let compile = test.with_args(&["compile", "pipeline.kdl"]).run().code(2);
    assert!(
        compile.stderr.contains("[lib/agents.kdl:4:5]"),
        "{}",
        compile.stderr
    );
}

#[test]
fn imports_are_found_on_helixflow_path() {
    let pipeline =
        "pipeline \"p\"\nimport \"agents.kdl\"\nphase \"a\" { agent \"bot\"; prompt \"hi\"; }\n";
    let test = Test::new()
        .file(
            "shared/agents.kdl",
            "agent \"bot\" { command \"bot\" \"{{ prompt_file }}\"; }\n",
        )
        .dir("empty")
        .pipeline(pipeline);
    let missing = test
        .with_args(&["lint", "--format", "json", "pipeline.kdl"])
        .run()
        .code(1);
    assert_eq!(missing.codes(), ["HF503", "HF203"]);
    assert_eq!(
        missing.json()[0]["message"],
        "cannot find import \"agents.kdl\""
    );
    assert_eq!(
        [&missing.json()[0]["line"], &missing.json()[0]["column"]],
        [2, 8]
    );

    // Every folder of the path is searched, in order.
    let path = format!(
        "{}:{}",
        test.path().join("empty").display(),
        test.path().join("shared").display()
    );
    let found = test
        .with_args(&["lint", "pipeline.kdl"])
        .env("HELIXFLOW_PATH", &path)
        .run()
        .code(0);
    assert_eq!(found.stdout, "1 file checked: no problems found\n");

    let compiled = test
        .with_args(&["compile", "pipeline.kdl"])
        .env("HELIXFLOW_PATH", &path)
        .run()
        .code(0);
    let model = compiled.json();
    let imports: Vec<String> = model["imports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| common::redact(i.as_str().unwrap(), test.path()))
        .collect();
    assert_eq!(imports, ["[TMP]/shared/agents.kdl"]);
}

#[test]
fn import_not_found_lists_the_folders_searched() {
    let test = Test::new().file(
        "ci/pipeline.kdl",
        "pipeline \"p\"\nimport \"nope.kdl\"\nphase \"a\" { run \"true\"; }\n",
    );
    let path = test.path().join("shared").display().to_string();
    let outcome = test
        .with_args(&["lint", "--format", "json", "ci/pipeline.kdl"])
        .env("HELIXFLOW_PATH", &path)
        .run()
        .code(1);
    assert_eq!(outcome.codes(), ["HF503"]);
    assert_eq!(
        common::redact(outcome.json()[0]["help"].as_str().unwrap(), test.path()),
        "searched: ci, [TMP]/shared (set HELIXFLOW_PATH to add folders)"
    );
}

#[test]
fn import_not_found_names_the_current_folder_when_the_file_has_no_folder_part() {
    let outcome = Test::new()
        .pipeline("pipeline \"p\"\nimport \"nope.kdl\"\nphase \"a\" { run \"true\"; }\n")
        .args(&["lint", "--format", "json", "pipeline.kdl"])
        .run()
        .code(1);
    let help = outcome.json()[0]["help"].as_str().unwrap().to_owned();
    assert!(!help.starts_with("searched:  "), "{help}");
    assert!(!help.starts_with("searched: ,"), "{help}");
}

#[test]
fn a_local_import_wins_over_helixflow_path() {
    let test = Test::new()
        .file("agents.kdl", "agent \"bot\" { command \"local\"; }\n")
        .file("shared/agents.kdl", "agent \"bot\" { command \"shared\"; }\n")
        .pipeline("pipeline \"p\"\nimport \"agents.kdl\"\nphase \"a\" { agent \"bot\"; prompt \"hi\"; }\n");
    let shared = test.path().join("shared").display().to_string();
    let outcome = test
        .with_args(&["compile", "pipeline.kdl"])
        .env("HELIXFLOW_PATH", &shared)
        .run()
        .code(0);
    assert_eq!(outcome.json()["agents"]["bot"]["command"], json!(["local"]));
}

#[test]
fn imports_are_relative_to_the_importing_file() {
    // lib/all.kdl imports `agents.kdl` from its own folder, not from the pipeline's.
    let outcome = Test::new()
        .file("lib/all.kdl", "import \"agents.kdl\"\n")
        .file("lib/agents.kdl", "agent \"bot\" { command \"bot\"; }\n")
        .pipeline("pipeline \"p\"\nimport \"lib/all.kdl\"\nphase \"a\" { agent \"bot\"; prompt \"hi\"; }\n")
        .args(&["compile", "pipeline.kdl"])
        .run()
        .code(0);
    assert_eq!(
        outcome.json()["imports"],
        json!(["lib/all.kdl", "lib/agents.kdl"])
    );
}

#[test]
fn an_import_cycle_is_reported_at_the_import_that_closes_it() {
    let outcome = Test::new()
        .file(
            "lib/a.kdl",
            "import \"b.kdl\"\nagent \"x\" { command \"x\"; }\n",
        )
        .file("lib/b.kdl", "import \"a.kdl\"\n")
        .pipeline(
            "pipeline \"p\"\nimport \"lib/a.kdl\"\nphase \"a\" { agent \"x\"; prompt \"hi\"; }\n",
        )
        .args(&["lint", "--format", "json", "pipeline.kdl"])
        .run()
        .code(1);
    assert_eq!(outcome.codes(), ["HF504"]);
    let found = &outcome.json()[0];
    assert_eq!(
        found["message"],
        "import cycle: lib/a.kdl → lib/b.kdl → lib/a.kdl"
    );
    assert_eq!(found["file"], "lib/b.kdl");
    assert_eq!([&found["line"], &found["column"]], [1, 8]);
    assert_eq!(found["length"], "\"a.kdl\"".len());
}

#[test]
fn an_import_of_the_pipeline_file_itself_is_a_cycle() {
    let test = Test::new()
        .file("lib/back.kdl", "import \"../pipeline.kdl\"\nagent \"x\" { command \"x\"; }\n")
        .pipeline("pipeline \"p\"\nimport \"lib/back.kdl\"\nphase \"a\" { agent \"x\"; prompt \"hi\"; }\n");
    let outcome = test
        .with_args(&["lint", "--format", "json", "pipeline.kdl"])
        .run()
        .code(1);
    assert_eq!(outcome.codes(), ["HF504"]);
    assert_eq!(
        outcome.json()[0]["message"],
        "import cycle: pipeline.kdl → lib/back.kdl → pipeline.kdl"
    );
}

#[test]
fn an_import_cycle_is_found_whatever_the_spelling_of_the_pipeline_path() {
    let test = Test::new()
        .file("lib/back.kdl", "import \"../pipeline.kdl\"\nagent \"x\" { command \"x\"; }\n")
        .pipeline("pipeline \"p\"\nimport \"lib/back.kdl\"\nphase \"a\" { agent \"x\"; prompt \"hi\"; }\n");
    let outcome = test
        .with_args(&["lint", "--format", "json", "./pipeline.kdl"])
        .run()
        .code(1);
    assert_eq!(outcome.codes(), ["HF504"]);
}

// ---------------------------------------------------------------------------------------------
// templates

/// A shared library: an agent and a template with a required and a defaulted parameter.
const PYTHON_LIBRARY: &str = r#"agent "claude" { command "claude" "-p" "{{ prompt_file }}"; }
template "python-module" {
    param "module"
    param "tests" default="tests"
    prompt "Implement {{ module }} with tests under {{ tests }}. {{ feedback }}"
    outputs {
        file "src/{{ module }}.py"
        file "{{ tests }}/test_{{ module | replace(\"/\", \"_\") }}.py"
    }
    scope "src/**"
    gates {
        syntax
        command "pytest -q {{ tests }}" name="tests"
    }
    retries 5
    verify "external"
}
"#;

/// Uses the template three ways: with its own children, with defaults only, with every parameter.
const USES_TEMPLATE: &str = r#"pipeline "p"
import "python.kdl"
defaults {
    agent "claude"
    retries 1
    timeout "10m"
}
phase "parser" { run "make parser"; }
phase "lexer" use="python-module" module="adr/lexer" {
    depends-on "parser"
    outputs { file "docs/lexer.md"; }
    scope "docs/**"
    gates { absent "src/**" "TODO" name="no-todo"; }
    verify "self"
    retries 3
}
phase "other" use="python-module" module="x" tests="t" {
    depends-on "lexer"
}
"#;

#[test]
fn a_template_from_a_library_on_helixflow_path_is_expanded() {
    let test = Test::new()
        .file("shared/python.kdl", PYTHON_LIBRARY)
        .pipeline(USES_TEMPLATE);
    let shared = test.path().join("shared").display().to_string();
    let lint = test
        .with_args(&["lint", "pipeline.kdl"])
        .env("HELIXFLOW_PATH", &shared)
        .run()
        .code(0);
    assert_eq!(lint.stdout, "1 file checked: no problems found\n");

    let outcome = test
        .with_args(&["compile", "pipeline.kdl"])
        .env("HELIXFLOW_PATH", &shared)
        .run()
        .code(0);
    let model = outcome.json();
    let phases = model["phases"].as_array().unwrap();
    let (parser, lexer, other) = (&phases[0], &phases[1], &phases[2]);

    // A phase without a template gets the defaults.
    assert_eq!(parser["retries"], 1);
    assert_eq!(parser["timeout-ms"], 600_000);

    assert_eq!(lexer["template"], "python-module");
    // Defaults fill what neither the template nor the phase sets.
    assert_eq!(lexer["worker"], json!({ "agent": "claude" }));
    assert_eq!(lexer["timeout-ms"], 600_000);
    // Parameters are substituted, filters included; run-time variables are left alone.
    assert_eq!(
        lexer["prompt"],
        json!({ "inline": "Implement adr/lexer with tests under tests. {{ feedback }}" })
    );
    assert_eq!(
        lexer["vars"],
        json!({ "module": "adr/lexer", "tests": "tests" })
    );
    // Lists: the template's first, then the phase's own.
    assert_eq!(
        lexer["outputs"],
        json!([
            { "kind": "file", "path": "src/adr/lexer.py" },
            { "kind": "file", "path": "tests/test_adr_lexer.py" },
            { "kind": "file", "path": "docs/lexer.md" },
        ])
    );
    assert_eq!(lexer["scope"], json!(["src/**", "docs/**"]));
    assert_eq!(
        lexer["gates"],
        json!([
            { "name": "syntax", "kind": "syntax", "globs": [] },
            { "name": "tests", "kind": "command", "run": "pytest -q tests" },
            { "name": "no-todo", "kind": "absent", "target": "src/**", "pattern": "TODO" },
        ])
    );
    assert_eq!(lexer["depends-on"], json!(["parser"]));
    // Single values: the phase's own win over the template's, which win over the defaults.
    assert_eq!(lexer["verify"], json!(["self"]));
    assert_eq!(lexer["retries"], 3);
    assert_eq!(other["retries"], 5);

    assert_eq!(other["vars"], json!({ "module": "x", "tests": "t" }));
    assert_eq!(
        other["outputs"],
        json!([
            { "kind": "file", "path": "src/x.py" },
            { "kind": "file", "path": "t/test_x.py" },
        ])
    );
    assert_eq!(other["gates"][1]["run"], "pytest -q t");
    assert_eq!(other["verify"], json!(["external"]));
}

#[test]
fn missing_and_unknown_template_parameters_point_at_the_phase_and_the_template() {
    let test = Test::new().file("python.kdl", PYTHON_LIBRARY).pipeline(
        "pipeline \"p\"\nimport \"python.kdl\"\nphase \"a\" use=\"python-module\" modul=\"x\" { agent \"claude\"; }\n",
    );
    let outcome = test
        .with_args(&["lint", "--format", "json", "pipeline.kdl"])
        .run()
        .code(1);
    let report = outcome.json();
    assert_eq!(outcome.codes(), ["HF501", "HF502"]);

    let missing = &report[0];
    assert_eq!(
        missing["message"],
        "template \"python-module\" needs the parameter `module`"
    );
    assert_eq!([&missing["line"], &missing["column"]], [3, 15]);
    assert_eq!(missing["notes"][0]["file"], "python.kdl");
    assert_eq!(
        [&missing["notes"][0]["line"], &missing["notes"][0]["column"]],
        [3, 11]
    );

    let unknown = &report[1];
    assert_eq!(
        unknown["message"],
        "template \"python-module\" has no parameter `modul`"
    );
    assert_eq!([&unknown["line"], &unknown["column"]], [3, 31]);
    assert_eq!(unknown["length"], 5);
    assert_eq!(unknown["help"], "did you mean `module`?");
    assert_eq!(unknown["fix"]["edits"][0]["text"], "module");
    assert_eq!(unknown["notes"][0]["file"], "python.kdl");

    let human = test.with_args(&["lint", "pipeline.kdl"]).run().code(1);
    insta::assert_snapshot!("template-parameters", human.stdout_redacted());
}

#[test]
fn a_mistake_inside_a_template_is_reported_once_in_the_library() {
    let library = "template \"t\" {\n    param \"m\"\n    run \"make {{ m }}\"\n    timeout \"5 parsecs\"\n}\n";
    let outcome = Test::new()
        .file("lib/make.kdl", library)
        .pipeline(
            "pipeline \"p\"\nimport \"lib/make.kdl\"\nphase \"a\" use=\"t\" m=\"x\"\nphase \"b\" use=\"t\" m=\"y\"\n",
        )
        .args(&["lint", "--format", "json", "pipeline.kdl"])
        .run()
        .code(1);
    assert_eq!(outcome.codes(), ["HF301"]);
    let found = &outcome.json()[0];
    assert_eq!(found["file"], "lib/make.kdl");
    assert_eq!([&found["line"], &found["column"]], [4, 13]);
    assert_eq!(found["length"], "\"5 parsecs\"".len());
}

// ---------------------------------------------------------------------------------------------
// failures

/// A command that cannot do its work says so once, on one `error:` line (or with the pipeline's
/// diagnostics), and exits with the code the README gives for its kind.
#[test]
fn a_failing_command_says_why_once_with_its_documented_exit_code() {
    let cases: [(&[&str], i32, &str); 4] = [
        (&["explain", "HF9999"], 2, "error: unknown code `HF9999`"),
        (
            &["show", "no-such-run"],
            2,
            "error: cannot read ./.helixflow/runs",
        ),
        (&["bundle", "show", "missing.bundle"], 2, "error: "),
        (
            &["run", "--no-progress"],
            3,
            "error: cannot lock the state folder",
        ),
    ];
    for (args, code, start) in cases {
        let test = Test::new()
            .pipeline("pipeline \"p\"\nphase \"a\" {\n    run \"true\"\n}\n")
            .file(".helixflow", "");
        let outcome = test.with_args(args).run().code(code);
        let errors: Vec<&str> = outcome
            .stderr
            .lines()
            .filter(|line| line.starts_with("error"))
            .collect();
        assert_eq!(errors.len(), 1, "{args:?}:\n{}", outcome.stderr);
        assert!(
            errors[0].starts_with(start),
            "{args:?}:\n{}",
            outcome.stderr
        );
        assert_eq!(outcome.stdout, "", "{args:?}");
    }
    // An invalid pipeline: its diagnostics, and exit 2, for every command that reads it.
    for command in ["run", "check", "compile", "status", "graph"] {
        let outcome = Test::new()
            .pipeline("pipeline \"p\"\nphase \"a\" {\n    runn \"true\"\n}\n")
            .with_args(&[command])
            .run()
            .code(2);
        assert!(
            outcome.stderr.contains("HF101"),
            "{command}:\n{}",
            outcome.stderr
        );
        assert_eq!(outcome.stdout, "", "{command}");
    }
}
