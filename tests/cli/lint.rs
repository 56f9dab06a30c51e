//! `helixflow lint` as users run it: exit codes, several files, standard input, file discovery,
//! and the four output formats.

use crate::common;

use common::Test;
use serde_json::json;

/// A valid pipeline with nothing to report.
const CLEAN: &str = "pipeline \"p\"\nphase \"a\" {\n    run \"true\"\n}\n";

/// A valid pipeline whose only finding is a warning (an agent nobody uses).
const WARNING_ONLY: &str =
    "pipeline \"p\"\nagent \"spare\" { command \"spare\"; }\nphase \"a\" {\n    run \"true\"\n}\n";

/// A pipeline with one error: a misspelt `depends-on`.
const ONE_ERROR: &str = "pipeline \"p\"\nphase \"a\" {\n    run \"true\"\n    depend-on \"b\"\n}\n";

/// Non-ASCII text before the findings: on the lines above (byte offsets grow faster than
/// characters) and on the finding's own line (byte columns would differ from character columns).
const NON_ASCII: &str = "pipeline \"démo\"\n// Größe: ü\nagent \"ünused\" { command \"x\"; }\nphase \"é\" { run \"true\"; depend-on \"x\"; }\n";

// ---------------------------------------------------------------------------------------------
// exit codes

#[test]
fn clean_file_exits_0_and_says_so() {
    let outcome = Test::new()
        .pipeline(CLEAN)
        .args(&["lint", "pipeline.kdl"])
        .run()
        .code(0);
    assert_eq!(outcome.stdout, "1 file checked: no problems found\n");
    assert_eq!(outcome.stderr, "");
}

#[test]
fn warnings_alone_exit_0() {
    let test = Test::new().pipeline(WARNING_ONLY);
    let human = test.with_args(&["lint", "pipeline.kdl"]).run().code(0);
    assert!(
        human.stdout.contains("agent \"spare\" is never used"),
        "{}",
        human.stdout
    );
    assert!(human.stdout.ends_with("\n1 warning\n"), "{}", human.stdout);
    assert!(
        !human.stdout.contains("no problems found"),
        "{}",
        human.stdout
    );

    let json = test
        .with_args(&["lint", "--format", "json", "pipeline.kdl"])
        .run()
        .code(0);
    assert_eq!(json.codes(), ["HF604"]);
    assert_eq!(json.json()[0]["severity"], "warning");
}

#[test]
fn errors_exit_1() {
    let outcome = Test::new()
        .pipeline(ONE_ERROR)
        .args(&["lint", "--format", "json", "pipeline.kdl"])
        .run()
        .code(1);
    assert_eq!(outcome.codes(), ["HF101"]);
    assert_eq!(outcome.json()[0]["severity"], "error");
    assert_eq!(outcome.stderr, "");
}

#[test]
fn missing_file_exits_2_and_names_it() {
    let outcome = Test::new().args(&["lint", "missing.kdl"]).run().code(2);
    assert_eq!(outcome.stdout, "");
    assert!(
        outcome
            .stderr
            .starts_with("error: cannot read missing.kdl: No such file or directory"),
        "{}",
        outcome.stderr
    );
}

#[test]
fn non_utf8_file_exits_2_and_names_it() {
    let outcome = Test::new()
        .file_bytes("pipeline.kdl", b"pipeline \"p\"\n// \xff\xfe\n")
        .args(&["lint", "pipeline.kdl"])
        .run()
        .code(2);
    assert_eq!(outcome.stdout, "");
    assert_eq!(outcome.stderr, "error: pipeline.kdl is not valid UTF-8\n");
}

#[test]
fn unreadable_file_exits_2() {
    // A folder cannot be read as a file, whoever runs the test (root ignores permission bits).
    let outcome = Test::new()
        .dir("folder.kdl")
        .args(&["lint", "folder.kdl"])
        .run()
        .code(2);
    assert_eq!(outcome.stdout, "");
    assert!(
        outcome
            .stderr
            .starts_with("error: cannot read folder.kdl: "),
        "{}",
        outcome.stderr
    );
}

#[test]
fn bad_flag_exits_2_with_usage() {
    let outcome = Test::new()
        .pipeline(CLEAN)
        .args(&["lint", "--bogus", "pipeline.kdl"])
        .run()
        .code(2);
    assert_eq!(outcome.stdout, "");
    assert!(
        outcome
            .stderr
            .contains("unexpected argument '--bogus' found"),
        "{}",
        outcome.stderr
    );
    assert!(
        outcome.stderr.contains("Usage: helixflow lint"),
        "{}",
        outcome.stderr
    );
}

