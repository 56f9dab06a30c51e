//! A fluent builder for running the real `helixflow` binary on files in a temporary folder.

pub(crate) mod lsp_wire;
pub(crate) mod repos;

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::rc::Rc;

/// One invocation of the binary.
pub(crate) struct Test {
    /// Shared by the copies [`Test::with_args`] makes; removed when the last one is dropped.
    dir: Rc<tempfile::TempDir>,
    args: Vec<String>,
    env: Vec<(String, String)>,
    env_removed: Vec<String>,
    stdin: Option<Vec<u8>>,
    cwd: Option<PathBuf>,
}

/// What the binary did.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    dir: PathBuf,
}

impl Test {
    /// A new test with an empty temporary folder.
    pub(crate) fn new() -> Self {
        Self {
            dir: Rc::new(tempfile::tempdir().expect("temporary folder")),
            args: Vec::new(),
            env: Vec::new(),
            env_removed: Vec::new(),
            stdin: None,
            cwd: None,
        }
    }

    /// Writes a file (creating folders) relative to the temporary folder.
    pub(crate) fn file(self, path: &str, text: &str) -> Self {
        let full = self.dir.path().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, text).unwrap();
        self
    }

    /// Writes a file of raw bytes (e.g. invalid UTF-8) relative to the temporary folder.
    pub(crate) fn file_bytes(self, path: &str, bytes: &[u8]) -> Self {
        let full = self.dir.path().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, bytes).unwrap();
        self
    }

    /// Creates a folder (and its parents) relative to the temporary folder.
    pub(crate) fn dir(self, path: &str) -> Self {
        std::fs::create_dir_all(self.dir.path().join(path)).unwrap();
        self
    }

    /// Writes `pipeline.kdl`.
    pub(crate) fn pipeline(self, text: &str) -> Self {
        self.file("pipeline.kdl", text)
    }

    /// Adds arguments.
    pub(crate) fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|s| (*s).to_owned()));
        self
    }

    /// Another invocation in the same folder, with the same environment, input and current folder
    /// but these arguments: for running several commands on the same files.
    pub(crate) fn with_args(&self, args: &[&str]) -> Self {
        Self {
            dir: Rc::clone(&self.dir),
            args: args.iter().map(|s| (*s).to_owned()).collect(),
            env: self.env.clone(),
            env_removed: self.env_removed.clone(),
            stdin: self.stdin.clone(),
            cwd: self.cwd.clone(),
        }
    }

    /// Sets an environment variable.
    pub(crate) fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Removes an environment variable, including the `NO_COLOR=1` set by default.
    pub(crate) fn env_remove(mut self, key: &str) -> Self {
        self.env_removed.push(key.to_owned());
        self
    }

    /// Feeds standard input.
    pub(crate) fn stdin(mut self, text: &str) -> Self {
        self.stdin = Some(text.as_bytes().to_vec());
        self
    }

    /// Feeds raw bytes (e.g. invalid UTF-8) to standard input.
    pub(crate) fn stdin_bytes(mut self, bytes: &[u8]) -> Self {
        self.stdin = Some(bytes.to_vec());
        self
    }

    /// Runs in a sub-folder of the temporary folder.
    pub(crate) fn current_dir(mut self, relative: &str) -> Self {
        self.cwd = Some(self.dir.path().join(relative));
        self
    }

    /// The temporary folder.
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The text of a file in the temporary folder.
    pub(crate) fn read(&self, path: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(path))
            .unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
    }

    /// Runs the binary and returns what it did; the folder stays alive as long as `self`.
    pub(crate) fn run(&self) -> Outcome {
        let mut command = self.command(env!("CARGO_BIN_EXE_helixflow"));
        command
            .args(&self.args)
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("helixflow starts");
        if let Some(text) = &self.stdin {
            // A command may end without reading all of it: that is its answer, not a failure
            // of the test.
            match child.stdin.take().unwrap().write_all(text) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => panic!("stdin: {e}"),
                _ => {}
            }
        }
        let output = child.wait_with_output().unwrap();
        Outcome {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            dir: self.dir.path().to_owned(),
        }
    }

    /// Runs the binary with standard output and error on a pseudo-terminal (through util-linux
    /// `script`), so that it believes it talks to a person; `None` when `script` cannot run.
    /// Standard error is mixed into `stdout`, and line ends come back as `\n`.
    pub(crate) fn run_in_terminal(&self) -> Option<Outcome> {
        let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
        let line = std::iter::once(env!("CARGO_BIN_EXE_helixflow"))
            .chain(self.args.iter().map(String::as_str))
            .map(quote)
            .collect::<Vec<_>>()
            .join(" ");
        let output = self
            .command("script")
            .args(["-qec", &line, "/dev/null"])
            .stdin(Stdio::null())
            .output()
            .ok()?;
        Some(Outcome {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).replace("\r\n", "\n"),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            dir: self.dir.path().to_owned(),
        })
    }

    /// `program` in the test's folder and environment: `NO_COLOR=1` and no `HELIXFLOW_PATH` unless
    /// the test says otherwise.
    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        command
            .current_dir(self.cwd.as_deref().unwrap_or(self.dir.path()))
            .env("NO_COLOR", "1")
            .env_remove("HELIXFLOW_PATH");
        for (key, value) in &self.env {
            command.env(key, value);
        }
        for key in &self.env_removed {
            command.env_remove(key);
        }
        command
    }
}

