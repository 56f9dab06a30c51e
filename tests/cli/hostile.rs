//! Hostile input gets a bounded answer: a FIFO where a document or a prompt file is expected, lines
//! and numbers past what a terminal renderer lays out, thousands of problems, and a language
//! server peer that claims more than it sends. Each command runs with a limit on the test's side,
//! so a regression fails the test instead of hanging it (the limit is far above any real run: it
//! is not a timing assertion).

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Longer than any of these commands takes on a loaded machine; only a hang reaches it.
const HANG: Duration = Duration::from_mins(2);

/// Runs the binary in `dir` with `args` (and `stdin`), killing it and failing the test should it
/// hang.
fn run(dir: &Path, args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_helixflow"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("HELIXFLOW_PATH")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("helixflow starts");
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = input.write_all(&stdin);
    });
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stdout.read_to_end(&mut bytes);
        bytes
    });
    let err = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr.read_to_end(&mut bytes);
        bytes
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > HANG {
            let _ = child.kill();
            let _ = child.wait();
            panic!("helixflow {args:?} hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = feeder.join();
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
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