#[test]
fn unknown_format_exits_2_and_lists_the_formats() {
    let outcome = Test::new()
        .pipeline(CLEAN)
        .args(&["lint", "--format", "xml", "pipeline.kdl"])
        .run()
        .code(2);
    assert_eq!(outcome.stdout, "");
    assert!(
        outcome
            .stderr
            .contains("invalid value 'xml' for '--format <FORMAT>'"),
        "{}",
        outcome.stderr
    );
    assert!(
        outcome
            .stderr
            .contains("[possible values: human, json, github, sarif]"),
        "{}",
        outcome.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// several files

#[test]
fn several_files_report_every_finding_and_exit_with_the_worst() {
    let test = Test::new()
        .file("clean.kdl", CLEAN)
        .file("warn.kdl", WARNING_ONLY)
        .file("error.kdl", ONE_ERROR);

    let both = test
        .with_args(&["lint", "--format", "json", "error.kdl", "warn.kdl"])
        .run()
        .code(1);
    let report = both.json();
    let found: Vec<(&str, &str)> = report
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["file"].as_str().unwrap(), d["code"].as_str().unwrap()))
        .collect();
    assert_eq!(found, [("error.kdl", "HF101"), ("warn.kdl", "HF604")]);

    let human = test
        .with_args(&["lint", "error.kdl", "warn.kdl"])
        .run()
        .code(1);
    assert!(human.stdout.contains("[error.kdl:4:5]"), "{}", human.stdout);
    assert!(human.stdout.contains("[warn.kdl:2:7]"), "{}", human.stdout);
    assert!(
        human.stdout.ends_with("\n1 error, 1 warning\n"),
        "{}",
        human.stdout
    );

    test.with_args(&["lint", "clean.kdl", "warn.kdl"])
        .run()
        .code(0);
    let clean = test
        .with_args(&["lint", "clean.kdl", "clean.kdl"])
        .run()
        .code(0);
    assert_eq!(clean.stdout, "2 files checked: no problems found\n");
}

#[test]
fn an_unreadable_file_among_several_exits_2_but_the_others_are_still_checked() {
    let outcome = Test::new()
        .file("error.kdl", ONE_ERROR)
        .args(&["lint", "--format", "json", "missing.kdl", "error.kdl"])
        .run()
        .code(2);
    assert_eq!(outcome.codes(), ["HF101"]);
    assert!(
        outcome
            .stderr
            .starts_with("error: cannot read missing.kdl: "),
        "{}",
        outcome.stderr
    );
}

#[test]
fn a_library_shared_by_two_files_reports_its_findings_once() {
    let library =
        "agent \"bot\" {\n    command \"bot\" \"{{ prompt_file }}\"\n    timout \"5m\"\n}\n";
    let user = |name: &str| {
        format!(
            "pipeline \"{name}\"\nimport \"lib/agents.kdl\"\nphase \"a\" {{ agent \"bot\"; prompt \"hi\"; }}\n"
        )
    };
    let outcome = Test::new()
        .file("lib/agents.kdl", library)
        .file("one.kdl", &user("one"))
        .file("two.kdl", &user("two"))
        .args(&["lint", "--format", "github", "one.kdl", "two.kdl"])
        .run()
        .code(1);
    assert_eq!(
        outcome.stdout,
        "::error file=lib/agents.kdl,line=3,col=5,endLine=3,endColumn=11,title=HF101::\
         unknown node `timout` in `agent`%0Ahelp: did you mean `timeout`?\n"
    );
}

/// A library for `import` is linted as a library: its agents, templates and imports are checked
/// as a pipeline importing it would check them, and it is not asked for a `pipeline`.
#[test]
fn a_library_is_checked_as_a_library() {
    let library = "import \"more.kdl\"\n\
                   agent \"bot\" {\n    command \"bot\"\n    timeout \"5 parsecs\"\n}\n\
                   template \"t\" {\n    run \"x\"\n}\n\
                   template \"t\" {\n    run \"y\"\n}\n";
    let test = Test::new().file("lib.kdl", library);
    let linted = test
        .with_args(&["lint", "--format", "json", "lib.kdl"])
        .run()
        .code(1);
    assert_eq!(linted.codes(), ["HF503", "HF301", "HF201"]);
    // A command that runs the file needs a pipeline, and says the file is a library.
    let run = test.with_args(&["run", "lib.kdl"]).run().code(2);
    assert!(
        run.stderr.contains("HF120") && run.stderr.contains("it is a library for `import`"),
        "{}",
        run.stderr
    );
    // Phases without a pipeline are a pipeline that lacks its `pipeline` node, not a library.
    let phases = Test::new()
        .file(
            "lib.kdl",
            "agent \"bot\" {\n    command \"bot\"\n}\nphase \"a\" {\n    agent \"bot\"\n}\n",
        )
        .args(&["lint", "--format", "json", "lib.kdl"])
        .run()
        .code(1);
    assert_eq!(phases.codes(), ["HF120"]);
}

#[test]
fn an_unknown_default_agent_is_reported_once() {
    let outcome = Test::new()
        .pipeline(
            "pipeline \"p\"\ndefaults { agent \"nope\"; }\nphase \"a\" { prompt \"x\"; }\nphase \"b\" { prompt \"y\"; }\n",
        )
        .args(&["lint", "--format", "json", "pipeline.kdl"])
        .run()
        .code(1);
    assert_eq!(outcome.codes(), ["HF203"]);
}

// ---------------------------------------------------------------------------------------------
// standard input

