//! `helixflow export github-actions`, run: the exported workflow's jobs executed locally in
//! dependency order, each in a fresh `git clone` of a test repository, with the artifacts moved
//! between them as Actions moves them, end with the same files and the same verdicts as one
//! `helixflow run`. Also `bundle apply`/`show` and `runs merge` on their own.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use yaml_rust2::{Yaml, YamlLoader};

const BIN: &str = env!("CARGO_BIN_EXE_helixflow");

/// The scripted agent: what each phase does to the workspace. `left` writes a syntax error on
/// its first attempt; every phase checks that the secret reached it.
const AGENT: &str = r##"
import os, sys
phase = sys.argv[1]
attempt = int(os.environ.get("HELIXFLOW_ATTEMPT", "1"))
if os.environ.get("API_TOKEN") != "token-from-secrets":
    print("no API_TOKEN")
    sys.exit(1)
def write(path, text, mode=None):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    if mode:
        os.chmod(path, mode)
if phase == "plan":
    write("docs/plan.md", "# Plan\n\nleft and right\n")
    os.makedirs("data", exist_ok=True)
    with open("data/blob.bin", "wb") as f:
        f.write(bytes(range(256)) * 3)
    write("tool.sh", "#!/bin/sh\necho tool\n", 0o755)
    os.remove("old.txt")
elif phase == "left":
    if attempt == 1:
        write("src/left.py", "def left(:\n")
    else:
        write("src/left.py", "def left():\n    return 'left'\n")
        if os.path.lexists("latest"):
            os.remove("latest")
        os.symlink("src/left.py", "latest")
elif phase == "right":
    plan = open("docs/plan.md").read()
    write("src/right.py", "PLAN_LENGTH = %d\n" % len(plan))
    with open("README.md", "a") as f:
        f.write("Right was here.\n")
elif phase == "final":
    names = sorted(os.listdir("src"))
    write("out/summary.txt", "\n".join(names) + "\n" + open("docs/plan.md").read())
    os.chmod("tool.sh", 0o700)
print("done " + phase)
"##;

const PIPELINE: &str = r#"pipeline "travel" {
    secret "API_TOKEN"
}
agent "bot" {
    command "python3" "agent.py" "{{ phase }}"
}
defaults {
    agent "bot"
    retries 1
}
phase "plan" {
    prompt "Plan"
    outputs { file "docs/plan.md"; file "data/blob.bin" }
}
phase "left" {
    depends-on "plan"
    prompt "Left"
    outputs { file "src/left.py" }
    gates { syntax }
}
phase "right" {
    depends-on "plan"
    prompt "Right"
    outputs { file "src/right.py" }
    gates { syntax }
}
phase "final" {
    depends-on "left" "right"
    run "python3 agent.py final"
    outputs { file "out/summary.txt" }
    gates { command "grep -q left.py out/summary.txt" name="lists-left" }
}
"#;

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?} in {}", dir.display());
}

/// A git repository with the pipeline, its agent and its exported workflow committed.
fn repository() -> tempfile::TempDir {
    let repo = tempfile::tempdir().unwrap();
    let r = repo.path();
    std::fs::write(r.join("pipeline.kdl"), PIPELINE).unwrap();
    std::fs::write(r.join("agent.py"), AGENT).unwrap();
    std::fs::write(r.join("README.md"), "# Travel\n").unwrap();
    std::fs::write(r.join("old.txt"), "to be deleted\n").unwrap();
    std::fs::write(r.join(".gitignore"), ".helixflow/\n").unwrap();
    git(r, &["init", "-q", "-b", "main"]);
    let out = Command::new(BIN)
        .args([
            "export",
            "github-actions",
            "pipeline.kdl",
            "--secret",
            "API_TOKEN",
        ])
        .args(["-o", ".github/workflows/helixflow.yml"])
        .current_dir(r)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    git(r, &["add", "-A"]);
    git(r, &["commit", "-q", "-m", "start"]);
    repo
}

fn clone(repo: &Path, into: &Path) {
    let status = Command::new("git")
        .args(["clone", "-q"])
        .arg(repo)
        .arg(into)
        .status()
        .unwrap();
    assert!(status.success());
}