impl Outcome {
    /// Asserts the exit code, showing the output when it differs.
    pub(crate) fn code(self, expected: i32) -> Self {
        assert_eq!(
            self.code, expected,
            "exit code\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    /// stdout with the temporary folder's path replaced by `[TMP]`.
    pub(crate) fn stdout_redacted(&self) -> String {
        redact(&self.stdout, &self.dir)
    }

    /// stderr with the temporary folder's path replaced by `[TMP]`.
    pub(crate) fn stderr_redacted(&self) -> String {
        redact(&self.stderr, &self.dir)
    }

    /// The `code` of every diagnostic in a `lint --format json` report, in order.
    pub(crate) fn codes(&self) -> Vec<String> {
        self.json()
            .as_array()
            .unwrap_or_else(|| panic!("stdout is not a JSON array:\n{}", self.stdout))
            .iter()
            .map(|d| d["code"].as_str().expect("a code").to_owned())
            .collect()
    }

    /// stdout parsed as JSON.
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", self.stdout))
    }
}

/// Replaces temporary paths and the version in output, so snapshots are stable.
pub(crate) fn redact(text: &str, dir: &Path) -> String {
    let canonical = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
    text.replace(&canonical.display().to_string(), "[TMP]")
        .replace(&dir.display().to_string(), "[TMP]")
        .replace(env!("CARGO_PKG_VERSION"), "[VERSION]")
}

/// The newest run folder of `workspace` (`.helixflow/runs/<id>`). A second run in the same second
/// gets the id `<stamp>-N`: ordered by N, not as text, so `-10` comes after `-9`.
pub(crate) fn latest_run(workspace: &Path) -> PathBuf {
    let mut runs: Vec<(String, u64, PathBuf)> = run_folders(&workspace.join(".helixflow/runs"))
        .into_iter()
        .map(|path| {
            let id = path.file_name().unwrap().to_string_lossy().into_owned();
            let (stamp, n) = match id.match_indices('-').nth(1) {
                Some((at, _)) => (id[..at].to_owned(), id[at + 1..].parse().unwrap_or(0)),
                None => (id.clone(), 0),
            };
            (stamp, n, path)
        })
        .collect();
    runs.sort();
    runs.pop().expect("a run").2
}

/// The run folders in a runs folder (`.helixflow/runs`), in name order: every entry but the
/// `latest` link to the newest one. Empty when there is no runs folder yet.
pub(crate) fn run_folders(runs: &Path) -> Vec<PathBuf> {
    let mut folders: Vec<PathBuf> = std::fs::read_dir(runs)
        .map(|entries| {
            entries
                .map(|entry| entry.expect("a readable runs folder").path())
                .filter(|path| {
                    let name = path.file_name().unwrap().to_string_lossy();
                    name != "latest" && !name.starts_with('.')
                })
                .collect()
        })
        .unwrap_or_default();
    folders.sort();
    folders
}

/// A phase's entry in the `run.json` of the newest run.
pub(crate) fn run_phase(workspace: &Path, name: &str) -> serde_json::Value {
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(latest_run(workspace).join("run.json")).expect("run.json"),
    )
    .expect("run.json is JSON");
    summary["phases"]
        .as_array()
        .expect("a list of phases")
        .iter()
        .find(|phase| phase["name"] == name)
        .unwrap_or_else(|| panic!("no phase {name} in run.json"))
        .clone()
}

/// Makes `dir` a git repository with one commit of everything in it.
pub(crate) fn git_repo(dir: &Path) {
    for args in [
        &["init", "--quiet"][..],
        &["add", "-A"],
        &[
            "-c",
            "user.name=helixflow",
            "-c",
            "user.email=helixflow@example.com",
            "commit",
            "--quiet",
            "-m",
            "start",
        ],
    ] {
        let status = Command::new("git")
            .args(args)
            .current_dir(dir)
            .stdout(Stdio::null())
            .status()
            .expect("git runs");
        assert!(status.success(), "git {args:?}");
    }
}

/// Starts the binary for [`run_measured`] and writes its peak resident memory in KiB to the file
/// named first. The binary is forked from this small process: a child's peak counts the memory
/// of the process it was forked from, and the test process holds large inputs.
pub(crate) const MEASURE: &str = "import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
open(sys.argv[1], 'w').write(str(usage.ru_maxrss))
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
";

/// Runs the binary in `dir` with `args` (and `stdin`), killing it and failing the test should it
/// run longer than `hang`; its output and its peak resident memory in KiB (from `wait4`, in a
/// small parent: see [`MEASURE`]).
pub(crate) fn run_measured(
    dir: &Path,
    args: &[&str],
    stdin: &[u8],
    hang: std::time::Duration,
) -> (std::process::Output, u64) {
    let peak_file = tempfile::NamedTempFile::new().unwrap();
    let mut child = Command::new("python3")
        .args(["-c", MEASURE])
        .arg(peak_file.path())
        .arg(env!("CARGO_BIN_EXE_helixflow"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("HELIXFLOW_PATH")
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 starts");
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
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > hang {
            let group = libc::pid_t::try_from(child.id()).unwrap();
            // SAFETY: signals the process group this test started.
            unsafe { libc::kill(-group, libc::SIGKILL) };
            let _ = child.wait();
            panic!("helixflow {args:?} hung");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let _ = feeder.join();
    let peak = std::fs::read_to_string(peak_file.path())
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(0);
    let output = std::process::Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    };
    (output, peak)
}

/// Copies a bundled example (`from`) to `to` as a fresh clone has it: without the state folder
/// and the `out/` a run of it leaves (the README's quickstart command runs it in place, before
/// `cargo test`).
pub(crate) fn copy_example(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if entry.file_type().unwrap().is_dir() {
            if name != ".helixflow" && name != "out" {
                copy_example(&entry.path(), &to.join(&name));
            }
        } else {
            std::fs::copy(entry.path(), to.join(&name)).unwrap();
        }
    }
}