#[test]
fn dash_reads_standard_input_named_stdin() {
    let outcome = Test::new()
        .stdin(ONE_ERROR)
        .args(&["lint", "--format", "json", "-"])
        .run()
        .code(1);
    assert_eq!(outcome.codes(), ["HF101"]);
    assert_eq!(outcome.json()[0]["file"], "<stdin>");

    let clean = Test::new().stdin(CLEAN).args(&["lint", "-"]).run().code(0);
    assert_eq!(clean.stdout, "1 file checked: no problems found\n");
}

#[test]
fn stdin_filename_names_standard_input_in_every_format() {
    let test = Test::new().stdin(ONE_ERROR);
    let human = test
        .with_args(&["lint", "--stdin-filename", "ci/pipeline.kdl", "-"])
        .run()
        .code(1);
    assert!(
        human.stdout.contains("[ci/pipeline.kdl:4:5]"),
        "{}",
        human.stdout
    );
    assert!(!human.stdout.contains("<stdin>"), "{}", human.stdout);

    let json = test
        .with_args(&[
            "lint",
            "--format",
            "json",
            "--stdin-filename",
            "ci/pipeline.kdl",
            "-",
        ])
        .run()
        .code(1);
    assert_eq!(json.json()[0]["file"], "ci/pipeline.kdl");
    assert_eq!(json.json()[0]["fix"]["edits"][0]["file"], "ci/pipeline.kdl");

    let github = test
        .with_args(&[
            "lint",
            "--format",
            "github",
            "--stdin-filename",
            "ci/pipeline.kdl",
            "-",
        ])
        .run()
        .code(1);
    assert!(
        github
            .stdout
            .starts_with("::error file=ci/pipeline.kdl,line=4,col=5,"),
        "{}",
        github.stdout
    );
}

#[test]
fn stdin_filename_resolves_relative_imports_from_its_folder() {
    let pipeline =
        "pipeline \"p\"\nimport \"agents.kdl\"\nphase \"a\" { agent \"bot\"; prompt \"hi\"; }\n";
    let test = Test::new()
        .file(
            "sub/agents.kdl",
            "agent \"bot\" { command \"bot\" \"{{ prompt_file }}\"; }\n",
        )
        .stdin(pipeline);
    let named = test
        .with_args(&["lint", "--stdin-filename", "sub/pipeline.kdl", "-"])
        .run()
        .code(0);
    assert_eq!(named.stdout, "1 file checked: no problems found\n");

    // Without the name, the import is looked for in the current folder, where it is not.
    let unnamed = test
        .with_args(&["lint", "--format", "json", "-"])
        .run()
        .code(1);
    assert_eq!(unnamed.codes(), ["HF503", "HF203"]);
}

#[test]
fn non_utf8_standard_input_exits_2() {
    let outcome = Test::new()
        .stdin_bytes(b"pipeline \"\xff\"\n")
        .args(&["lint", "-"])
        .run()
        .code(2);
    assert_eq!(outcome.stdout, "");
    assert_eq!(outcome.stderr, "error: standard input is not valid UTF-8\n");
}

// ---------------------------------------------------------------------------------------------
// finding the pipeline file

#[test]
fn without_a_file_lint_finds_pipeline_kdl_in_a_parent_folder() {
    let outcome = Test::new()
        .pipeline(ONE_ERROR)
        .dir("a/b")
        .current_dir("a/b")
        .args(&["lint"])
        .run()
        .code(1);
    let stdout = outcome.stdout_redacted();
    assert!(stdout.contains("pipeline.kdl:4:5]"), "{stdout}");
    assert!(stdout.contains("depend-on \"b\""), "{stdout}");
}

#[test]
fn without_a_file_lint_finds_helixflow_kdl_in_the_current_folder() {
    let outcome = Test::new()
        .file("helixflow.kdl", ONE_ERROR)
        .args(&["lint", "--format", "json"])
        .run()
        .code(1);
    assert_eq!(outcome.codes(), ["HF101"]);
    let file = outcome.json()[0]["file"].as_str().unwrap().to_owned();
    assert!(file.ends_with("helixflow.kdl"), "{file}");
}

#[test]
fn the_nearest_folder_with_a_pipeline_file_wins() {
    let outcome = Test::new()
        .file("helixflow.kdl", ONE_ERROR)
        .file("sub/pipeline.kdl", CLEAN)
        .current_dir("sub")
        .args(&["lint"])
        .run()
        .code(0);
    assert_eq!(outcome.stdout, "1 file checked: no problems found\n");
}

#[test]
fn a_discovered_pipeline_file_in_the_current_folder_is_reported_by_a_relative_path() {
    let outcome = Test::new()
        .pipeline(ONE_ERROR)
        .args(&["lint", "--format", "github"])
        .run()
        .code(1);
    assert!(
        outcome
            .stdout
            .starts_with("::error file=pipeline.kdl,line=4,col=5,"),
        "{}",
        outcome.stdout
    );
}

