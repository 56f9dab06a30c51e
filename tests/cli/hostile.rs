//! Hostile input gets a bounded answer: a FIFO where a document or a prompt file is expected, lines
//! and numbers past what a terminal renderer lays out, thousands of problems, and a language
//! server peer that claims more than it sends. Each command runs with a limit on the test's side,
//! so a regression fails the test instead of hanging it (the limit is far above any real run: it
//! is not a timing assertion).

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use crate::common;

/// Longer than any of these commands takes on a loaded machine; only a hang reaches it.
const HANG: Duration = Duration::from_mins(2);

/// Runs the binary in `dir` with `args` (and `stdin`), killing it and failing the test should it
/// hang.
fn run(dir: &Path, args: &[&str], stdin: &[u8]) -> Output {
    run_measured(dir, args, stdin).0
}

/// [`run`], and the binary's peak resident memory in KiB.
fn run_measured(dir: &Path, args: &[&str], stdin: &[u8]) -> (Output, u64) {
    common::run_measured(dir, args, stdin, HANG)
}

fn mkfifo(path: &Path) {
    let name = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid, NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0, "mkfifo");
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

const DOCUMENT_GATES: &str = r#"pipeline "p"
phase "doc" {
    run "true"
    outputs {
        from "plan.md" key="files"
    }
    gates {
        sections "plan.md" "Plan"
        front-matter "plan.md" "title"
        paths-exist "plan.md" key="files"
    }
}
"#;

#[test]
fn a_fifo_where_a_document_is_expected_fails_every_document_gate_at_once() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pipeline.kdl"), DOCUMENT_GATES).unwrap();
    mkfifo(&dir.path().join("plan.md"));
    let output = run(dir.path(), &["check", "--no-progress"], b"");
    let said = text(&output);
    assert_eq!(output.status.code(), Some(1), "{said}");
    // The outputs gate (`from`) and the three document gates each say what the file is.
    assert!(
        said.matches("`plan.md` is a FIFO, not a regular file")
            .count()
            >= 4,
        "{said}"
    );
}

const FIFO_PROMPT: &str = r#"pipeline "p"
agent "bot" {
    command "true"
}
phase "a" {
    agent "bot"
    prompt file="prompt.md"
}
"#;

#[test]
fn a_fifo_prompt_file_is_an_error_for_lint_status_and_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pipeline.kdl"), FIFO_PROMPT).unwrap();
    mkfifo(&dir.path().join("prompt.md"));
    for args in [
        &["lint", "pipeline.kdl"][..],
        &["status"][..],
        &["run", "--no-progress"][..],
    ] {
        let output = run(dir.path(), args, b"");
        let said = text(&output);
        assert_ne!(output.status.code(), Some(0), "{args:?}: {said}");
        assert!(
            said.contains("prompt file \"prompt.md\" is a FIFO, not a regular file"),
            "{args:?}: {said}"
        );
    }
}

#[test]
fn a_fifo_as_the_pipeline_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    mkfifo(&dir.path().join("pipeline.kdl"));
    let output = run(dir.path(), &["lint", "pipeline.kdl"], b"");
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("a FIFO, not a regular file"));
}

/// Lint, fmt and compile on `source`: no panic (exit 101), a non-zero exit, and an answer of at
/// most `max` bytes (for SARIF, beyond the documentation of every rule that each SARIF log
/// carries, whatever the file).
fn bounded(source: &str, max: usize) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("clean.kdl"),
        "pipeline \"p\"\nphase \"a\" {\n    run \"true\"\n}\n",
    )
    .unwrap();
    let rules = run(dir.path(), &["lint", "--format", "sarif", "clean.kdl"], b"")
        .stdout
        .len();
    std::fs::write(dir.path().join("pipeline.kdl"), source).unwrap();
    for args in [
        &["lint", "pipeline.kdl"][..],
        &["lint", "--format", "json", "pipeline.kdl"][..],
        &["lint", "--format", "sarif", "pipeline.kdl"][..],
        &["fmt", "--check", "pipeline.kdl"][..],
        &["compile", "pipeline.kdl"][..],
    ] {
        let output = run(dir.path(), args, b"");
        let said = text(&output);
        assert!(!said.contains("panicked"), "{args:?}: {said}");
        assert!(
            !matches!(output.status.code(), Some(0 | 101) | None),
            "{args:?}: {:?}",
            output.status
        );
        // `fmt --check` prints the diff of the file, which grows with the file itself.
        let mut size = output.stdout.len() + output.stderr.len();
        if args.contains(&"sarif") {
            size = size.saturating_sub(rules);
        }
        assert!(args[0] == "fmt" || size <= max, "{args:?}: {size} bytes");
    }
}