/// The files of a tree (`.git` and the state folder left out): kind, executable bit, contents.
fn tree(root: &Path) -> BTreeMap<String, (String, bool, Vec<u8>)> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, (String, bool, Vec<u8>)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == ".git" || name == ".helixflow" {
                continue;
            }
            let path = entry.path();
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                let bytes = target.as_os_str().as_encoded_bytes().to_vec();
                out.insert(rel, ("symlink".into(), false, bytes));
            } else if meta.is_dir() {
                walk(root, &path, out);
            } else {
                let executable = meta.permissions().mode() & 0o111 != 0;
                out.insert(
                    rel,
                    ("file".into(), executable, std::fs::read(&path).unwrap()),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// Each phase's verdict in a run's `run.json`: status, attempts, failing gates.
fn verdicts(run: &Path) -> Vec<(String, String, u64, String)> {
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
    summary["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_owned(),
                p["status"].as_str().unwrap().to_owned(),
                p["attempts"].as_u64().unwrap(),
                p["failed-gates"].to_string(),
            )
        })
        .collect()
}

/// Runs a workflow's jobs the way Actions would, on this machine: jobs in the order their
/// `needs` allow, each in a fresh clone of `repo` with its own `RUNNER_TEMP`, artifacts kept in
/// one folder between jobs. Of the steps it executes only what a helixflow job is made of:
/// `actions/checkout` (the clone), the install step (the binary under test instead),
/// `actions/upload-artifact` and `actions/download-artifact`, `run:` lines that start
/// helixflow, split into words here and started without a shell, and the `--setup` commands,
/// started with `sh -c` in their `working-directory`.
struct Runner {
    repo: PathBuf,
    secrets: BTreeMap<String, String>,
    /// Artifacts by name.
    artifacts: tempfile::TempDir,
    /// Every job's clone and temporary folder, kept for the checks after.
    folders: Vec<tempfile::TempDir>,
    /// Each job's result (`success` or `failure`) and clone.
    results: BTreeMap<String, (String, PathBuf)>,
    /// The outputs of the steps of the job under way that have an `id`, by `<id>.<output>`.
    outputs: BTreeMap<String, String>,
}

impl Runner {
    fn new(repo: &Path, secrets: &[(&str, &str)]) -> Self {
        Self {
            repo: repo.to_owned(),
            secrets: secrets
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            artifacts: tempfile::tempdir().unwrap(),
            folders: Vec::new(),
            results: BTreeMap::new(),
            outputs: BTreeMap::new(),
        }
    }

    /// Runs every job; returns their ids in the order they ran.
    fn run(&mut self, workflow: &Yaml) -> Vec<String> {
        let jobs = workflow["jobs"].as_hash().expect("jobs");
        let needs = |job: &Yaml| -> Vec<String> {
            match &job["needs"] {
                Yaml::Array(list) => list
                    .iter()
                    .map(|n| n.as_str().unwrap().to_owned())
                    .collect(),
                Yaml::String(one) => vec![one.clone()],
                _ => Vec::new(),
            }
        };
        let mut done: Vec<String> = Vec::new();
        while done.len() < jobs.len() {
            let (id, job) = jobs
                .iter()
                .map(|(id, job)| (id.as_str().unwrap().to_owned(), job))
                .find(|(id, job)| !done.contains(id) && needs(job).iter().all(|n| done.contains(n)))
                .expect("a job whose needs are done (no cycle)");
            let always = job["if"].as_str() == Some("always()");
            let blocked = needs(job).iter().any(|n| self.results[n].0 != "success");
            if blocked && !always {
                self.results
                    .insert(id.clone(), ("skipped".into(), PathBuf::new()));
            } else {
                let result = self.job(workflow, job);
                self.results.insert(id.clone(), result);
            }
            done.push(id);
        }
        done
    }

