//! `helixflow fmt`: canonical formatting in place, `--check` with a diff, standard input, and
//! every comment kept.

use crate::common;

use std::time::{Duration, SystemTime};

use common::Test;

/// Badly indented, with comments everywhere the contract promises to keep them: before nodes,
/// after a node on its line, after an opening brace, inside entries, and a block comment.
const UNFORMATTED: &str = r#"// header comment
pipeline   "p"    {
  max-parallel 2 // trailing on max-parallel
}
/* block comment */
phase "a"{
      run "make"   // trailing on run
  retries 1;   env "A" /* inline */ "b"
    gates {   // after the brace
   command "make test" name="t"
   }
} // after the phase
"#;

/// [`UNFORMATTED`], formatted.
const FORMATTED: &str = r#"// header comment
pipeline "p" {
    max-parallel 2 // trailing on max-parallel
}
/* block comment */
phase "a" {
    run "make" // trailing on run
    retries 1
    env "A" /* inline */ "b"
    gates { // after the brace
        command "make test" name="t"
    }
} // after the phase
"#;

#[test]
fn formats_in_place_and_keeps_every_comment() {
    let test = Test::new().pipeline(UNFORMATTED);
    let outcome = test.with_args(&["fmt", "pipeline.kdl"]).run().code(0);
    assert_eq!(outcome.stdout, "");
    assert_eq!(outcome.stderr, "");
    assert_eq!(test.read("pipeline.kdl"), FORMATTED);
}

#[test]
fn formatting_is_idempotent() {
    let test = Test::new().pipeline(UNFORMATTED);
    test.with_args(&["fmt", "pipeline.kdl"]).run().code(0);
    let once = test.read("pipeline.kdl");
    test.with_args(&["fmt", "pipeline.kdl"]).run().code(0);
    assert_eq!(test.read("pipeline.kdl"), once);
    test.with_args(&["fmt", "--check", "pipeline.kdl"])
        .run()
        .code(0);
}

#[test]
fn formatted_output_still_lints_clean() {
    let test = Test::new().pipeline(UNFORMATTED);
    test.with_args(&["fmt", "pipeline.kdl"]).run().code(0);
    let lint = test.with_args(&["lint", "pipeline.kdl"]).run().code(0);
    assert_eq!(lint.stdout, "1 file checked: no problems found\n");
}

#[test]
fn an_already_formatted_file_is_not_rewritten() {
    let test = Test::new().pipeline(FORMATTED);
    let path = test.path().join("pipeline.kdl");
    let old = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(old)
        .unwrap();
    test.with_args(&["fmt", "pipeline.kdl"]).run().code(0);
    assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), old);
}

#[test]
fn check_prints_a_unified_diff_exits_1_and_leaves_the_file_alone() {
    let test = Test::new().pipeline(UNFORMATTED);
    let outcome = test
        .with_args(&["fmt", "--check", "pipeline.kdl"])
        .run()
        .code(1);
    assert_eq!(test.read("pipeline.kdl"), UNFORMATTED);
    assert!(
        outcome
            .stdout
            .starts_with("--- pipeline.kdl\n+++ pipeline.kdl (formatted)\n@@ "),
        "{}",
        outcome.stdout
    );
    insta::assert_snapshot!("check-diff", outcome.stdout_redacted());
}

#[test]
fn check_on_a_formatted_file_exits_0_silently() {
    let test = Test::new().pipeline(FORMATTED);
    let outcome = test
        .with_args(&["fmt", "--check", "pipeline.kdl"])
        .run()
        .code(0);
    assert_eq!(outcome.stdout, "");
    assert_eq!(outcome.stderr, "");
    assert_eq!(test.read("pipeline.kdl"), FORMATTED);
}