#[test]
fn without_a_file_and_without_a_pipeline_file_lint_exits_2_and_says_why() {
    let outcome = Test::new()
        .file("notes.kdl", CLEAN)
        .args(&["lint"])
        .run()
        .code(2);
    assert_eq!(outcome.stdout, "");
    assert_eq!(
        outcome.stderr,
        "error: no pipeline file given, and no helixflow.kdl or pipeline.kdl in this folder or a \
         parent\n"
    );
}

// ---------------------------------------------------------------------------------------------
// formats

#[test]
fn json_reports_byte_offsets_and_character_columns() {
    let outcome = Test::new()
        .pipeline(NON_ASCII)
        .args(&["lint", "--format", "json", "pipeline.kdl"])
        .run()
        .code(1);
    // The literal offsets below, checked against the text: bytes, not characters.
    assert_eq!(NON_ASCII.find("\"ünused\""), Some(38));
    assert_eq!(NON_ASCII.find("depend-on"), Some(90));
    assert_eq!(
        outcome.json(),
        json!([
            {
                "code": "HF604",
                "name": "unused-agent",
                "severity": "warning",
                "message": "agent \"ünused\" is never used",
                "file": "pipeline.kdl",
                // `"ünused"` is 8 characters but 9 bytes.
                "offset": 38,
                "length": 9,
                "line": 3,
                "column": 7,
                "end_line": 3,
                "end_column": 15,
                "label": "unused",
                "help": "Remove the agent, or use it from a phase.",
                "notes": [],
                "fix": null,
            },
            {
                "code": "HF101",
                "name": "unknown-node",
                "severity": "error",
                "message": "unknown node `depend-on` in `phase`",
                "file": "pipeline.kdl",
                "offset": 90,
                "length": 9,
                "line": 4,
                // `é` comes before it on its line: 25 characters in, 26 bytes.
                "column": 25,
                "end_line": 4,
                "end_column": 34,
                "label": "unknown node",
                "help": "did you mean `depends-on`?",
                "notes": [],
                "fix": {
                    "title": "rename to `depends-on`",
                    "edits": [{
                        "file": "pipeline.kdl",
                        "offset": 90,
                        "length": 9,
                        "line": 4,
                        "column": 25,
                        "end_line": 4,
                        "end_column": 34,
                        "text": "depends-on",
                    }],
                },
            },
        ])
    );
}

#[test]
fn json_of_a_clean_file_is_an_empty_array() {
    let outcome = Test::new()
        .pipeline(CLEAN)
        .args(&["lint", "--format", "json", "pipeline.kdl"])
        .run()
        .code(0);
    assert_eq!(outcome.json(), json!([]));
}

#[test]
fn github_prints_one_workflow_command_per_finding() {
    let outcome = Test::new()
        .pipeline(NON_ASCII)
        .args(&["lint", "--format", "github", "pipeline.kdl"])
        .run()
        .code(1);
    assert_eq!(
        outcome.stdout,
        "::warning file=pipeline.kdl,line=3,col=7,endLine=3,endColumn=15,title=HF604::\
         agent \"ünused\" is never used%0Ahelp: Remove the agent, or use it from a phase.\n\
         ::error file=pipeline.kdl,line=4,col=25,endLine=4,endColumn=34,title=HF101::\
         unknown node `depend-on` in `phase`%0Ahelp: did you mean `depends-on`?\n"
    );
    assert_eq!(outcome.stderr, "");

    let clean = Test::new()
        .pipeline(CLEAN)
        .args(&["lint", "--format", "github", "pipeline.kdl"])
        .run()
        .code(0);
    assert_eq!(clean.stdout, "");
}

