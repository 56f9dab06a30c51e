//! A fluent builder for running the real `helixflow` binary on files in a temporary folder.

#![allow(
    dead_code,
    reason = "each test binary uses a different part of the builder"
)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One invocation of the binary.
pub struct Test {
    dir: tempfile::TempDir,
    args: Vec<String>,
    env: Vec<(String, String)>,
    stdin: Option<String>,
    cwd: Option<PathBuf>,
}

/// What the binary did.
#[derive(Debug)]
pub struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    dir: PathBuf,
}

impl Test {
    /// A new test with an empty temporary folder.
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("temporary folder"),
            args: Vec::new(),
            env: Vec::new(),
            stdin: None,
            cwd: None,
        }
    }

    /// Writes a file (creating folders) relative to the temporary folder.
    pub fn file(self, path: &str, text: &str) -> Self {
        let full = self.dir.path().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, text).unwrap();
        self
    }

    /// Writes `pipeline.kdl`.
    pub fn pipeline(self, text: &str) -> Self {
        self.file("pipeline.kdl", text)
    }

    /// Adds arguments.
    pub fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|s| (*s).to_owned()));
        self
    }

    /// Sets an environment variable.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Feeds standard input.
    pub fn stdin(mut self, text: &str) -> Self {
        self.stdin = Some(text.to_owned());
        self
    }

    /// Runs in a sub-folder of the temporary folder.
    pub fn current_dir(mut self, relative: &str) -> Self {
        self.cwd = Some(self.dir.path().join(relative));
        self
    }

    /// The temporary folder.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Runs the binary and returns what it did; the folder stays alive as long as `self`.
    pub fn run(&self) -> Outcome {
        let mut command = Command::new(env!("CARGO_BIN_EXE_helixflow"));
        command
            .args(&self.args)
            .current_dir(self.cwd.as_deref().unwrap_or(self.dir.path()))
            .env("NO_COLOR", "1")
            .env_remove("HELIXFLOW_PATH")
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (key, value) in &self.env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("helixflow starts");
        if let Some(text) = &self.stdin {
            child
                .stdin
                .take()
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
        }
        let output = child.wait_with_output().unwrap();
        Outcome {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            dir: self.dir.path().to_owned(),
        }
    }
}

impl Outcome {
    /// Asserts the exit code, showing the output when it differs.
    pub fn code(self, expected: i32) -> Self {
        assert_eq!(
            self.code, expected,
            "exit code\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    /// stdout with the temporary folder's path replaced by `[TMP]`.
    pub fn stdout_redacted(&self) -> String {
        redact(&self.stdout, &self.dir)
    }

    /// stderr with the temporary folder's path replaced by `[TMP]`.
    pub fn stderr_redacted(&self) -> String {
        redact(&self.stderr, &self.dir)
    }

    /// stdout parsed as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", self.stdout))
    }
}

/// Replaces temporary paths and the version in output, so snapshots are stable.
pub fn redact(text: &str, dir: &Path) -> String {
    let canonical = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
    text.replace(&canonical.display().to_string(), "[TMP]")
        .replace(&dir.display().to_string(), "[TMP]")
        .replace(env!("CARGO_PKG_VERSION"), "[VERSION]")
}