#[test]
fn dash_formats_standard_input_to_standard_output() {
    let test = Test::new().stdin(UNFORMATTED);
    let outcome = test.with_args(&["fmt", "-"]).run().code(0);
    assert_eq!(outcome.stdout, FORMATTED);
    assert_eq!(outcome.stderr, "");
    // Nothing is written to the folder.
    assert_eq!(std::fs::read_dir(test.path()).unwrap().count(), 0);

    let formatted = Test::new()
        .stdin(FORMATTED)
        .args(&["fmt", "-"])
        .run()
        .code(0);
    assert_eq!(formatted.stdout, FORMATTED);
}

#[test]
fn check_on_standard_input_diffs_against_stdin() {
    let outcome = Test::new()
        .stdin(UNFORMATTED)
        .args(&["fmt", "--check", "-"])
        .run()
        .code(1);
    assert!(
        outcome
            .stdout
            .starts_with("--- <stdin>\n+++ <stdin> (formatted)\n"),
        "{}",
        outcome.stdout
    );
}

#[test]
fn trailing_comments_survive_in_every_position() {
    let input = r##"pipeline "p" { description "x"; max-parallel 2; } // after pipeline
phase "a" {
    scope "a/**" \ // why a
          "b/**" // why b
    outputs { file "a.txt"; file "b.txt"; } // outputs
    gates /* before block */ {
        command "x" /-name="old" name="new" // the new name
    }
    /-retries 3 // disabled
    prompt #"raw "quoted" text"# // raw
    run "true"; // after a semicolon
}
phase "b" { /* first */ run "true" /* last */ } /* after b */
// final comment"##;
    let outcome = Test::new().stdin(input).args(&["fmt", "-"]).run().code(0);
    let expected = r##"pipeline "p" {
    description "x"
    max-parallel 2
} // after pipeline
phase "a" {
    scope "a/**" \ // why a
        "b/**" // why b
    outputs {
        file "a.txt"
        file "b.txt"
    } // outputs
    gates /* before block */ {
        command "x" /-name="old" name="new" // the new name
    }
    /-retries 3 // disabled
    prompt #"raw "quoted" text"# // raw
    run "true" // after a semicolon
}
phase "b" {
    /* first */ run "true" /* last */
} /* after b */
// final comment
"##;
    assert_eq!(outcome.stdout, expected);
    let again = Test::new()
        .stdin(expected)
        .args(&["fmt", "-"])
        .run()
        .code(0);
    assert_eq!(again.stdout, expected);
}

#[test]
fn invalid_kdl_exits_2_with_the_syntax_diagnostic_and_is_not_touched() {
    let broken = "pipeline \"p\"\nphase \"a\" {\n    run \"true\n}\n";
    let test = Test::new().pipeline(broken);
    for args in [
        &["fmt", "pipeline.kdl"][..],
        &["fmt", "--check", "pipeline.kdl"][..],
    ] {
        let outcome = test.with_args(args).run().code(2);
        assert_eq!(outcome.stdout, "", "{args:?}");
        assert!(
            outcome.stderr.contains("HF001"),
            "{args:?}: {}",
            outcome.stderr
        );
        assert!(
            outcome.stderr.contains("[pipeline.kdl:3:9]"),
            "{args:?}: {}",
            outcome.stderr
        );
        assert!(
            outcome
                .stderr
                .ends_with("error: pipeline.kdl is not valid KDL; not formatted\n"),
            "{args:?}: {}",
            outcome.stderr
        );
        assert_eq!(test.read("pipeline.kdl"), broken);
    }
}

#[test]
fn a_file_broken_in_every_line_shows_a_hundred_findings_and_counts_the_rest() {
    // 5,000 stray `}`: one finding each.
    let broken = format!("pipeline \"p\"\n{}", "}\n".repeat(5_000));
    let test = Test::new().pipeline(&broken);
    // As `lint` shows them.
    for args in [
        &["fmt", "--check", "pipeline.kdl"][..],
        &["fmt", "pipeline.kdl"][..],
    ] {
        let outcome = test.with_args(args).run().code(2);
        // A hundred findings, then the one that counts the rest (HF004).
        let shown = outcome.stderr.matches("[pipeline.kdl:").count();
        assert_eq!(shown, 101, "{args:?}: {}", &outcome.stderr[..2_000]);
        assert!(
            outcome
                .stderr
                .contains("4900 more problems in this file are not shown (4900 errors)"),
            "{args:?}: {}",
            outcome.stderr
        );
        assert!(outcome.stderr.contains("100 errors, 1 warning"), "{args:?}");
    }
    assert_eq!(test.read("pipeline.kdl"), broken);
}