    fn job(&mut self, workflow: &Yaml, job: &Yaml) -> (String, PathBuf) {
        let work = tempfile::tempdir().unwrap();
        let temp = tempfile::tempdir().unwrap();
        let clone_dir = work.path().join("repo");
        let mut env: BTreeMap<String, String> = BTreeMap::new();
        env.insert("RUNNER_TEMP".into(), temp.path().display().to_string());
        env.insert(
            "GITHUB_STEP_SUMMARY".into(),
            temp.path().join("summary.md").display().to_string(),
        );
        for scope in [&workflow["env"], &job["env"]] {
            if let Some(vars) = scope.as_hash() {
                for (k, v) in vars {
                    let value = self.expression(v.as_str().unwrap(), &env);
                    env.insert(k.as_str().unwrap().to_owned(), value);
                }
            }
        }
        let mut failed = false;
        for step in job["steps"].as_vec().expect("steps") {
            let condition = step["if"].as_str();
            let runs = match condition {
                None => !failed,
                Some("always()") => true,
                Some(expr) => {
                    // `needs.<job>.result == 'success'`
                    let needed = expr
                        .strip_prefix("needs.")
                        .and_then(|rest| rest.strip_suffix(".result == 'success'"))
                        .unwrap_or_else(|| panic!("a condition this runner reads: {expr}"));
                    !failed && self.results[needed].0 == "success"
                }
            };
            if !runs {
                continue;
            }
            let mut env = env.clone();
            if let Some(vars) = step["env"].as_hash() {
                for (k, v) in vars {
                    let value = self.expression(v.as_str().unwrap(), &env);
                    env.insert(k.as_str().unwrap().to_owned(), value);
                }
            }
            let ok = if let Some(uses) = step["uses"].as_str() {
                let with = |key: &str| step["with"][key].as_str().map(|v| self.expression(v, &env));
                match uses.split('@').next().unwrap() {
                    "actions/checkout" => {
                        clone(&self.repo, &clone_dir);
                        true
                    }
                    "actions/upload-artifact" => {
                        let name = with("name").unwrap();
                        let uploaded = self.upload(
                            &clone_dir,
                            &name,
                            &with("path").unwrap(),
                            with("if-no-files-found").as_deref() == Some("error"),
                        );
                        if let Some(id) = step["id"].as_str() {
                            self.outputs
                                .insert(format!("{id}.artifact-url"), format!("artifact:{name}"));
                        }
                        uploaded
                    }
                    "actions/download-artifact" => self.download(
                        &clone_dir,
                        with("name"),
                        with("pattern"),
                        &with("path").unwrap(),
                    ),
                    other => panic!("an action this runner does not know: {other}"),
                }
            } else if step["name"].as_str() == Some("Install helixflow") {
                true
            } else if step["name"].as_str() == Some("Link the report from the summary") {
                Self::shell(step["run"].as_str().expect("a run step"), &clone_dir, &env)
            } else if let Some(dir) = step["working-directory"].as_str() {
                let name = step["name"].as_str().unwrap_or_default();
                assert!(name.starts_with("Set up: "), "a shell step: {name}");
                let dir = clone_dir.join(self.expression(dir, &env));
                Self::shell(step["run"].as_str().expect("a run step"), &dir, &env)
            } else {
                let line = step["run"].as_str().expect("a run step");
                Self::command(line, &clone_dir, &env)
            };
            failed |= !ok;
        }
        self.folders.push(work);
        self.folders.push(temp);
        (if failed { "failure" } else { "success" }.into(), clone_dir)
    }