#[test]
fn sarif_is_a_2_1_0_log_with_rules_and_regions() {
    let outcome = Test::new()
        .pipeline(NON_ASCII)
        .args(&["lint", "--format", "sarif", "pipeline.kdl"])
        .run()
        .code(1);
    let sarif = outcome.json();
    assert_eq!(sarif["version"], "2.1.0");
    assert_eq!(
        sarif["$schema"],
        "https://json.schemastore.org/sarif-2.1.0.json"
    );
    let run = &sarif["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "helixflow");
    assert_eq!(run["columnKind"], "unicodeCodePoints");
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    let ids: Vec<&str> = rules.iter().map(|r| r["id"].as_str().unwrap()).collect();
    let codes: Vec<&str> = helixflow::ALL_RULES.iter().map(|r| r.code).collect();
    assert_eq!(ids, codes);

    let results = run["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    for result in results {
        let index = usize::try_from(result["ruleIndex"].as_u64().unwrap()).unwrap();
        assert_eq!(rules[index]["id"], result["ruleId"]);
    }

    let error = &results[1];
    assert_eq!(error["ruleId"], "HF101");
    assert_eq!(error["level"], "error");
    assert_eq!(
        error["message"]["text"],
        "unknown node `depend-on` in `phase`\nhelp: did you mean `depends-on`?"
    );
    let location = &error["locations"][0]["physicalLocation"];
    assert_eq!(location["artifactLocation"]["uri"], "pipeline.kdl");
    assert_eq!(
        location["region"],
        json!({
            "startLine": 4, "startColumn": 25, "endLine": 4, "endColumn": 34,
            "byteOffset": 90, "byteLength": 9,
        })
    );
    assert_eq!(
        error["fixes"][0]["artifactChanges"][0]["replacements"][0],
        json!({
            "deletedRegion": { "byteOffset": 90, "byteLength": 9 },
            "insertedContent": { "text": "depends-on" },
        })
    );

    let warning = &results[0];
    assert_eq!(warning["ruleId"], "HF604");
    assert_eq!(warning["level"], "warning");
    assert_eq!(
        warning["locations"][0]["physicalLocation"]["region"],
        json!({
            "startLine": 3, "startColumn": 7, "endLine": 3, "endColumn": 15,
            "byteOffset": 38, "byteLength": 9,
        })
    );
}

#[test]
fn sarif_of_a_clean_file_has_no_results() {
    let outcome = Test::new()
        .pipeline(CLEAN)
        .args(&["lint", "--format", "sarif", "pipeline.kdl"])
        .run()
        .code(0);
    assert_eq!(outcome.json()["runs"][0]["results"], json!([]));
}

/// Several findings in one file: a warning, a value out of range, a name defined twice (with a
/// second label), a misspelt node and an invalid choice.
const MANY_FINDINGS: &str = r#"pipeline "demo"
agent "spare" { command "spare"; }
phase "parser" {
    run "make parser"
    retries -1
}
phase "parser" {
    run "true"
    depend-on "lexer"
    verify "sometimes"
}
"#;

#[test]
fn human_output_shows_every_finding_with_its_source_and_a_summary() {
    let outcome = Test::new()
        .pipeline(MANY_FINDINGS)
        .args(&["lint", "pipeline.kdl"])
        .run()
        .code(1);
    assert_eq!(outcome.stderr, "");
    insta::assert_snapshot!("human-many-findings", outcome.stdout_redacted());
}

#[test]
fn human_output_is_plain_with_no_color_or_without_a_terminal() {
    let test = Test::new().pipeline(MANY_FINDINGS);
    // The builder sets NO_COLOR=1.
    let no_color = test.with_args(&["lint", "pipeline.kdl"]).run().code(1);
    assert!(!no_color.stdout.contains('\x1b'), "{}", no_color.stdout);
    // Without NO_COLOR, standard output is still a pipe, not a terminal.
    let piped = test
        .with_args(&["lint", "pipeline.kdl"])
        .env_remove("NO_COLOR")
        .run()
        .code(1);
    assert!(!piped.stdout.contains('\x1b'), "{}", piped.stdout);
    assert_eq!(piped.stdout, no_color.stdout);
}

#[test]
fn human_output_on_a_terminal_is_coloured_unless_no_color_is_set() {
    let test = Test::new().pipeline(ONE_ERROR);
    let Some(coloured) = test
        .with_args(&["lint", "pipeline.kdl"])
        .env_remove("NO_COLOR")
        .run_in_terminal()
    else {
        eprintln!("skipped: util-linux `script` is not installed");
        return;
    };
    assert_eq!(coloured.code, 1, "{}", coloured.stdout);
    assert!(coloured.stdout.contains('\x1b'), "{}", coloured.stdout);
    assert!(coloured.stdout.contains("depend-on"), "{}", coloured.stdout);

    let plain = test
        .with_args(&["lint", "pipeline.kdl"])
        .env("NO_COLOR", "1")
        .run_in_terminal()
        .unwrap();
    assert_eq!(plain.code, 1, "{}", plain.stdout);
    assert!(!plain.stdout.contains('\x1b'), "{}", plain.stdout);
    assert!(
        plain.stdout.contains("[pipeline.kdl:4:5]"),
        "{}",
        plain.stdout
    );
}

#[test]
fn crlf_line_ends_count_as_one_line_break() {
    let outcome = Test::new()
        .pipeline(&ONE_ERROR.replace('\n', "\r\n"))
        .args(&["lint", "--format", "json", "pipeline.kdl"])
        .run()
        .code(1);
    let found = &outcome.json()[0];
    assert_eq!(found["code"], "HF101");
    // Three lines of 12, 11 and 14 characters, each with two bytes of line break, come first.
    assert_eq!(found["offset"], 47);
    assert_eq!([&found["line"], &found["column"]], [4, 5]);
    assert_eq!([&found["end_line"], &found["end_column"]], [4, 14]);
}

// ---------------------------------------------------------------------------------------------
// hostile input

#[test]
fn unclosed_slashdashed_blocks_are_reported_as_unbalanced_braces() {
    let outcome = Test::new()
        .pipeline(&"a /-{\n".repeat(16))
        .args(&["lint", "--format", "json", "pipeline.kdl"])
        .run()
        .code(1);
    let report = outcome.json();
    let found: Vec<(&str, u64, u64)> = report
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["code"].as_str().unwrap(),
                d["line"].as_u64().unwrap(),
                d["column"].as_u64().unwrap(),
            )
        })
        .collect();
    let expected: Vec<(&str, u64, u64)> = (1..=16).map(|line| ("HF002", line, 5)).collect();
    assert_eq!(found, expected);
    assert_eq!(report[0]["message"], "this `{` is never closed");
}

