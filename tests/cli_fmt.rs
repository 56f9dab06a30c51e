//! `helixflow fmt`: canonical formatting in place, `--check` with a diff, standard input, and
//! every comment kept.

mod common;

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