#[test]
fn a_finding_past_column_65535_is_shown_elided() {
    let line = "x".repeat(70_000);
    bounded(
        &format!("pipeline \"p\"\nphase \"a\" {{\n  prompt \"{line}\" bogus=1\n}}\n"),
        64 * 1024,
    );
    bounded(
        &format!(
            "pipeline \"p\"\nphase \"a\" {{ prompt \"x\"; retries {} }}\n",
            "9".repeat(70_000)
        ),
        64 * 1024,
    );
}

#[test]
fn thousands_of_problems_are_counted_not_all_printed() {
    let nodes: Vec<String> = (0..10_000).map(|i| format!("bogus{i};")).collect();
    bounded(&nodes.join(" "), 512 * 1024);
    bounded(&"phase \"a\" {".repeat(20_000), 512 * 1024);
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = (0..3_000).map(|i| format!("bogus{i} 1")).collect();
    std::fs::write(dir.path().join("pipeline.kdl"), lines.join("\n")).unwrap();
    let output = run(dir.path(), &["lint", "pipeline.kdl"], b"");
    let said = text(&output);
    assert!(
        said.contains("HF004") && said.contains("more problems in this file are not shown"),
        "{said}"
    );
}

/// The language server's answer to `input`, and its exit code.
fn lsp(input: &[u8]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let output = run(dir.path(), &["lsp"], input);
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

#[test]
fn the_language_server_answers_a_hostile_content_length_with_a_parse_error() {
    for claim in [
        "1e12",
        "18446744073709551615",
        "4294967296",
        "-5",
        "99999999999999999999",
    ] {
        let (code, out) =
            lsp(format!("Content-Length: {claim}\r\n\r\n{{\"jsonrpc\":\"2.0\"}}").as_bytes());
        assert!(
            matches!(code, Some(c) if c != 0 && c != 101),
            "{claim}: exit {code:?}"
        );
        assert!(
            out.contains("\"code\":-32700") && out.contains("\"id\":null"),
            "{claim}: {out}"
        );
        assert!(out.len() < 4096, "{claim}: {} bytes", out.len());
    }
    // An endless header line is cut off, not buffered.
    let (code, out) = lsp(&vec![b'A'; 1 << 20]);
    assert!(
        matches!(code, Some(c) if c != 0 && c != 101),
        "exit {code:?}"
    );
    assert!(out.contains("header line is longer"), "{out}");
}

#[test]
fn the_language_server_answers_a_body_that_is_not_json_and_reads_on() {
    let good = r#"{"jsonrpc":"2.0","id":1,"method":"shutdown"}"#;
    let exit = r#"{"jsonrpc":"2.0","method":"exit"}"#;
    let input = format!(
        "Content-Length: 5\r\n\r\nhello\
         Content-Length: {}\r\n\r\n{good}\
         Content-Length: {}\r\n\r\n{exit}",
        good.len(),
        exit.len()
    );
    let (code, out) = lsp(input.as_bytes());
    assert!(out.contains("\"code\":-32700"), "{out}");
    // `shutdown` before `initialize` is answered with an error, and reading went on to `exit`.
    assert!(out.contains("\"id\":1"), "{out}");
    assert!(matches!(code, Some(c) if c != 101), "exit {code:?}");
}

// --- the front end's limits ----------------------------------------------------------------------

/// Far above what a refusal costs (about 20 MB) and what the files below that fit cost, far below
/// what the refused ones cost before there were limits (1.9 GB for the 10 MB line, 263 MB for
/// 100,000 nodes, 2 GB for the template taken by every phase): a regression fails the test.
const MEMORY_KIB: u64 = 160 * 1024;

/// Every command that reads a pipeline refuses `source` with the same finding (HF005, saying
/// `said`), exit 2 (lint: 1), in bounded memory; `fmt` too when the file alone is over the
/// limits (it formats a file that is only over them once its templates are expanded).
fn refused_everywhere(source: &str, said: &str, fmt: bool) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pipeline.kdl"), source).unwrap();
    let commands = [
        &["fmt", "--check", "pipeline.kdl"][..],
        &["compile", "pipeline.kdl"][..],
        &["run", "--dry-run", "pipeline.kdl"][..],
        &["status", "pipeline.kdl"][..],
        &["lint", "pipeline.kdl"][..],
    ];
    for args in commands.into_iter().skip(usize::from(!fmt)) {
        let (output, peak) = run_measured(dir.path(), args, b"");
        let text = text(&output);
        let code = if args[0] == "lint" { 1 } else { 2 };
        assert_eq!(output.status.code(), Some(code), "{args:?}: {text}");
        assert!(
            text.contains("HF005") && text.contains(said),
            "{args:?}: {text}"
        );
        assert!(peak < MEMORY_KIB, "{args:?}: {peak} KiB");
    }
    let output = run(
        dir.path(),
        &["lint", "--format", "json", "pipeline.kdl"],
        b"",
    );
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let findings = json.as_array().unwrap();
    assert_eq!(findings.len(), 1, "{json:#}");
    findings[0].clone()
}