// ---------------------------------------------------------------------------------------------
// syntax errors people make

#[test]
fn a_property_without_a_value_points_at_the_property() {
    let pipeline =
        "pipeline \"p\"\nphase \"a\" {\n    run \"true\"\n    gates { command \"x\" name=; }\n}\n";
    let outcome = Test::new()
        .pipeline(pipeline)
        .args(&["lint", "--format", "json", "pipeline.kdl"])
        .run()
        .code(1);
    assert_eq!(outcome.codes(), ["HF001"]);
    let found = &outcome.json()[0];
    // `name=` is at 4:25; the finding should start on that line, not at 1:1.
    assert_eq!([&found["line"], &found["end_line"]], [4, 4], "{found:#}");
    assert_eq!(
        [&found["column"], &found["end_column"]],
        [25, 30],
        "{found:#}"
    );
    assert_eq!(found["message"], "the property `name` has no value");
}

#[test]
fn a_kdl_v1_boolean_suggests_the_v2_spelling() {
    let pipeline = "pipeline \"p\"\nagent \"a\" {\n    command \"x\"\n    stdin true\n}\nphase \"b\" { agent \"a\"; prompt \"p\"; }\n";
    let outcome = Test::new()
        .pipeline(pipeline)
        .args(&["lint", "--format", "json", "pipeline.kdl"])
        .run()
        .code(1);
    assert_eq!(outcome.codes(), ["HF001"]);
    let found = &outcome.json()[0];
    assert_eq!([&found["line"], &found["column"]], [4, 11]);
    let text = format!("{} {} {}", found["message"], found["label"], found["help"]);
    assert!(text.contains("#true"), "{found:#}");
}

#[test]
fn an_unclosed_string_that_hides_a_brace_is_named() {
    let pipeline = "pipeline \"p\"\nphase \"a\" { run \"a\" \"b }\nphase \"c\" { run \"x\"; }\n";
    let outcome = Test::new()
        .pipeline(pipeline)
        .args(&["lint", "--format", "json", "pipeline.kdl"])
        .run()
        .code(1);
    // The string `"b }` starts at 2:21; a finding or one of its notes must point there.
    let report = outcome.json();
    let places: Vec<(u64, u64)> = report
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|d| std::iter::once(d).chain(d["notes"].as_array().unwrap()))
        .map(|p| (p["line"].as_u64().unwrap(), p["column"].as_u64().unwrap()))
        .collect();
    assert!(places.contains(&(2, 21)), "{report:#}");
}

#[test]
fn syntax_error_labels_say_what_is_wrong() {
    for (pipeline, wrong) in [
        (
            "pipeline \"p\"\nphase \"a\" {\n    run \"true\n}\n",
            "not quoted string",
        ),
        (
            "pipeline \"p\"\nphase \"a\" { run \"true\"; retries 1.; }\n",
            "not float",
        ),
        (
            "pipeline \"p\"\nagent \"a\" { command \"x\"; stdin true; }\n",
            "not identifier string",
        ),
    ] {
        let outcome = Test::new()
            .pipeline(pipeline)
            .args(&["lint", "--format", "json", "pipeline.kdl"])
            .run()
            .code(1);
        assert_eq!(outcome.codes(), ["HF001"], "{pipeline}");
        assert_ne!(outcome.json()[0]["label"], wrong, "{pipeline}");
    }
}

#[test]
fn deeply_nested_blocks_are_refused_not_a_crash() {
    let depth = 5000;
    let text = format!(
        "pipeline \"p\"\nphase \"a\" {{ run \"true\"; }}\nx {}{}\n",
        "{ y ".repeat(depth),
        "}".repeat(depth)
    );
    let outcome = Test::new()
        .pipeline(&text)
        .args(&["lint", "pipeline.kdl", "--format", "json"])
        .run()
        .code(1);
    assert_eq!(outcome.codes(), ["HF003"]);
    let shallow = format!(
        "pipeline \"p\"\nphase \"a\" {{ run \"true\"; }}\nx {}{}\n",
        "{ y ".repeat(60),
        "}".repeat(60)
    );
    let outcome = Test::new()
        .pipeline(&shallow)
        .args(&["lint", "pipeline.kdl", "--format", "json"])
        .run()
        .code(1);
    assert!(
        outcome.codes().iter().all(|c| c != "HF003"),
        "60 levels parse: {:?}",
        outcome.codes()
    );
}

