//! The verdict on real projects: a phase is judged on everything its attempts changed together,
//! never on what Python's caches or a phase running alongside it wrote.

use crate::common;

use std::path::Path;

use crate::scope_protect::ALONGSIDE;
use common::{Test, git_repo, latest_run, run_phase};
use serde_json::Value;

fn status(workspace: &Path, phase: &str) -> String {
    run_phase(workspace, phase)["status"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The reports of attempt `attempt` of `phase`.
fn gates(workspace: &Path, phase: &str, attempt: u32) -> Vec<Value> {
    let path = latest_run(workspace).join(format!("phases/{phase}/attempt-{attempt}/gates.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str::<Value>(&text)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

fn gate<'g>(reports: &'g [Value], name: &str) -> &'g Value {
    reports
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no gate {name} in {reports:?}"))
}

/// A small Python package with a unittest suite that imports it: running the suite writes
/// `src/calc/__pycache__/*.pyc`, which `.gitignore` ignores.
fn python_package() -> Test {
    Test::new()
        .file(".gitignore", "__pycache__/\n.helixflow/\n")
        .file("src/calc/__init__.py", "")
        .file("src/calc/ops.py", "def add(a, b):\n    return a + b\n")
        .file(
            "tests/test_ops.py",
            "import sys, unittest\nsys.path.insert(0, 'src')\nfrom calc.ops import add\n\n\
             class T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n",
        )
}

#[test]
fn caches_a_test_gate_writes_under_a_protected_folder_are_not_the_agents_changes() {
    let test = python_package()
        .file(
            "writer.sh",
            "cat > tests/test_more.py <<'PY'\nimport sys, unittest\nsys.path.insert(0, 'src')\n\
             from calc.ops import add\n\nclass M(unittest.TestCase):\n    def test_zero(self):\n        \
             self.assertEqual(add(0, 0), 0)\nPY\n",
        )
        .pipeline(
            r#"pipeline "p"
phase "tests" {
    run "sh writer.sh && python3 -m unittest discover -s tests -q"
    scope "tests/**"
    protect "src/**"
    gates {
        syntax
        command "python3 -m unittest discover -s tests -q" name="tests"
    }
    retries 0
}
"#,
        );
    git_repo(test.path());
    let out = test
        .with_args(&["run", "--no-progress"])
        .env_remove("PYTHONDONTWRITEBYTECODE")
        .run();
    assert!(
        test.path().join("src/calc/__pycache__").is_dir(),
        "Python wrote its cache: the test means something"
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(status(test.path(), "tests"), "passed");
}

#[test]
fn a_protected_file_an_agent_names_is_judged_even_where_ignored() {
    let test = Test::new()
        .file(".gitignore", ".env\n.helixflow/\n")
        .file(".env", "TOKEN=old\n")
        .file("edit.sh", "echo TOKEN=new > .env\necho done > out.txt\n")
        .pipeline(
            r#"pipeline "p"
phase "work" {
    run "sh edit.sh"
    protect ".env"
    retries 0
}
"#,
        );
    git_repo(test.path());
    test.with_args(&["run", "--no-progress"]).run().code(1);
    let reports = gates(test.path(), "work", 1);
    let protect = gate(&reports, "protect");
    assert_eq!(protect["status"], "failed");
    assert_eq!(protect["details"][0], "protected file `.env` was modified");
}

/// Attempt 1 edits a protected file and writes a stray file outside the scope, then fails its
/// gate; attempt 2 does the work and leaves both alone.
const LEAVES_A_MESS: &str = r#"if [ "$HELIXFLOW_ATTEMPT" = 1 ]; then
  echo tampered >> src/core.py
  echo stray > notes.txt
  exit 0
fi
echo "def f():\n    return 1" > work/out.py
"#;

#[test]
fn a_failed_attempts_forbidden_changes_fail_the_phase_until_they_are_undone() {
    let test = Test::new()
        .file("src/core.py", "X = 1\n")
        .file("work/.keep", "")
        .file("agent.sh", LEAVES_A_MESS)
        .pipeline(
            r#"pipeline "p"
phase "work" {
    run "sh agent.sh"
    outputs { file "work/out.py" }
    scope "work/**"
    protect "src/**"
    retries 1
}
"#,
        );
    git_repo(test.path());
    test.with_args(&["run", "--no-progress"]).run().code(1);
    let ws = test.path();
    assert_eq!(status(ws, "work"), "failed");
    let second = gates(ws, "work", 2);
    assert_eq!(gate(&second, "outputs")["status"], "passed");
    let protect = gate(&second, "protect");
    assert_eq!(protect["status"], "failed", "{protect}");
    assert_eq!(
        protect["details"][0],
        "protected file `src/core.py` was modified"
    );
    let scope = gate(&second, "scope");
    assert_eq!(scope["status"], "failed", "{scope}");
    assert!(
        scope["details"][0]
            .as_str()
            .unwrap()
            .starts_with("`notes.txt` was created"),
        "{scope}"
    );
    // What attempt 2 itself changed is in its folder, as before.
    let changes: Value = serde_json::from_str(
        &std::fs::read_to_string(latest_run(ws).join("phases/work/attempt-2/changes.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(changes["created"], serde_json::json!(["work/out.py"]));
    assert_eq!(changes["modified"], serde_json::json!([]));
}

#[test]
fn a_retry_that_undoes_the_forbidden_changes_passes() {
    let undoing = LEAVES_A_MESS.replace(
        "echo \"def f()",
        "git checkout -- src/core.py && rm notes.txt\necho \"def f()",
    );
    let test = Test::new()
        .file("src/core.py", "X = 1\n")
        .file("work/.keep", "")
        .file("agent.sh", &undoing)
        .pipeline(
            r#"pipeline "p"
phase "work" {
    run "sh agent.sh"
    outputs { file "work/out.py" }
    scope "work/**"
    protect "src/**"
    retries 1
}
"#,
        );
    git_repo(test.path());
    test.with_args(&["run", "--no-progress"]).run().code(0);
    assert_eq!(status(test.path(), "work"), "passed");
    assert_eq!(test.read("src/core.py"), "X = 1\n");
}

#[test]
fn protect_leaves_a_phase_running_alongside_its_own_files() {
    let test = Test::new().file("alongside.sh", ALONGSIDE).pipeline(
        r#"pipeline "p" {
    max-parallel 2
}
phase "code" {
    run "sh alongside.sh code docs"
    scope "code/**"
    retries 0
}
phase "docs" {
    run "sh alongside.sh docs code"
    scope "docs/**"
    protect "code/**"
    retries 0
}
"#,
    );
    test.with_args(&["run", "--no-progress"]).run().code(0);
    let reports = gates(test.path(), "docs", 1);
    let protect = gate(&reports, "protect");
    assert_eq!(protect["status"], "passed", "{protect}");
    assert_eq!(
        protect["details"][0],
        "1 change left to phase \"code\", which ran at the same time: `code/file`"
    );
}

/// A pipeline whose worker counts its runs and whose verifier answers what `verifier.py` says.
fn reviewed(verifier: &str, markers: &Path) -> Test {
    Test::new()
        .env("MARKER_DIR", markers.to_str().unwrap())
        .file("verifier.py", verifier)
        .file(
            "worker.sh",
            "echo run >> \"$MARKER_DIR/worker-ran\"\necho '# add' > doc.md\n",
        )
        .pipeline(
            r#"pipeline "p"
agent "bot" {
    command "sh" "worker.sh" "{{ prompt }}"
}
agent "reviewer" {
    command "python3" "verifier.py" "{{ prompt }}"
}
phase "a" {
    agent "bot"
    prompt "Document add."
    verify "external" "sub-agent"
    verifier "reviewer"
    retries 3
    outputs {
        file "doc.md"
    }
}
"#,
        )
}

const CHATTY_VERIFIER: &str = r#"import os
from pathlib import Path
Path(os.environ["MARKER_DIR"], "verifier-ran").open("a").write("review\n")
print("I had a look and it seems fine to me.")
"#;

#[test]
fn a_verifier_that_gives_no_verdict_is_asked_again_and_never_reruns_the_worker() {
    let markers = tempfile::tempdir().unwrap();
    let test = reviewed(CHATTY_VERIFIER, markers.path());
    let out = test.with_args(&["run", "--no-progress"]).run();
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    let read = |name: &str| std::fs::read_to_string(markers.path().join(name)).unwrap();
    assert_eq!(
        read("worker-ran"),
        "run\n",
        "the worker ran once, its gates passed"
    );
    assert_eq!(
        read("verifier-ran"),
        "review\nreview\n",
        "the verifier was asked twice"
    );
    let phase = run_phase(test.path(), "a");
    assert_eq!(phase["status"], "failed");
    let reason = phase["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("the verifier \"reviewer\" gave no usable review in 2 tries"),
        "{phase:#}"
    );
    let run = latest_run(test.path());
    assert!(
        run.join("phases/a/attempt-1/review-2").is_dir(),
        "each review keeps its own folder"
    );
    assert!(
        !run.join("phases/a/attempt-2").exists(),
        "no second attempt of the worker"
    );
}

const FLAKY_VERIFIER: &str = r#"import json, os
from pathlib import Path
marker = Path(os.environ["MARKER_DIR"], "verifier-ran")
first = not marker.exists()
marker.open("a").write("review\n")
print("thinking..." if first else json.dumps({"success": True, "checks_passed": ["add documented"]}))
"#;

#[test]
fn a_verifier_that_answers_on_its_second_try_passes_the_phase() {
    let markers = tempfile::tempdir().unwrap();
    let test = reviewed(FLAKY_VERIFIER, markers.path());
    let out = test.with_args(&["run", "--no-progress"]).run();
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let read = |name: &str| std::fs::read_to_string(markers.path().join(name)).unwrap();
    assert_eq!(read("worker-ran"), "run\n");
    assert_eq!(read("verifier-ran"), "review\nreview\n");
    assert_eq!(status(test.path(), "a"), "passed");
}

#[test]
fn a_near_miss_never_points_at_another_phases_declared_output() {
    let test = Test::new().pipeline(
        r#"pipeline "p"
phase "plan" {
    run "mkdir -p docs/plans && echo plan > docs/plans/split_at.md"
    outputs { file "docs/plans/split_at.md" }
}
phase "docs" {
    depends-on "plan"
    run "mkdir -p notes && echo stray > notes/split_at.md"
    outputs { file "docs/split_at.md" }
    retries 0
}
"#,
    );
    test.with_args(&["run", "--no-progress"]).run().code(1);
    let reports = gates(test.path(), "docs", 1);
    let outputs = gate(&reports, "outputs");
    assert_eq!(
        outputs["details"][0],
        "missing `docs/split_at.md`; found `notes/split_at.md` — written to the wrong folder?"
    );
}

const IDEMPOTENT: &str = r#"pipeline "p"
phase "work" {
    run "echo done > out.txt"
    outputs { file "out.txt" }
    gates {
        changes min=1
        command "test -f out.txt && ! test -e broken" name="check"
    }
    retries 0
}
"#;

#[test]
fn a_rerun_whose_work_is_already_in_place_passes_changes() {
    let test = Test::new().pipeline(IDEMPOTENT);
    test.with_args(&["run", "--no-progress"]).run().code(0);
    let first = latest_run(test.path());
    let out = test.with_args(&["run", "--no-progress", "--force"]).run();
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let reports = gates(test.path(), "work", 1);
    let changes = gate(&reports, "changes");
    assert_eq!(changes["status"], "passed");
    let run_id = first.file_name().unwrap().to_str().unwrap();
    assert_eq!(
        changes["details"][0],
        format!(
            "nothing changed, and nothing had to: the phase passed in run {run_id} and its work is in place (every other gate passed)"
        )
    );
}

#[test]
fn a_rerun_that_changes_nothing_still_fails_changes_when_another_gate_fails() {
    let test = Test::new().pipeline(IDEMPOTENT);
    test.with_args(&["run", "--no-progress"]).run().code(0);
    std::fs::write(test.path().join("broken"), "").unwrap();
    test.with_args(&["run", "--no-progress", "--force"])
        .run()
        .code(1);
    let reports = gates(test.path(), "work", 1);
    assert_eq!(gate(&reports, "check")["status"], "failed");
    let changes = gate(&reports, "changes");
    assert_eq!(changes["status"], "failed");
    assert_eq!(
        changes["details"][0],
        "the attempt changed 0 files; at least 1 expected — was the work done?"
    );
}

#[test]
fn a_first_run_that_changes_nothing_fails_changes() {
    let test = Test::new().file("out.txt", "done\n").pipeline(IDEMPOTENT);
    test.with_args(&["run", "--no-progress"]).run().code(1);
    assert_eq!(
        gate(&gates(test.path(), "work", 1), "changes")["status"],
        "failed"
    );
}

/// Writes the file `$3` once the phase `$2` has started too, and exits once `$4` exists as well.
const WRITES_ALONGSIDE: &str = r#"sync="$HELIXFLOW_RUN_DIR/started"
mkdir -p "$sync" && touch "$sync/$1"
i=0; while [ ! -e "$sync/$2" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
mkdir -p "$(dirname "$3")" && echo "$1" > "$3"
i=0; while [ ! -e "$4" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
"#;

#[test]
fn a_file_another_phase_wrote_to_the_wrong_folder_is_left_to_it() {
    let test = Test::new().file("w.sh", WRITES_ALONGSIDE).pipeline(
        r#"pipeline "p" {
    max-parallel 2
}
phase "tests" {
    run "sh w.sh tests docs tests/test_nth.py docs/nth.md"
    outputs { file "pkg/tests/test_nth.py" }
    scope "pkg/tests/**"
    retries 0
    on-failure "continue"
}
phase "docs" {
    run "sh w.sh docs tests docs/nth.md tests/test_nth.py"
    outputs { file "docs/nth.md" }
    scope "docs/**"
    retries 0
    on-failure "continue"
}
"#,
    );
    test.with_args(&["run", "--no-progress"]).run().code(1);
    let ws = test.path();
    assert_eq!(status(ws, "docs"), "passed");
    let docs = gates(ws, "docs", 1);
    assert_eq!(
        gate(&docs, "scope")["details"][0],
        "1 change left to phase \"tests\", which ran at the same time: `tests/test_nth.py`"
    );
    assert_eq!(status(ws, "tests"), "failed");
    let tests = gates(ws, "tests", 1);
    assert_eq!(gate(&tests, "scope")["status"], "failed");
    assert_eq!(
        gate(&tests, "outputs")["details"][0],
        "missing `pkg/tests/test_nth.py`; found `tests/test_nth.py` — written to the wrong folder?"
    );
}

#[test]
fn a_lazy_rerun_fails_changes_once_the_earlier_work_was_undone() {
    let test = Test::new()
        .file("src.py", "X = 1\n")
        .file(
            "agent.sh",
            "[ -e LAZY ] && exit 0\necho 'def every_nth(): pass' >> src.py\n",
        )
        .pipeline(
            r#"pipeline "p"
phase "implement" {
    run "sh agent.sh"
    gates {
        changes min=1
        command "true" name="weak"
    }
    retries 0
}
"#,
        );
    test.with_args(&["run", "--no-progress"]).run().code(0);
    // The user undoes the work, and the agent turns lazy.
    std::fs::write(test.path().join("src.py"), "X = 1\n").unwrap();
    std::fs::write(test.path().join("LAZY"), "").unwrap();
    test.with_args(&["run", "--no-progress", "--force"])
        .run()
        .code(1);
    let changes = gate(&gates(test.path(), "implement", 1), "changes").clone();
    assert_eq!(changes["status"], "failed", "{changes}");
}

/// Attempt 1 of the first run tampers with a protected file; every later attempt, in this run or
/// a run that resumes it, does only the work.
const TAMPERS_IN_THE_FIRST_RUN: &str = r#"if [ ! -e "$HELIXFLOW_RUN_DIR/../../tampered" ]; then
  echo tampered >> src/core.py
  touch "$HELIXFLOW_RUN_DIR/../../tampered"
fi
echo done > work/out.txt
"#;

#[test]
fn a_run_that_resumes_a_failed_one_judges_the_phase_from_where_it_started_there() {
    let test = Test::new()
        .file("src/core.py", "X = 1\n")
        .file("work/.keep", "")
        .file("agent.sh", TAMPERS_IN_THE_FIRST_RUN)
        .pipeline(
            r#"pipeline "p"
phase "work" {
    run "sh agent.sh"
    outputs { file "work/out.txt" }
    scope "work/**"
    protect "src/**"
    retries 0
}
"#,
        );
    git_repo(test.path());
    test.with_args(&["run", "--no-progress"]).run().code(1);
    let first = latest_run(test.path());
    assert!(first.join("phases/work/start.json").is_file());
    // The next run resumes the failed one: the protected file is still changed since the phase
    // started there, although this run's attempt did not touch it.
    let out = test.with_args(&["run", "--no-progress"]).run();
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    let protect = gate(&gates(test.path(), "work", 1), "protect").clone();
    assert_eq!(protect["status"], "failed", "{protect}");
    assert_eq!(
        protect["details"][0],
        "protected file `src/core.py` was modified"
    );
    // Once the user puts it back, a resumed run passes.
    std::fs::write(test.path().join("src/core.py"), "X = 1\n").unwrap();
    test.with_args(&["run", "--no-progress"]).run().code(0);
}

#[test]
fn work_a_failed_run_left_in_place_counts_for_changes_when_a_run_resumes_it() {
    let test = Test::new()
        .file("agent.sh", "echo 'def f(): pass' > out.py\n[ -e FIXED ]\n")
        .pipeline(
            r#"pipeline "p"
phase "work" {
    run "sh agent.sh"
    gates {
        changes min=1
    }
    retries 0
}
"#,
        );
    git_repo(test.path());
    test.with_args(&["run", "--no-progress"]).run().code(1);
    // The user mends what made the step fail; the file the failed run wrote is unchanged since.
    std::fs::write(test.path().join("FIXED"), "").unwrap();
    let out = test.with_args(&["run", "--no-progress"]).run();
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
}

#[test]
fn a_phase_whose_work_was_undone_is_not_up_to_date() {
    let test = Test::new()
        .file("src.py", "X = 1\n")
        .file("agent.sh", "echo 'def every_nth(): pass' >> src.py\n")
        .pipeline(
            r#"pipeline "p"
phase "implement" {
    run "sh agent.sh"
    scope "src.py"
    retries 0
}
"#,
        );
    git_repo(test.path());
    test.with_args(&["run", "--no-progress"]).run().code(0);
    let again = test.with_args(&["run", "--no-progress"]).run().code(0);
    assert!(
        again.stderr.contains("[implement] up to date"),
        "{}",
        again.stderr
    );
    // The user undoes the work: the phase runs again.
    std::fs::write(test.path().join("src.py"), "X = 1\n").unwrap();
    let status = test.with_args(&["status"]).run();
    assert!(
        status
            .stdout
            .contains("output changed since it passed: modified `src.py`"),
        "{}{}",
        status.stdout,
        status.stderr
    );
    let rerun = test.with_args(&["run", "--no-progress"]).run().code(0);
    assert!(
        rerun.stderr.contains("[implement] attempt 1/1 started"),
        "{}",
        rerun.stderr
    );
}

#[test]
fn a_later_phase_that_edits_an_earlier_ones_work_leaves_both_up_to_date() {
    let test = Test::new().pipeline(
        r#"pipeline "p"
phase "make" {
    run "echo made > notes.txt"
    scope "notes.txt"
}
phase "edit" {
    depends-on "make"
    run "echo edited >> notes.txt"
    scope "notes.txt"
}
"#,
    );
    git_repo(test.path());
    test.with_args(&["run", "--no-progress"]).run().code(0);
    let again = test.with_args(&["run", "--no-progress"]).run().code(0);
    assert!(
        again.stderr.contains("[make] up to date") && again.stderr.contains("[edit] up to date"),
        "{}",
        again.stderr
    );
}

#[test]
fn a_later_phase_with_outputs_that_edits_an_earlier_ones_work_leaves_both_up_to_date() {
    let test = Test::new().pipeline(
        r#"pipeline "p"
phase "make" {
    run "echo made > notes.txt"
    scope "notes.txt"
}
phase "edit" {
    depends-on "make"
    run "echo edited >> notes.txt && echo done > edit.txt"
    outputs { file "edit.txt" }
    scope "notes.txt" "edit.txt"
}
"#,
    );
    git_repo(test.path());
    test.with_args(&["run", "--no-progress"]).run().code(0);
    let again = test.with_args(&["run", "--no-progress"]).run().code(0);
    assert!(
        again.stderr.contains("[make] up to date") && again.stderr.contains("[edit] up to date"),
        "{}",
        again.stderr
    );
}

#[test]
fn a_rerun_that_changes_nothing_under_fail_fast_does_not_pass_on_skipped_gates() {
    let test = Test::new().pipeline(
        r#"pipeline "p"
phase "work" {
    run "echo done > out.txt"
    outputs { file "out.txt" }
    fail-fast #true
    gates {
        changes min=1
        command "test -f out.txt && ! test -e broken" name="check"
    }
    retries 0
}
"#,
    );
    test.with_args(&["run", "--no-progress"]).run().code(0);
    std::fs::write(test.path().join("broken"), "").unwrap();
    test.with_args(&["run", "--no-progress", "--force"])
        .run()
        .code(1);
    let reports = gates(test.path(), "work", 1);
    assert_eq!(gate(&reports, "changes")["status"], "failed");
    assert_eq!(gate(&reports, "check")["status"], "skipped");
}