    /// `${{ secrets.X }}`, `${{ env.X }}`, `${{ runner.temp }}` in a value.
    fn expression(&self, text: &str, env: &BTreeMap<String, String>) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(at) = rest.find("${{") {
            out.push_str(&rest[..at]);
            let end = rest[at..].find("}}").expect("a closed expression") + at;
            let inner = rest[at + 3..end].trim();
            let value = if let Some(name) = inner.strip_prefix("secrets.") {
                self.secrets.get(name).cloned().unwrap_or_default()
            } else if let Some(name) = inner.strip_prefix("env.") {
                env[name].clone()
            } else if inner == "runner.temp" {
                env["RUNNER_TEMP"].clone()
            } else if let Some(output) = inner
                .strip_prefix("steps.")
                .and_then(|rest| rest.split_once(".outputs."))
            {
                self.outputs[&format!("{}.{}", output.0, output.1)].clone()
            } else {
                panic!("an expression this runner does not know: {inner}")
            };
            out.push_str(&value);
            rest = &rest[end + 2..];
        }
        out.push_str(rest);
        out
    }

    /// Paths relative to the clone; a `*` segment matches any one name.
    fn expand(base: &Path, pattern: &str) -> Vec<PathBuf> {
        let mut found = vec![if pattern.starts_with('/') {
            PathBuf::from("/")
        } else {
            base.to_owned()
        }];
        for part in pattern.split('/').filter(|p| !p.is_empty()) {
            found = found
                .into_iter()
                .flat_map(|dir| {
                    if part == "*" {
                        std::fs::read_dir(&dir)
                            .map(|entries| entries.map(|e| e.unwrap().path()).collect())
                            .unwrap_or_default()
                    } else {
                        vec![dir.join(part)]
                    }
                })
                .filter(|p| p.exists())
                .collect();
        }
        found
    }

    /// The files of `path` (one pattern a line; a line `!PATTERN/**` leaves out what is below
    /// PATTERN), symlinks followed as Actions follows them.
    fn upload(&self, clone: &Path, name: &str, path: &str, required: bool) -> bool {
        let (excluded, included): (Vec<&str>, Vec<&str>) = path
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .partition(|line| line.starts_with('!'));
        let excluded: Vec<PathBuf> = excluded
            .iter()
            .map(|line| {
                let pattern = line[1..].strip_suffix("/**").expect("`!FOLDER/**`");
                Self::expand(clone, pattern)
                    .into_iter()
                    .next()
                    .unwrap_or_default()
            })
            .collect();
        let found: Vec<PathBuf> = included
            .iter()
            .flat_map(|pattern| Self::expand(clone, pattern))
            .filter(|found| !excluded.iter().any(|ex| found.starts_with(ex)))
            .collect();
        if found.is_empty() {
            return !required;
        }
        let into = self.artifacts.path().join(name);
        assert!(!into.exists(), "artifact {name} uploaded twice");
        assert!(
            found.len() == 1 || found.iter().all(|f| !f.is_dir()),
            "{found:?}"
        );
        for source in found {
            if source.is_dir() {
                copy_dir_but(&source, &into, &excluded);
            } else {
                std::fs::create_dir_all(&into).unwrap();
                std::fs::copy(&source, into.join(source.file_name().unwrap())).unwrap();
            }
        }
        true
    }

    fn download(
        &self,
        clone: &Path,
        name: Option<String>,
        pattern: Option<String>,
        path: &str,
    ) -> bool {
        let into = clone.join(path);
        match (name, pattern) {
            (Some(name), None) => {
                let from = self.artifacts.path().join(&name);
                if !from.exists() {
                    return false;
                }
                copy_dir(&from, &into);
            }
            (None, Some(pattern)) => {
                let prefix = pattern.strip_suffix('*').expect("a prefix pattern");
                for entry in std::fs::read_dir(self.artifacts.path()).unwrap() {
                    let entry = entry.unwrap();
                    let artifact = entry.file_name().to_string_lossy().into_owned();
                    if artifact.starts_with(prefix) {
                        copy_dir(&entry.path(), &into.join(&artifact));
                    }
                }
            }
            _ => panic!("download-artifact takes name or pattern"),
        }
        true
    }

    /// Runs a `run:` line with `sh -c` in `dir`, as Actions runs a step's script.
    fn shell(line: &str, dir: &Path, env: &BTreeMap<String, String>) -> bool {
        let status = Command::new("sh")
            .args(["-ec", line])
            .current_dir(dir)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap())
            .envs(env)
            .stdin(Stdio::null())
            .status()
            .unwrap();
        status.success()
    }

    /// Starts a `run:` line that runs helixflow, without a shell: words split at spaces,
    /// `"…"` with `$NAME` expanded from the job's environment, and `>> FILE` appending stdout.
    fn command(line: &str, clone: &Path, env: &BTreeMap<String, String>) -> bool {
        let words = split_words(line, env);
        let (args, append) = match words.iter().position(|w| w == ">>") {
            Some(at) => (&words[..at], Some(PathBuf::from(&words[at + 1]))),
            None => (&words[..], None),
        };
        assert_eq!(
            args[0], "helixflow",
            "a run step that is not helixflow: {line}"
        );
        let output = Command::new(BIN)
            .args(&args[1..])
            .current_dir(clone)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap())
            .env("HOME", std::env::var("HOME").unwrap_or_default())
            .envs(env)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        if let Some(file) = append {
            use std::io::Write;
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(file)
                .unwrap()
                .write_all(&output.stdout)
                .unwrap();
        }
        if !output.status.success() {
            eprintln!(
                "step failed: {line}\n{}\n{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        output.status.success()
    }
}