#[test]
fn files_over_32_kib_are_read_when_well_formed_and_stopped_at_an_error_otherwise() {
    let mut pipeline = String::from("pipeline \"p\"\n");
    let mut phase = 0;
    while pipeline.len() <= 200_000 {
        pipeline.push_str(&format!(
            "phase \"p{phase}\" {{\n    run \"echo {phase}\"\n    retries 0\n}}\n"
        ));
        phase += 1;
    }
    Test::new()
        .pipeline(&pipeline)
        .args(&["lint", "pipeline.kdl"])
        .run()
        .code(0);

    let line = pipeline.lines().count() + 1;
    pipeline.push_str("phase \"last\" { run \"x\"; retries 1.; }\n");
    let outcome = Test::new()
        .pipeline(&pipeline)
        .args(&["lint", "--format", "json", "pipeline.kdl"])
        .run()
        .code(1);
    assert_eq!(outcome.codes(), ["HF003"]);
    let found = &outcome.json()[0];
    assert_eq!([&found["line"], &found["column"]], [line, 33], "{found:#}");
}

// ---------------------------------------------------------------------------------------------
// gate options that check nothing

/// Each finding as (code, line, column, message).
fn findings(outcome: &common::Outcome) -> Vec<(String, u64, u64, String)> {
    outcome
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["code"].as_str().unwrap().to_owned(),
                d["line"].as_u64().unwrap(),
                d["column"].as_u64().unwrap(),
                d["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn empty_gate_options_paths_and_globs_are_errors() {
    let outcome = Test::new()
        .pipeline(
            r#"pipeline "p"
phase "a" {
    run "make"
    outputs {
        file ""
        glob "  "
        from "" key=""
    }
    scope ""
    gates {
        command ""
        command "   " fix=" " name=""
        syntax ""
        matches "out.txt" ""
        absent "" "TODO"
        front-matter "" "title"
    }
}
"#,
        )
        .args(&["lint", "--format", "json", "pipeline.kdl"])
        .run()
        .code(1);
    let glob = "an empty glob matches no file";
    let document = "an empty path names no document";
    let command = "an empty command runs nothing and exits 0: this gate always passes";
    let expected = [
        (5, 14, "`file \"\"` names no file"),
        (6, 14, glob),
        (7, 14, document),
        (7, 21, "`key=\"\"` names no front-matter key"),
        (9, 11, glob),
        (11, 17, command),
        (12, 17, command),
        (
            12,
            27,
            "`fix=\"\"` runs nothing: the failing gate is only checked again",
        ),
        (
            12,
            36,
            "`name=\"\"` leaves the gate without a name in reports and feedback",
        ),
        (13, 16, glob),
        (
            14,
            27,
            "an empty pattern matches everywhere: this `matches` gate always passes",
        ),
        (15, 16, glob),
        (16, 22, "an empty path names no file"),
    ];
    let expected: Vec<(String, u64, u64, String)> = expected
        .iter()
        .map(|&(line, column, message)| ("HF308".to_owned(), line, column, message.to_owned()))
        .collect();
    // `syntax ""` also checks no file in a supported language (HF602).
    let found: Vec<_> = findings(&outcome)
        .into_iter()
        .filter(|f| f.0 != "HF602")
        .collect();
    assert_eq!(found, expected);
}

#[test]
fn response_gates_in_run_steps_are_errors_wherever_they_come_from() {
    let outcome = Test::new()
        .pipeline(
            r##"pipeline "p"
agent "bot" {
    command "./bot.sh" "{{ prompt_file }}"
}
template "step" {
    run "make"
    gates {
        absent #"response"# "error"
    }
}
defaults {
    agent "bot"
    gates {
        matches "response" "done"
    }
}
phase "work" {
    prompt "Do it"
}
phase "build" use="step"
phase "fmt" {
    run "cargo fmt"
}
"##,
        )
        .args(&["lint", "--format", "json", "pipeline.kdl"])
        .run()
        .code(1);
    let message = |phase: &str, kind: &str| {
        format!(
            "phase \"{phase}\" is a `run` step: it has no agent response for `{kind} \"response\"` to check, so the gate fails on every run"
        )
    };
    assert_eq!(
        findings(&outcome),
        [
            ("HF127".to_owned(), 8, 16, message("build", "absent")),
            ("HF127".to_owned(), 14, 17, message("fmt", "matches")),
        ]
    );
}

#[test]
fn a_glob_ending_with_a_slash_is_an_error_with_a_fix_where_written_plainly() {
    let outcome = Test::new()
        .pipeline(
            r#"pipeline "p"
template "module" {
    param "dir"
    run "make"
    scope "{{ dir }}/"
}
phase "a" {
    run "make"
    protect "tests/"
    outputs {
        file "build/"
        glob "docs/"
    }
}
phase "b" use="module" dir="lib"
"#,
        )
        .args(&["lint", "--format", "json", "pipeline.kdl"])
        .run()
        .code(1);
    let json = outcome.json();
    let found: Vec<(&str, u64, &str, Option<&str>)> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["code"].as_str().unwrap(),
                d["line"].as_u64().unwrap(),
                d["message"].as_str().unwrap(),
                d["fix"]["edits"][0]["text"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            (
                "HF309",
                5,
                "`lib/` ends with `/`: globs match files, and this one matches none",
                None
            ),
            (
                "HF309",
                9,
                "`tests/` ends with `/`: globs match files, and this one matches none",
                Some("\"tests/**\"")
            ),
            (
                "HF309",
                11,
                "`file \"build/\"` names a folder; an output is a file",
                None
            ),
            (
                "HF309",
                12,
                "`docs/` ends with `/`: globs match files, and this one matches none",
                Some("\"docs/**\"")
            ),
        ]
    );
}