#[test]
fn an_unclosed_block_is_not_formatted_and_the_brace_is_shown() {
    let broken =
        "pipeline \"p\"\nphase \"a\" {\n    run \"true\"\nphase \"b\" {\n    run \"true\"\n}\n";
    let test = Test::new().pipeline(broken);
    let outcome = test.with_args(&["fmt", "pipeline.kdl"]).run().code(2);
    assert_eq!(outcome.stdout, "");
    assert_eq!(test.read("pipeline.kdl"), broken);
    insta::assert_snapshot!("unclosed-block-stderr", outcome.stderr_redacted());
}

#[test]
fn invalid_kdl_on_standard_input_exits_2_and_prints_nothing_on_stdout() {
    let outcome = Test::new()
        .stdin("pipeline \"p\"\nphase \"a\" { retries 1.; }\n")
        .args(&["fmt", "-"])
        .run()
        .code(2);
    assert_eq!(outcome.stdout, "");
    assert!(outcome.stderr.contains("HF001"), "{}", outcome.stderr);
    assert!(
        outcome
            .stderr
            .ends_with("error: <stdin> is not valid KDL; not formatted\n"),
        "{}",
        outcome.stderr
    );
}

#[test]
fn several_files_are_formatted_and_the_worst_exit_code_wins() {
    let test = Test::new()
        .file("one.kdl", UNFORMATTED)
        .file("two.kdl", UNFORMATTED)
        .file("broken.kdl", "phase {\n");
    test.with_args(&["fmt", "one.kdl", "two.kdl"]).run().code(0);
    assert_eq!(test.read("one.kdl"), FORMATTED);
    assert_eq!(test.read("two.kdl"), FORMATTED);

    let test = Test::new()
        .file("one.kdl", UNFORMATTED)
        .file("broken.kdl", "phase {\n");
    let outcome = test
        .with_args(&["fmt", "broken.kdl", "one.kdl"])
        .run()
        .code(2);
    assert!(outcome.stderr.contains("HF002"), "{}", outcome.stderr);
    assert_eq!(test.read("one.kdl"), FORMATTED);
}

#[test]
fn without_a_file_fmt_formats_the_nearest_pipeline_file() {
    let test = Test::new()
        .pipeline(UNFORMATTED)
        .dir("sub")
        .current_dir("sub");
    test.with_args(&["fmt"]).run().code(0);
    assert_eq!(test.read("pipeline.kdl"), FORMATTED);
}

#[test]
fn missing_file_exits_2() {
    let outcome = Test::new().args(&["fmt", "missing.kdl"]).run().code(2);
    assert_eq!(outcome.stdout, "");
    assert!(
        outcome
            .stderr
            .starts_with("error: cannot read missing.kdl: "),
        "{}",
        outcome.stderr
    );
}

/// A `\` line continuation consumes one line break only: in `a \`, blank line, `b` the blank line
/// ends `a`, and `b` is a node of its own (the KDL test case `escline_end_of_node`).
#[test]
fn a_continuation_before_a_blank_line_keeps_the_nodes_apart() {
    for input in ["a \\\n\nb\n", "a \\ // why\n\nb 1\n", "a \\\n;b\n"] {
        let outcome = Test::new().stdin(input).args(&["fmt", "-"]).run().code(0);
        assert_eq!(
            canonical(&outcome.stdout),
            canonical(&input.replace(";b", "\nb")),
            "input:\n{input}\noutput:\n{}",
            outcome.stdout
        );
    }
}