#[test]
fn a_ten_megabyte_pipeline_on_one_line_is_refused_before_it_is_parsed() {
    let mut line = String::from("pipeline \"p\"; ");
    for i in 0.. {
        if line.len() >= 10_000_000 {
            break;
        }
        line.push_str(&format!("phase \"p{i}\" {{ prompt \"x\"; bogus 1 }}; "));
    }
    line.push('\n');
    let found = refused_everywhere(&line, "the file is larger than 2 MiB", true);
    // Where reading stopped: the first byte past the limit, on the one line.
    assert_eq!(found["line"], 1);
    assert_eq!(found["column"], 2 * 1024 * 1024 + 1);
}

#[test]
fn a_hundred_thousand_nodes_are_refused_at_the_first_node_over_the_limit() {
    let nodes: String = (0..100_000).map(|i| format!("node{i} \"x\" 1\n")).collect();
    let found = refused_everywhere(&nodes, "more than 50,000 nodes", true);
    assert_eq!([&found["line"], &found["column"]], [50_001, 1]);
    assert_eq!(found["label"], "the first node over the limit");
}

#[test]
fn a_template_counts_once_for_every_phase_that_takes_it() {
    // 100 KB of text, taken by 30 phases: 3 MB of pipeline, though the file is 100 KB.
    let mut source = format!(
        "pipeline \"p\"\ntemplate \"t\" {{\n    param \"n\"\n    run \"echo {{{{ n }}}}\"\n    \
         description \"{}\"\n}}\n",
        "x".repeat(100_000)
    );
    for i in 0..30 {
        source.push_str(&format!("phase \"p{i}\" use=\"t\" n=\"{i}\"\n"));
    }
    let found = refused_everywhere(&source, "over its limit of 2 MiB", false);
    assert_eq!(found["label"], "the first phase over the limit");
    // The file takes 101 KB of the 2 MiB and each phase 100 KB more: the 20th phase, on line
    // 7 + 19, is the first that does not fit.
    assert_eq!(found["line"], 26);
}

