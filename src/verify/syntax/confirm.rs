//! The language's own tool as a second opinion on a file tree-sitter rejects: where a grammar is
//! wrong about valid code (`for i do` in a shell script, `try!` in a Rust 2015 crate), a file the
//! language itself accepts must not fail the gate. The tool runs only on files tree-sitter
//! rejects, so the gate's speed on valid files is unchanged; a file the tool rejects too, or a
//! tool that is not installed, keeps tree-sitter's errors, so no file the language rejects ever
//! passes.

use std::io::Write as _;
use std::process::{Command, Stdio};

/// Whether `program args…` accepts `text` given on its standard input: Some(true) when it exits
/// 0, Some(false) when it exits otherwise, None when it cannot be run (not installed).
fn accepts(program: &str, args: &[&str], text: &[u8]) -> Option<bool> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut stdin = child.stdin.take()?;
    // A tool that stops reading early (it found an error) closes the pipe: not our failure.
    let written = stdin.write_all(text);
    drop(stdin);
    let status = child.wait().ok()?;
    if written.is_err() && status.success() {
        return None;
    }
    Some(status.success())
}

/// `bash -n`: bash reads the whole script and runs nothing.
pub(super) fn bash_accepts(text: &[u8]) -> bool {
    accepts("bash", &["-n"], text) == Some(true)
}

/// rustc's own parser, through rustfmt: a file that any edition parses is valid Rust (2015
/// crates may use `try!` and `async` as a name; later editions reserve them).
pub(super) fn rust_accepts(text: &[u8]) -> bool {
    ["2024", "2015"].iter().any(|edition| {
        accepts(
            "rustfmt",
            &["--edition", edition, "--emit", "stdout", "--quiet"],
            text,
        ) == Some(true)
    })
}

/// `node --check`, as a script and then as a module (JSX, which Node does not read, keeps
/// tree-sitter's verdict).
pub(super) fn node_accepts(text: &[u8]) -> bool {
    [
        &["--check", "-"][..],
        &["--input-type=module", "--check", "-"][..],
    ]
    .iter()
    .any(|args| accepts("node", args, text) == Some(true))
}

/// `gofmt -e`: Go's own parser (all errors, not only the first ten).
pub(super) fn go_accepts(text: &[u8]) -> bool {
    accepts("gofmt", &["-e"], text) == Some(true)
}