#[test]
fn a_parent_segment_anywhere_in_a_glob_is_an_error_with_the_glob_it_means() {
    let outcome = Test::new()
        .pipeline(
            r#"pipeline "p"
phase "a" {
    run "make"
    scope "src/**" "lib/x/../../src/*.py"
    protect "src/../data/**"
    outputs {
        file "src/../main.py"
        glob "build/gen/../*.json"
    }
    inputs { glob "a/../b/*"; }
    gates { syntax "src/../../up/*.py"; }
}
"#,
        )
        .args(&["lint", "--format", "json", "pipeline.kdl"])
        .run()
        .code(1);
    let json = outcome.json();
    let found: Vec<(&str, u64, Option<&str>)> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["code"].as_str().unwrap(),
                d["line"].as_u64().unwrap(),
                d["fix"]["edits"][0]["text"].as_str(),
            )
        })
        .collect();
    // A `file` output is a path, not a glob: `src/../main.py` is `main.py`. A `..` that climbs
    // out of the workspace is HF401.
    assert_eq!(
        found,
        [
            ("HF310", 4, Some("\"src/*.py\"")),
            ("HF310", 5, Some("\"data/**\"")),
            ("HF310", 8, Some("\"build/*.json\"")),
            ("HF310", 10, Some("\"b/*\"")),
            ("HF401", 11, None),
        ]
    );
}

#[test]
fn a_glob_without_wildcards_that_names_a_folder_is_a_folder_glob() {
    let outcome = Test::new()
        .file("tests/t.py", "assert True\n")
        .file("docs.md", "# Docs\n")
        .pipeline(
            r#"pipeline "p"
phase "a" {
    run "make"
    protect "tests" "docs.md" "missing"
}
"#,
        )
        .args(&["lint", "--format", "json", "pipeline.kdl"])
        .run()
        .code(1);
    let json = outcome.json();
    let found: Vec<(&str, &str, Option<&str>)> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["code"].as_str().unwrap(),
                d["message"].as_str().unwrap(),
                d["fix"]["edits"][0]["text"].as_str(),
            )
        })
        .collect();
    // A file, and a path that does not exist yet, are left alone.
    assert_eq!(
        found,
        [(
            "HF309",
            "`tests` is a folder: globs match files, and this one matches none",
            Some("\"tests/**\"")
        )]
    );
}

#[test]
fn empty_commands_patterns_folders_keys_and_headings_are_empty_values() {
    let outcome = Test::new()
        .pipeline(
            r#"pipeline "p"
agent "bot" {
    command "bot" "{{ prompt_file }}"
    evidence ""
}
phase "a" {
    run ""
    escalate "  "
    gates {
        command "true" cwd=""
        paths-exist "doc.md" key=""
        sections "doc.md" "Plan" ""
        front-matter "doc.md" "title" ""
    }
}
phase "b" {
    agent "bot"
    prompt "go"
}
"#,
        )
        .args(&["lint", "--format", "json", "pipeline.kdl"])
        .run()
        .code(1);
    let json = outcome.json();
    let found: Vec<(&str, u64)> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["code"].as_str().unwrap(), d["line"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        found,
        [
            ("HF308", 4),
            ("HF308", 7),
            ("HF308", 8),
            ("HF308", 10),
            ("HF308", 11),
            ("HF308", 12),
            ("HF308", 13),
        ]
    );
}

/// The checks that compare phases pairwise stay bounded: past 2,048 phases whose scopes share
/// folders they say they did not compare them, and phases that depend on each other are passed
/// over without comparing their globs.
#[test]
fn pairwise_checks_say_when_they_stop_and_skip_dependent_phases() {
    let phases = |n: usize, chained: bool| {
        let mut text = String::from("pipeline \"p\"\n");
        for i in 0..n {
            let after = if chained && i > 0 {
                format!("depends-on \"p{}\"; ", i - 1)
            } else {
                String::new()
            };
            text.push_str(&format!(
                "phase \"p{i}\" {{ run \"true\"; {after}scope \"s/**\"; }}\n"
            ));
        }
        text
    };
    let outcome = Test::new()
        .pipeline(&phases(2_100, false))
        .args(&["lint", "--format", "json", "pipeline.kdl"])
        .run()
        .code(0);
    let found = outcome.json();
    let found = found.as_array().unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["code"], "HF603");
    assert!(
        found[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("2,100 phases have scopes in folders that meet, more than the 2,048"),
        "{found:?}"
    );
    // 2,000 phases in a chain: two million pairs of scopes, none of phases that may run at once.
    let outcome = Test::new()
        .pipeline(&phases(2_000, true))
        .args(&["lint", "pipeline.kdl"])
        .run()
        .code(0);
    assert!(
        outcome.stdout.contains("no problems found"),
        "{}",
        outcome.stdout
    );
}