#[test]
fn a_thousand_templated_phases_lint_far_inside_the_limits() {
    let mut source = String::from(
        "pipeline \"p\"\ntemplate \"t\" {\n    param \"n\"\n    run \"make {{ n }}\"\n    \
         scope \"src/{{ n }}/**\"\n    outputs { file \"src/{{ n }}/out.txt\"; }\n    \
         gates { command \"test -s src/{{ n }}/out.txt\"; }\n}\n",
    );
    for i in 0..1_000 {
        let after = if i == 0 {
            String::new()
        } else {
            format!(" {{ depends-on \"p{}\"; }}", i - 1)
        };
        source.push_str(&format!("phase \"p{i}\" use=\"t\" n=\"p{i}\"{after}\n"));
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pipeline.kdl"), &source).unwrap();
    let (output, peak) = run_measured(dir.path(), &["lint", "pipeline.kdl"], b"");
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(peak < MEMORY_KIB, "{peak} KiB");
}

#[test]
fn a_prompt_file_named_by_every_phase_is_read_and_checked_once() {
    let dir = tempfile::tempdir().unwrap();
    // 200 KB of prompt, named by 2,000 phases: 400 MB when each phase kept its own copy.
    let prompt = "Write {{ name }} well. ".repeat(9_000);
    std::fs::write(dir.path().join("prompt.md"), &prompt).unwrap();
    let mut source = String::from("pipeline \"p\"\nagent \"a\" { command \"a\"; stdin #true; }\n");
    for i in 0..2_000 {
        source.push_str(&format!(
            "phase \"p{i}\" {{ agent \"a\"; prompt file=\"prompt.md\"; vars {{ name \"p{i}\"; }} }}\n"
        ));
    }
    std::fs::write(dir.path().join("pipeline.kdl"), &source).unwrap();
    let (output, peak) = run_measured(dir.path(), &["lint", "pipeline.kdl"], b"");
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(peak < MEMORY_KIB, "{peak} KiB");
}

#[test]
fn long_runs_of_punctuation_never_reach_the_kdl_parser() {
    // Each of these overflowed the 64 MiB stack of the KDL parser's thread (an abort, exit 134)
    // when files up to 1 MiB were given to it; now the parser gets at most 32 KiB.
    let lint = |source: &str| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("pipeline.kdl"), source).unwrap();
        let output = run(
            dir.path(),
            &["lint", "--format", "json", "pipeline.kdl"],
            b"",
        );
        (output.status.code(), text(&output))
    };
    for (run_of, times) in [
        ("/-", 20_000),
        ("{}", 200_000),
        ("\\ ", 500_000),
        ("=", 1_000_000),
    ] {
        let (code, said) = lint(&format!("pipeline \"p\"\na {}\n", run_of.repeat(times)));
        assert_eq!(code, Some(1), "{run_of}: {said}");
        assert!(said.contains("HF003"), "{run_of}: {said}");
    }
    // A shorter run, in a file the parser could be given, is refused by the run itself.
    let (code, said) = lint(&format!("pipeline \"p\"\na {}\n", "/-".repeat(1_500)));
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("1500 marks of punctuation in a row"),
        "{said}"
    );
}

/// What puts something where a file was.
type Plant = Box<dyn Fn(&Path)>;

/// A FIFO, a huge sparse file or a symlink where the compiled pipeline's cache entry and the
/// remembered plan are: the commands compile and plan as without them, at once and within their
/// usual memory.
#[test]
fn a_planted_pipeline_cache_entry_is_never_waited_on_nor_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("pipeline.kdl"),
        "pipeline \"p\"\nphase \"a\" {\n    run \"true\"\n}\n",
    )
    .unwrap();
    let cache = dir.path().join(".helixflow/cache");
    std::fs::create_dir_all(&cache).unwrap();
    // The entry's name, as a first command writes it.
    let first = run(dir.path(), &["status"], b"");
    assert_eq!(first.status.code(), Some(0), "{}", text(&first));
    let entry = std::fs::read_dir(&cache)
        .unwrap()
        .next()
        .expect("an entry")
        .unwrap()
        .path();
    let plants: [(&str, Plant); 3] = [
        ("a FIFO", Box::new(|p: &Path| mkfifo(p))),
        (
            "a 4 GiB sparse file",
            Box::new(|p: &Path| {
                let file = std::fs::File::create(p).unwrap();
                file.set_len(4 << 30).unwrap();
            }),
        ),
        (
            "a symlink to /dev/zero",
            Box::new(|p: &Path| std::os::unix::fs::symlink("/dev/zero", p).unwrap()),
        ),
    ];
    // And where the remembered plan is.
    let memo = cache.join("plan");
    for (what, plant) in plants {
        std::fs::remove_file(&entry).unwrap();
        plant(&entry);
        let _ = std::fs::remove_file(&memo);
        plant(&memo);
        let (output, peak_kib) = run_measured(dir.path(), &["status"], b"");
        assert_eq!(output.status.code(), Some(0), "{what}: {}", text(&output));
        assert!(
            String::from_utf8_lossy(&output.stdout).contains("→ a  will run"),
            "{what}: {}",
            text(&output)
        );
        assert!(peak_kib < 64 * 1024, "{what}: {peak_kib} KiB");
    }
}