fn split_words(line: &str, env: &BTreeMap<String, String>) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.trim().chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                quoted = !quoted;
                in_word = true;
            }
            ' ' if !quoted => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '$' => {
                let mut name = String::new();
                while let Some(&n) = chars.peek() {
                    if n.is_ascii_alphanumeric() || n == '_' {
                        name.push(n);
                        chars.next();
                    } else {
                        break;
                    }
                }
                word.push_str(
                    env.get(&name)
                        .unwrap_or_else(|| panic!("${name} is not set")),
                );
                in_word = true;
            }
            other => {
                assert!(
                    !"'\\`*?;&|<(){}".contains(other),
                    "a shell character in: {line}"
                );
                word.push(other);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// `copy_dir`, following symlinks, without what is below `excluded`.
fn copy_dir_but(from: &Path, to: &Path, excluded: &[PathBuf]) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        if excluded.iter().any(|ex| path.starts_with(ex)) {
            continue;
        }
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir_but(&path, &target, excluded);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn latest_run(workspace: &Path) -> PathBuf {
    let mut runs = crate::common::run_folders(&workspace.join(".helixflow/runs"));
    runs.pop().expect("a run")
}

#[test]
fn the_exported_jobs_run_in_fresh_clones_end_as_one_local_run_does() {
    let repo = repository();
    let secrets = [("API_TOKEN", "token-from-secrets")];

    // One local run, in a clone of its own.
    let local = tempfile::tempdir().unwrap();
    let local_dir = local.path().join("repo");
    clone(repo.path(), &local_dir);
    let out = Command::new(BIN)
        .args(["run", "--no-progress", "pipeline.kdl"])
        .current_dir(&local_dir)
        .env("API_TOKEN", "token-from-secrets")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // The workflow, job by job.
    let text =
        std::fs::read_to_string(repo.path().join(".github/workflows/helixflow.yml")).unwrap();
    let workflow = &YamlLoader::load_from_str(&text).unwrap()[0];
    let mut runner = Runner::new(repo.path(), &secrets);
    let order = runner.run(workflow);
    assert_eq!(
        order,
        [
            "phase-plan",
            "phase-left",
            "phase-right",
            "phase-final",
            "helixflow-run"
        ]
    );
    for (job, (result, _)) in &runner.results {
        assert_eq!(result, "success", "job {job}");
    }
    // Each phase job ran its phase only, on the files its dependencies' bundles brought.
    let (_, left) = &runner.results["phase-left"];
    assert!(left.join("docs/plan.md").is_file());
    assert!(!left.join("src/right.py").exists());

    let (_, last) = &runner.results["helixflow-run"];
    let local_tree = tree(&local_dir);
    let ci_tree = tree(last);
    assert_eq!(
        local_tree.keys().collect::<Vec<_>>(),
        ci_tree.keys().collect::<Vec<_>>()
    );
    assert_eq!(local_tree, ci_tree);
    assert_eq!(ci_tree["latest"].0, "symlink");
    assert!(ci_tree["tool.sh"].1, "tool.sh stays executable");
    assert!(!ci_tree.contains_key("old.txt"));
    assert_eq!(ci_tree["data/blob.bin"].2.len(), 768);

    // The joined journal: one run with the same verdicts, which `runs` and `show` read.
    let joined = latest_run(last);
    assert_eq!(verdicts(&joined), verdicts(&latest_run(&local_dir)));
    assert_eq!(
        verdicts(&joined)
            .iter()
            .map(|(name, status, attempts, _)| format!("{name} {status} {attempts}"))
            .collect::<Vec<_>>(),
        [
            "plan passed 1",
            "left passed 2",
            "right passed 1",
            "final passed 1"
        ]
    );
    let runs = Command::new(BIN)
        .args(["runs"])
        .current_dir(last)
        .output()
        .unwrap();
    let runs = String::from_utf8_lossy(&runs.stdout);
    assert!(
        runs.contains("passed") && runs.contains("4/4 passed"),
        "{runs}"
    );
    let show = Command::new(BIN)
        .args(["show", "latest", "left"])
        .current_dir(last)
        .output()
        .unwrap();
    let show = String::from_utf8_lossy(&show.stdout);
    assert!(
        show.contains("attempt 1") && show.contains("attempt 2"),
        "{show}"
    );
    assert!(
        runner
            .artifacts
            .path()
            .join("helixflow-junit/junit.xml")
            .is_file()
    );
    let junit =
        std::fs::read_to_string(runner.artifacts.path().join("helixflow-junit/junit.xml")).unwrap();
    assert!(junit.contains(r#"<testsuite name="final""#), "{junit}");
    // The HTML report of the joined run, uploaded and linked from the job's summary.
    let report =
        std::fs::read_to_string(runner.artifacts.path().join("helixflow-report/report.html"))
            .unwrap();
    for phase in ["plan", "left", "right", "final"] {
        assert!(
            report.contains(&format!("<span class=\"pname\">{phase}</span>")),
            "{phase}"
        );
    }
    let summary =
        std::fs::read_to_string(runner.folders.last().unwrap().path().join("summary.md")).unwrap();
    assert!(
        summary.contains("[report.html](artifact:helixflow-report)"),
        "{summary}"
    );
    // The journals hold each run once: not again through the `latest` link.
    for entry in std::fs::read_dir(runner.artifacts.path()).unwrap() {
        let artifact = entry.unwrap().path();
        assert!(!artifact.join("latest").exists(), "{}", artifact.display());
    }
}

/// What the phases need besides helixflow (the agent's CLI, the project's test dependencies) is
/// set up with `--setup`: each phase's job runs the commands, in order, in the workspace (here a
/// sub-folder of the repository), after applying the bundles it depends on and before its phase.
/// Without them the same workflow fails.
#[test]
fn setup_commands_run_in_the_workspace_before_each_phase() {
    let export = |setup: &[&str]| {
        let repo = tempfile::tempdir().unwrap();
        let r = repo.path();
        std::fs::create_dir_all(r.join("app")).unwrap();
        std::fs::write(
            r.join("app/pipeline.kdl"),
            "pipeline \"deps\"\n\
             phase \"a\" {\n    run \"mkdir -p out && cp deps/tool.txt out/a.txt\"\n    outputs { file \"out/a.txt\" }\n}\n\
             phase \"b\" {\n    depends-on \"a\"\n    run \"cat deps/tool.txt out/a.txt > out/b.txt\"\n    outputs { file \"out/b.txt\" }\n}\n",
        )
        .unwrap();
        std::fs::write(r.join(".gitignore"), ".helixflow/\ndeps/\n").unwrap();
        git(r, &["init", "-q", "-b", "main"]);
        let mut command = Command::new(BIN);
        command.args(["export", "github-actions", "app/pipeline.kdl"]);
        for s in setup {
            command.args(["--setup", s]);
        }
        let out = command
            .args(["-o", ".github/workflows/helixflow.yml"])
            .current_dir(r)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        git(r, &["add", "-A"]);
        git(r, &["commit", "-q", "-m", "start"]);
        let text = std::fs::read_to_string(r.join(".github/workflows/helixflow.yml")).unwrap();
        (repo, text)
    };

    let (repo, text) = export(&[
        "mkdir -p deps && echo installed > deps/tool.txt",
        "echo second >> deps/tool.txt",
    ]);
    assert!(
        text.contains(
            "      - name: 'Set up: echo second >> deps/tool.txt'\n\
             \x20       working-directory: ${{ env.HELIXFLOW_WORKSPACE }}\n\
             \x20       run: 'echo second >> deps/tool.txt'\n\
             \x20     - name: 'Run phase b'\n"
        ),
        "{text}"
    );
    let mut runner = Runner::new(repo.path(), &[]);
    let workflow = &YamlLoader::load_from_str(&text).unwrap()[0];
    runner.run(workflow);
    for job in ["phase-a", "phase-b", "helixflow-run"] {
        assert_eq!(runner.results[job].0, "success", "{job}");
    }
    let (_, last) = &runner.results["helixflow-run"];
    assert_eq!(
        std::fs::read_to_string(last.join("app/out/b.txt")).unwrap(),
        "installed\nsecond\ninstalled\nsecond\n"
    );
    // The last job runs no phase, and sets nothing up.
    assert!(!last.join("app/deps").exists());

    let (repo, text) = export(&[]);
    assert!(!text.contains("Set up"), "{text}");
    let mut runner = Runner::new(repo.path(), &[]);
    runner.run(&YamlLoader::load_from_str(&text).unwrap()[0]);
    assert_eq!(runner.results["phase-a"].0, "failure");
    assert_eq!(runner.results["phase-b"].0, "skipped");
}

#[test]
fn a_phase_that_fails_in_its_job_fails_the_joined_run_and_its_dependents_do_not_run() {
    let repo = repository();
    // Without the secret every agent fails: `plan` fails, the rest never start.
    let mut runner = Runner::new(repo.path(), &[]);
    let text =
        std::fs::read_to_string(repo.path().join(".github/workflows/helixflow.yml")).unwrap();
    let workflow = &YamlLoader::load_from_str(&text).unwrap()[0];
    runner.run(workflow);
    let result = |job: &str| runner.results[job].0.clone();
    assert_eq!(result("phase-plan"), "failure");
    assert_eq!(result("phase-left"), "skipped");
    assert_eq!(result("phase-final"), "skipped");
    assert_eq!(result("helixflow-run"), "success");
    let (_, last) = &runner.results["helixflow-run"];
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(latest_run(last).join("run.json")).unwrap())
            .unwrap();
    assert_eq!(summary["status"], "failed");
    assert_eq!(summary["phases"][0]["name"], "plan");
    assert_eq!(summary["phases"][0]["status"], "failed");
    assert!(!last.join("docs/plan.md").exists());
}

#[test]
fn every_phase_name_reaches_the_workflow_as_a_literal() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git(d, &["init", "-q"]);
    std::fs::write(
        d.join("pipeline.kdl"),
        "pipeline \"p\"\nphase \"it's ${{ secrets.X }}; rm -rf /\" {\n    run \"true\"\n}\nphase \"b\" {\n    depends-on \"it's ${{ secrets.X }}; rm -rf /\"\n    run \"true\"\n}\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["export", "github-actions", "pipeline.kdl"])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let workflow = &YamlLoader::load_from_str(&text).unwrap()[0];
    let jobs: BTreeSet<String> = workflow["jobs"]
        .as_hash()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(jobs.len(), 3);
    let first = jobs.iter().find(|j| j.starts_with("phase-it")).unwrap();
    assert!(
        first
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    );
    assert_eq!(
        workflow["jobs"][first.as_str()]["env"]["HELIXFLOW_PHASE_NAME"].as_str(),
        Some("it's ${{ '${{' }} secrets.X }}; rm -rf /")
    );
    assert!(!text.contains("run: helixflow run --only 'it"), "{text}");
    // Outside a git repository there is no checkout to run on.
    let plain = tempfile::tempdir().unwrap();
    std::fs::write(plain.path().join("pipeline.kdl"), PIPELINE).unwrap();
    let out = Command::new(BIN)
        .args(["export", "github-actions", "pipeline.kdl"])
        .current_dir(plain.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not in a git repository"));
}

#[test]
fn bundle_apply_check_names_conflicts_and_show_lists_the_changes() {
    let repo = repository();
    let work = tempfile::tempdir().unwrap();
    let w = work.path().join("repo");
    clone(repo.path(), &w);
    let out = Command::new(BIN)
        .args(["run", "--no-progress", "--only", "plan", "pipeline.kdl"])
        .current_dir(&w)
        .env("API_TOKEN", "token-from-secrets")
        .output()
        .unwrap();
    assert!(out.status.success());
    let bundle = latest_run(&w).join("phases/plan/bundle.hxb");
    let show = Command::new(BIN)
        .args(["bundle", "show"])
        .arg(&bundle)
        .output()
        .unwrap();
    let show = String::from_utf8_lossy(&show.stdout);
    for line in [
        "created   data/blob.bin",
        "created   docs/plan.md",
        "created   tool.sh  755",
        "deleted   old.txt",
    ] {
        assert!(show.contains(line), "{line} in {show}");
    }

    let other = work.path().join("other");
    clone(repo.path(), &other);
    let check = |dir: &Path| {
        Command::new(BIN)
            .args(["bundle", "apply", "--check", "-C"])
            .arg(dir)
            .arg(&bundle)
            .output()
            .unwrap()
    };
    assert!(check(&other).status.success());
    std::fs::write(other.join("old.txt"), "edited elsewhere\n").unwrap();
    std::fs::create_dir_all(other.join("docs")).unwrap();
    std::fs::write(other.join("docs/plan.md"), "another plan\n").unwrap();
    let out = check(&other);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("2 conflicts"), "{stderr}");
    assert!(
        stderr.contains("docs/plan.md: exists already, with other contents"),
        "{stderr}"
    );
    assert!(stderr.contains("old.txt: changed since"), "{stderr}");
    // Applying refuses the same way and writes nothing.
    let out = Command::new(BIN)
        .args(["bundle", "apply", "-C"])
        .arg(&other)
        .arg(&bundle)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(!other.join("tool.sh").exists());

    std::fs::write(work.path().join("junk.hxb"), "not a bundle").unwrap();
    let out = Command::new(BIN)
        .args(["bundle", "show"])
        .arg(work.path().join("junk.hxb"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a readable bundle"));
}

#[test]
fn the_readme_shows_the_workflow_export_writes_for_the_four_phase_example() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let start = readme
        .find("<!-- four-phase workflow: start -->\n```yaml\n")
        .expect("the README's workflow");
    let shown = &readme[start..];
    let shown = &shown[shown.find("```yaml\n").unwrap() + 8
        ..shown
            .find("```\n<!-- four-phase workflow: end -->")
            .unwrap()];
    let out = Command::new(BIN)
        .args([
            "export",
            "github-actions",
            "examples/four-phase/pipeline.kdl",
        ])
        .args(["--secret", "ANTHROPIC_API_KEY"])
        .current_dir(root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        shown,
        String::from_utf8_lossy(&out.stdout),
        "regenerate the README's workflow"
    );
}

#[test]
fn run_no_bundles_writes_none_and_walks_only_for_checks_that_read_the_changes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("pipeline.kdl"),
        "pipeline \"p\"\nphase \"plain\" {\n    run \"echo hi > plain.txt\"\n}\nphase \"scoped\" {\n    depends-on \"plain\"\n    run \"echo hi > scoped.txt\"\n    scope \"scoped.txt\"\n}\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["run", "--no-progress", "--no-bundles", "pipeline.kdl"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let run = latest_run(dir.path());
    assert!(!run.join("phases/plain/bundle.hxb").exists());
    assert!(!run.join("phases/scoped/bundle.hxb").exists());
    assert!(!run.join("phases/plain/attempt-1/changes.json").exists());
    assert!(run.join("phases/scoped/attempt-1/changes.json").is_file());
}

#[test]
fn a_phase_whose_file_name_a_bundle_cannot_carry_passes_with_a_warning_and_no_bundle() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("pipeline.kdl"),
        "pipeline \"p\"\nphase \"one\" {\n    run \"touch \\\"$(printf 'a\\\\377b')\\\"\"\n}\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["run", "--no-progress", "--bundles", "pipeline.kdl"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = latest_run(dir.path());
    assert!(!run.join("phases/one/bundle.hxb").exists());
    let journal = std::fs::read_to_string(run.join("events.jsonl")).unwrap();
    assert!(
        journal.contains("its bundle could not be written") && journal.contains("not UTF-8"),
        "{journal}"
    );
}

#[test]
fn an_isolated_phase_bundles_its_passing_attempt_and_it_applies_to_a_fresh_clone() {
    let repo = tempfile::tempdir().unwrap();
    let r = repo.path();
    std::fs::write(r.join(".gitignore"), ".helixflow/\n").unwrap();
    std::fs::write(r.join("notes.txt"), "one\n").unwrap();
    std::fs::write(
        r.join("agent.py"),
        "import os\nattempt = int(os.environ['HELIXFLOW_ATTEMPT'])\nopen('x.py', 'w').write('def x(:\\n' if attempt == 1 else 'def x():\\n    return 1\\n')\nif attempt == 2:\n    open('notes.txt', 'a').write('two\\n')\n",
    )
    .unwrap();
    std::fs::write(
        r.join("pipeline.kdl"),
        "pipeline \"p\"\nagent \"bot\" {\n    command \"python3\" \"agent.py\"\n}\nphase \"x\" {\n    agent \"bot\"\n    prompt \"x\"\n    isolation \"worktree\"\n    outputs { file \"x.py\" }\n    gates { syntax }\n}\n",
    )
    .unwrap();
    git(r, &["init", "-q", "-b", "main"]);
    git(r, &["add", "-A"]);
    git(r, &["commit", "-q", "-m", "start"]);
    let out = Command::new(BIN)
        .args(["run", "--no-progress", "pipeline.kdl"])
        .current_dir(r)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let bundle = latest_run(r).join("phases/x/bundle.hxb");
    let show = Command::new(BIN)
        .args(["bundle", "show"])
        .arg(&bundle)
        .output()
        .unwrap();
    let show = String::from_utf8_lossy(&show.stdout);
    assert!(show.contains("attempt 2"), "{show}");
    assert!(
        show.contains("created   x.py") && show.contains("modified  notes.txt"),
        "{show}"
    );

    let work = tempfile::tempdir().unwrap();
    let fresh = work.path().join("repo");
    clone(r, &fresh);
    let out = Command::new(BIN)
        .args(["bundle", "apply", "-C"])
        .arg(&fresh)
        .arg(&bundle)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(tree(&fresh), tree(r));
}