/// KDL v2 lets a slashdash follow a value, a name or a block with no space before it
/// (`node "string"/-1`); lint and fmt accept it, and fmt keeps what it means.
#[test]
fn a_slashdash_right_after_a_value_is_valid() {
    let pipeline =
        "pipeline \"p\"/-\"old\"\nphase \"a\"/-retries=2 {\n    run \"true\"/-\"x\"\n}/-{ gone }\n";
    let test = Test::new().pipeline(pipeline);
    let lint = test.with_args(&["lint", "pipeline.kdl"]).run().code(0);
    assert_eq!(lint.stdout, "1 file checked: no problems found\n");
    let outcome = test.with_args(&["fmt", "pipeline.kdl"]).run().code(0);
    assert_eq!(outcome.stderr, "");
    assert_eq!(
        test.read("pipeline.kdl"),
        "pipeline \"p\" /-\"old\"\nphase \"a\" /-retries=2 {\n    run \"true\" /-\"x\"\n} /-{\n    gone\n}\n"
    );
    // A string escape the fast parser leaves to the kdl crate takes the other reader.
    let outcome = Test::new()
        .stdin("node \"a\\   b\"/-1\n")
        .args(&["fmt", "-"])
        .run()
        .code(0);
    assert_eq!(outcome.stdout, "node \"a\\   b\" /-1\n");
}

/// Invalid cases of the specification that the kdl crate (6.7) reads all the same, and so
/// `helixflow fmt` formats: a raw string `#\"\"\"one line\"\"\"#`, and a literal U+007F.
const READ_THOUGH_INVALID: &[&str] = &[
    "multiline_raw_string_single_line_err_fail.kdl",
    "unicode_delete_fail.kdl",
];

/// The KDL specification's test suite, as the kdl crate's source ships it: every valid case
/// formats to a document that means what the specification says (its expected output, or else
/// what the input means), and formatting it again changes nothing; every invalid case is refused.
#[test]
fn formats_every_valid_case_of_the_kdl_specification_to_the_same_document() {
    let cases = spec::cases();
    assert!(cases.len() > 300, "{} cases", cases.len());
    let mut problems = Vec::new();
    for case in &cases {
        let outcome = Test::new().stdin(&case.input).args(&["fmt", "-"]).run();
        if case.name.ends_with("_fail.kdl") {
            if outcome.code == 0 && !READ_THOUGH_INVALID.contains(&case.name.as_str()) {
                problems.push(format!("{}: invalid, yet formatted", case.name));
            }
            continue;
        }
        // The crate's copy has no expected output for `hex.kdl` (a value beyond 64 bits).
        let expected = case
            .expected
            .clone()
            .unwrap_or_else(|| canonical(&case.input));
        if outcome.code != 0 {
            problems.push(format!("{}: refused\n{}", case.name, outcome.stderr));
            continue;
        }
        let formatted = outcome.stdout;
        let meaning = canonical(&formatted);
        if meaning != expected {
            problems.push(format!(
                "{}: input\n{}\nformatted\n{formatted}\nmeans\n{meaning}\nexpected\n{expected}",
                case.name, case.input
            ));
            continue;
        }
        let again = Test::new().stdin(&formatted).args(&["fmt", "-"]).run();
        if again.stdout != formatted {
            problems.push(format!(
                "{}: not idempotent\n{formatted}\n{}",
                case.name, again.stdout
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// What a document means, written the way the specification's expected outputs are: the kdl
/// crate's reading, without comments or formatting, duplicate properties resolved (the rules
/// of the test suite's README, as its compliance test applies them).
fn canonical(src: &str) -> String {
    let mut document =
        kdl::KdlDocument::parse_v2(src).unwrap_or_else(|e| panic!("not valid KDL: {e:?}\n{src}"));
    document.autoformat_no_comments();
    normalise(&mut document);
    document.to_string()
}

fn normalise(document: &mut kdl::KdlDocument) {
    for node in document.nodes_mut() {
        node.name_mut().clear_format();
        let mut last = std::collections::HashMap::new();
        for (index, entry) in node.entries().iter().enumerate() {
            if let Some(name) = entry.name() {
                last.insert(name.value().to_owned(), index);
            }
        }
        let entries = std::mem::take(node.entries_mut());
        for (index, mut entry) in entries.into_iter().enumerate() {
            if let Some(name) = entry.name_mut() {
                if last.get(name.value()) != Some(&index) {
                    continue;
                }
                name.clear_format();
            }
            if let Some(text) = entry.value().as_string() {
                *entry.value_mut() = kdl::KdlValue::String(text.to_owned());
            }
            node.entries_mut().push(entry);
        }
        let children = node.children_mut();
        if children.as_ref().is_some_and(|c| c.nodes().is_empty()) {
            *children = None;
        }
        if let Some(children) = children {
            normalise(children);
        }
    }
}

/// Finding the KDL specification's test cases.
mod spec {
    use std::path::{Path, PathBuf};

    /// One test case: its input and, for a valid one, the expected output.
    pub(super) struct Case {
        pub name: String,
        pub input: String,
        pub expected: Option<String>,
    }

    /// Cases of the specification after kdl-org/kdl#499 (January 2025), which made the space
    /// before a slashdash optional: the kdl crate's copy of the suite predates it, and holds the
    /// first one as `zero_space_before_slashdash_arg_fail`.
    const NEWER: &[(&str, &str, &str)] = &[
        (
            "zero_space_before_slashdash_arg",
            "node \"string\"/-1\n",
            "node string\n",
        ),
        (
            "zero_space_before_slashdash_prop",
            "node \"string\"/-foo=1\n",
            "node string\n",
        ),
        (
            "zero_space_before_slashdash_children",
            "node \"string\"/-{}\nnode \"string\" {}/-{}\n",
            "node string\nnode string\n",
        ),
    ];

    /// Every case, the kdl crate's copy first, with the newer ones in place of what they replace.
    pub(super) fn cases() -> Vec<Case> {
        let root = suite();
        let mut names: Vec<String> = std::fs::read_dir(root.join("input"))
            .expect("the test cases are readable")
            .map(|e| {
                e.expect("a readable entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        names.sort();
        let mut cases: Vec<Case> = names
            .into_iter()
            .filter(|name| name != "zero_space_before_slashdash_arg_fail.kdl")
            .map(|name| {
                let read = |folder: &str| std::fs::read_to_string(root.join(folder).join(&name));
                Case {
                    input: read("input").expect("a readable test case"),
                    expected: read("expected_kdl").ok(),
                    name,
                }
            })
            .collect();
        cases.extend(NEWER.iter().map(|(name, input, expected)| Case {
            name: (*name).to_owned(),
            input: (*input).to_owned(),
            expected: Some((*expected).to_owned()),
        }));
        cases
    }

    /// `tests/test_cases` of the kdl crate this build uses, in the cargo registry.
    fn suite() -> PathBuf {
        let home = std::env::var_os("CARGO_HOME").map_or_else(
            || PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cargo"),
            PathBuf::from,
        );
        let registry = home.join("registry").join("src");
        let crate_folder = format!("kdl-{}", kdl_version());
        std::fs::read_dir(&registry)
            .expect("the cargo registry exists")
            .map(|index| {
                index
                    .expect("a readable registry")
                    .path()
                    .join(&crate_folder)
                    .join("tests/test_cases")
            })
            .find(|path| path.is_dir())
            .expect("the kdl crate's test cases are in the cargo registry")
    }

    /// The version of the kdl crate this build uses, from Cargo.lock.
    fn kdl_version() -> String {
        let lock =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.lock"))
                .expect("Cargo.lock is readable");
        let marker = "name = \"kdl\"\nversion = \"";
        let at = lock.find(marker).expect("kdl is locked");
        let rest = &lock[at + marker.len()..];
        rest[..rest.find('"').expect("closing quote")].to_owned()
    }
}
