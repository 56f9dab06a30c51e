//! The gates on real workspaces — real files, real snapshots, real tree-sitter parses, real `sh`
//! commands — and the feedback they produce for the next attempt (insta snapshots).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use helixflow::Cancel;
use helixflow::Phase;
use helixflow::Redactor;
use helixflow::{AgentFailure, feedback};
use helixflow::{Changed, Inspection, Scene, gates};
use helixflow::{Changes, Snapshot, SnapshotOptions};
use helixflow::{FsLoader, compile};
use helixflow::{GateReport, GateStatus, TimeoutKind};

/// A temporary workspace with a snapshot taken "before the attempt".
struct Workspace {
    dir: tempfile::TempDir,
    logs: tempfile::TempDir,
    before: Snapshot,
    env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    redactor: Redactor,
}

impl Workspace {
    /// A workspace holding these files before the attempt.
    fn new(files: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().expect("temporary workspace");
        for (path, text) in files {
            write(dir.path(), path, text);
        }
        let before =
            Snapshot::take(dir.path(), &SnapshotOptions::default(), None).expect("snapshot before");
        Self {
            dir,
            logs: tempfile::tempdir().expect("temporary log folder"),
            before,
            env: Vec::new(),
            redactor: Redactor::default(),
        }
    }

    /// Writes a file during "the attempt".
    fn write(&self, path: &str, text: &str) -> &Self {
        write(self.dir.path(), path, text);
        self
    }

    /// Deletes a file during "the attempt".
    fn remove(&self, path: &str) -> &Self {
        std::fs::remove_file(self.dir.path().join(path)).expect("file removed");
        self
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A phase whose agent is `a`, with this body; compiled from pipeline text.
    fn phase(&self, body: &str) -> Phase {
        compile_phase(self.path(), &format!("agent \"a\"\n{body}"))
    }

    /// A `run` step phase with this body.
    fn run_step(&self, body: &str) -> Phase {
        compile_phase(self.path(), &format!("run \"true\"\n{body}"))
    }

    /// Runs the phase's gates after "the attempt", checking that `on_report` saw every report in
    /// order.
    async fn gates(&self, phase: &Phase, response: Option<&str>) -> Vec<GateReport> {
        self.gates_cancelled_after(phase, response, None, &[]).await
    }

    /// Like [`Workspace::gates`], with these phases having run alongside the attempt.
    async fn gates_alongside(&self, phase: &Phase, alongside: &[&Phase]) -> Vec<GateReport> {
        self.gates_cancelled_after(phase, Some("done"), None, alongside)
            .await
    }

    /// A phase named `name` that is not the one under test, with this body.
    fn other_phase(&self, name: &str, body: &str) -> Phase {
        let mut phase = self.run_step(body);
        name.clone_into(&mut phase.name.value);
        phase
    }

    /// Like [`Workspace::gates`], cancelling the run (softly) after `delay` when one is given.
    async fn gates_cancelled_after(
        &self,
        phase: &Phase,
        response: Option<&str>,
        delay: Option<Duration>,
        alongside: &[&Phase],
    ) -> Vec<GateReport> {
        let after = Snapshot::take(self.path(), &SnapshotOptions::default(), Some(&self.before))
            .expect("snapshot after");
        let changes = self.before.diff(&after);
        let cancel = Cancel::default();
        if let Some(delay) = delay {
            let soft = cancel.soft.clone();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                soft.cancel();
            });
        }
        let no_bookkeeping = Changes::default();
        let scene = Scene {
            workspace: self.path(),
            exclude: &[],
            env: &self.env,
            logs: self.logs.path(),
            cancel: &cancel,
            grace: Duration::from_millis(500),
            redactor: Arc::new(self.redactor.clone()),
            phases: &[],
        };
        let changed = Changed {
            changes: &changes,
            bookkeeping: &no_bookkeeping,
        };
        let inspection =
            Inspection::after_attempt(&scene, phase, &after, changed, alongside, response);
        let mut seen = Vec::new();
        let reports = inspection
            .judge(&mut |report: &GateReport| {
                seen.push(report.clone());
            })
            .await;
        assert_eq!(seen, reports, "on_report saw every report, in order");
        reports
    }
}

fn write(root: &Path, path: &str, text: &str) {
    let full = root.join(path);
    std::fs::create_dir_all(full.parent().expect("a parent folder")).expect("folders created");
    std::fs::write(full, text).expect("file written");
}

fn compile_phase(workspace: &Path, body: &str) -> Phase {
    compile_phase_despite(workspace, body, &[])
}

/// Like [`compile_phase`], with lint errors of these codes expected: gates keep their run-time
/// behaviour for pipelines that lint rejects.
fn compile_phase_despite(workspace: &Path, body: &str, codes: &[&str]) -> Phase {
    let text = format!(
        "pipeline \"gates\"\nagent \"a\" {{\n    command \"true\"\n}}\nphase \"work\" {{\n{body}\n}}\n"
    );
    let compiled = compile(
        &workspace.join("pipeline.kdl"),
        &text,
        &FsLoader,
        helixflow::Options::default(),
    );
    assert!(
        compiled
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .all(|d| codes.contains(&d.code())),
        "the test pipeline compiles:\n{text}\n{:#?}",
        compiled.diagnostics
    );
    let pipeline = compiled.pipeline.expect("a pipeline");
    pipeline.phases.first().cloned().expect("one phase")
}

/// The report of the gate with this name.
fn report<'r>(reports: &'r [GateReport], name: &str) -> &'r GateReport {
    reports
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no gate named {name} in {reports:#?}"))
}

fn statuses(reports: &[GateReport]) -> Vec<(&str, GateStatus)> {
    reports
        .iter()
        .map(|r| (r.name.as_str(), r.status))
        .collect()
}

/// Feedback for a failed first attempt of three.
fn feedback_for(phase: &Phase, reports: &[GateReport]) -> String {
    feedback::render(phase, 1, 3, None, reports)
}

const ADR: &str = "---\nadr_id: 42\ntitle: Payments\nstatus: accepted\nfiles:\n  create:\n    - src/pay.py\n    - tests/test_pay.py\n---\n# Kontext\n\ntext\n\n## Entscheidung\n\n```markdown\n# Akzeptanzkriterien\n```\n";

// ---------------------------------------------------------------------------------------------
// outputs

#[tokio::test]
async fn outputs_pass_when_files_globs_and_listed_paths_exist() {
    let ws = Workspace::new(&[("adr/ADR-042.md", ADR)]);
    ws.write("src/pay.py", "x = 1\n")
        .write("tests/test_pay.py", "")
        .write("docs/a.md", "")
        .write("docs/b.md", "");
    let phase = ws.phase(
        r#"outputs {
    file "src/pay.py"
    glob "docs/*.md" min=2
    from "adr/ADR-042.md" key="files.create"
}"#,
    );
    let reports = ws.gates(&phase, Some("done")).await;
    assert_eq!(statuses(&reports), [("outputs", GateStatus::Passed)]);
    assert!(reports[0].details.is_empty());
}

#[tokio::test]
async fn outputs_name_a_near_miss_for_a_missing_file() {
    let ws = Workspace::new(&[]);
    ws.write("output/src/helix/adr/parser.py", "")
        .write("src/helix/adr/Lexer.py", "");
    let phase = ws.phase(
        r#"outputs {
    file "src/helix/adr/parser.py"
    file "src/helix/adr/lexer.py"
    file "src/helix/adr/other.py"
}"#,
    );
    let reports = ws.gates(&phase, Some("done")).await;
    let outputs = report(&reports, "outputs");
    assert_eq!(outputs.status, GateStatus::Failed);
    assert_eq!(
        outputs.details,
        [
            "missing `src/helix/adr/parser.py`; found `output/src/helix/adr/parser.py` — written to \
             the wrong folder?",
            "missing `src/helix/adr/lexer.py`; found `src/helix/adr/Lexer.py` — wrong letter case?",
            "missing `src/helix/adr/other.py`",
        ]
    );
    insta::assert_snapshot!("feedback-outputs", feedback_for(&phase, &reports));
}

#[tokio::test]
async fn outputs_count_glob_matches_against_min() {
    let ws = Workspace::new(&[]);
    ws.write("docs/adr/one.md", "")
        .write("docs/adr/deeper/two.md", "")
        .write("notes/three.md", "");
    let phase = ws.phase(
        r#"outputs {
    glob "docs/adr/*.md" min=2
    glob "missing/*.txt"
    file "docs"
}"#,
    );
    let reports = ws.gates(&phase, Some("done")).await;
    assert_eq!(
        report(&reports, "outputs").details,
        [
            "`docs/adr/*.md` matches 1 file (`docs/adr/one.md`); at least 2 expected; found \
             `docs/adr/deeper/two.md`, `notes/three.md` — written to the wrong folder?",
            "no file matches `missing/*.txt`; at least 1 expected",
            "`docs` is a folder; a file was expected",
        ]
    );
}

#[tokio::test]
async fn outputs_from_a_document_report_missing_paths_keys_and_documents() {
    let ws = Workspace::new(&[
        ("adr/ADR-042.md", ADR),
        ("adr/plain.md", "# No front matter\n"),
        ("adr/list.yaml", "files:\n  create: [\"src/pay.py\", 3]\n"),
        ("adr/escape.yml", "files: {create: [\"../outside.py\"]}\n"),
    ]);
    ws.write("src/pay.py", "");
    let phase = ws.phase(
        r#"outputs {
    from "adr/ADR-042.md" key="files.create"
    from "adr/ADR-042.md" key="files.delete"
    from "adr/ADR-043.md" key="files.create"
    from "adr/plain.md" key="files.create"
    from "adr/list.yaml" key="files.create"
    from "adr/escape.yml" key="files.create"
}"#,
    );
    let reports = ws.gates(&phase, Some("done")).await;
    assert_eq!(
        report(&reports, "outputs").details,
        [
            "missing `tests/test_pay.py` (listed under `files.create` in `adr/ADR-042.md`)",
            "`adr/ADR-042.md` has no front-matter key `files.delete`",
            "`adr/ADR-043.md` does not exist",
            "`adr/plain.md` has no YAML front matter (a block between `---` lines at the top of \
             the file)",
            "entry 2 of `files.create` in `adr/list.yaml` is not a path (a string)",
            "`../outside.py` (listed under `files.create` in `adr/escape.yml`) climbs above the \
             workspace with `..`",
        ]
    );
}

#[tokio::test]
async fn resolve_outputs_lists_existing_files_once_in_order() {
    let ws = Workspace::new(&[("adr/ADR-042.md", ADR)]);
    ws.write("src/pay.py", "").write("docs/a.md", "");
    let phase = ws.phase(
        r#"outputs {
    file "./src/pay.py"
    file "src/gone.py"
    glob "docs/*.md"
    from "adr/ADR-042.md" key="files.create"
}"#,
    );
    assert_eq!(
        gates::resolve_outputs(ws.path(), &phase, &[]),
        ["docs/a.md", "src/pay.py"]
    );
}

// ---------------------------------------------------------------------------------------------
// scope, protect, changes

#[tokio::test]
async fn scope_reports_every_change_outside_it() {
    let ws = Workspace::new(&[("README.md", "old"), ("old.txt", "x"), ("src/a.py", "")]);
    ws.write("README.md", "new")
        .remove("old.txt")
        .write("src/a.py", "x = 1\n")
        .write("src/deep/b.py", "")
        .write("tests/t.py", "");
    let phase = ws.phase(r#"scope "src/**" "tests/**""#);
    let reports = ws.gates(&phase, Some("done")).await;
    assert_eq!(statuses(&reports), [("scope", GateStatus::Failed)]);
    assert_eq!(
        reports[0].details,
        [
            "`README.md` was modified, but the phase's scope is `src/**`, `tests/**`",
            "`old.txt` was deleted, but the phase's scope is `src/**`, `tests/**`",
        ]
    );
    insta::assert_snapshot!("feedback-scope", feedback_for(&phase, &reports));

    let inside = Workspace::new(&[("src/a.py", "")]);
    inside.write("src/a.py", "y = 2\n");
    let reports = inside.gates(&phase, Some("done")).await;
    assert_eq!(statuses(&reports), [("scope", GateStatus::Passed)]);
}

#[tokio::test]
async fn protect_reports_protected_files_touched() {
    let ws = Workspace::new(&[
        ("tests/fixtures/a.json", "{}"),
        ("tests/fixtures/b.json", "{}"),
    ]);
    ws.write("tests/fixtures/a.json", "{\"changed\": true}")
        .remove("tests/fixtures/b.json")
        .write("tests/fixtures/c.json", "{}")
        .write("src/free.py", "");
    let phase = ws.phase(r#"protect "tests/fixtures/**""#);
    let reports = ws.gates(&phase, Some("done")).await;
    assert_eq!(
        report(&reports, "protect").details,
        [
            "protected file `tests/fixtures/c.json` was created",
            "protected file `tests/fixtures/a.json` was modified",
            "protected file `tests/fixtures/b.json` was deleted",
        ]
    );
    insta::assert_snapshot!("feedback-protect", feedback_for(&phase, &reports));

    let untouched = Workspace::new(&[("tests/fixtures/a.json", "{}")]);
    untouched.write("src/a.py", "");
    let reports = untouched.gates(&phase, Some("done")).await;
    assert_eq!(statuses(&reports), [("protect", GateStatus::Passed)]);
}

#[tokio::test]
async fn changes_require_work_to_be_done() {
    let ws = Workspace::new(&[("a.txt", "a")]);
    let phase = ws.phase("gates {\n    changes\n}");
    let reports = ws.gates(&phase, Some("done")).await;
    assert_eq!(
        report(&reports, "changes").details,
        ["the attempt changed 0 files; at least 1 expected — was the work done?"]
    );
    insta::assert_snapshot!("feedback-changes", feedback_for(&phase, &reports));

    ws.write("a.txt", "b");
    let reports = ws.gates(&phase, Some("done")).await;
    assert_eq!(statuses(&reports), [("changes", GateStatus::Passed)]);

    let two = ws.phase("gates {\n    changes min=2\n}");
    let reports = ws.gates(&two, Some("done")).await;
    assert_eq!(
        report(&reports, "changes").details,
        ["the attempt changed 1 file; at least 2 expected (changed: `a.txt`)"]
    );
}

#[tokio::test]
async fn changes_claimed_by_a_phase_alongside_are_left_to_it() {
    let ws = Workspace::new(&[("shared/s.txt", "s")]);
    ws.write("src/a.rs", "")
        .write("b/out.txt", "")
        .write("gen/x.json", "{}")
        .write("shared/s.txt", "changed")
        .write("misc.txt", "");
    let phase = ws.phase("scope \"src/**\" \"shared/**\"\ngates {\n    changes min=4\n}");
    let b = ws.other_phase(
        "b",
        "outputs {\n    file \"b/out.txt\"\n    glob \"gen/*.json\"\n}",
    );
    // Its scope claims `shared/s.txt` too, but that is inside the phase's own scope: its own.
    let c = ws.other_phase("c", "scope \"shared/**\" \"*.md\"");
    let reports = ws.gates_alongside(&phase, &[&b, &c]).await;
    let left =
        "2 changes left to phase \"b\", which ran at the same time: `b/out.txt`, `gen/x.json`";
    assert_eq!(
        report(&reports, "scope").details,
        [
            "`misc.txt` was created, but the phase's scope is `src/**`, `shared/**`",
            left,
        ]
    );
    assert_eq!(
        report(&reports, "changes").details,
        [
            "the attempt changed 3 files; at least 4 expected (changed: `misc.txt`, `src/a.rs`, \
             `shared/s.txt`)",
            left,
        ]
    );
    // Without phases alongside, every change is the phase's.
    let reports = ws.gates(&phase, Some("done")).await;
    assert_eq!(statuses(&reports)[1], ("changes", GateStatus::Passed));
    assert_eq!(report(&reports, "scope").details.len(), 3);
}

// ---------------------------------------------------------------------------------------------
// syntax

#[tokio::test]
async fn syntax_reports_python_and_json_errors_with_location() {
    let ws = Workspace::new(&[]);
    ws.write("src/good.py", "def f(x):\n    return x + 1\n")
        .write("src/bad.py", "def f(x):\n    return (x +\n")
        .write("data/bad.json", "{\"a\": 1,, \"b\": 2}\n")
        .write("data/good.json", "{\"a\": [1, 2]}\n")
        .write("notes.txt", "not checked (");
    let phase = ws.phase("gates {\n    syntax \"src/**/*.py\" \"data/*.json\" \"*.txt\"\n}");
    let reports = ws.gates(&phase, Some("done")).await;
    let syntax = report(&reports, "syntax");
    assert_eq!(syntax.status, GateStatus::Failed);
    assert!(
        syntax
            .details
            .iter()
            .any(|d| d.starts_with("data/bad.json:1:")),
        "{:#?}",
        syntax.details
    );
    assert!(
        syntax.details.iter().any(|d| d.starts_with("src/bad.py:")),
        "{:#?}",
        syntax.details
    );
    assert!(
        !syntax
            .details
            .iter()
            .any(|d| d.contains("good") || d.contains("notes")),
        "{:#?}",
        syntax.details
    );
    insta::assert_snapshot!("feedback-syntax", feedback_for(&phase, &reports));
}

#[tokio::test]
async fn syntax_without_globs_checks_the_outputs() {
    let ws = Workspace::new(&[]);
    ws.write("out/calc.py", "def add(a, b):\n    return a +\n")
        .write("other/broken.py", "def (\n");
    let phase = ws.phase("outputs {\n    file \"out/calc.py\"\n}\ngates {\n    syntax\n}");
    let reports = ws.gates(&phase, Some("done")).await;
    assert_eq!(
        statuses(&reports),
        [
            ("outputs", GateStatus::Passed),
            ("syntax", GateStatus::Failed)
        ]
    );
    let details = &report(&reports, "syntax").details;
    assert!(
        details.iter().all(|d| d.starts_with("out/calc.py:")),
        "{details:#?}"
    );

    ws.write("out/calc.py", "def add(a, b):\n    return a + b\n");
    let reports = ws.gates(&phase, Some("done")).await;
    assert_eq!(report(&reports, "syntax").status, GateStatus::Passed);
    assert!(report(&reports, "syntax").details.is_empty());
}

#[tokio::test]
async fn syntax_with_nothing_to_check_passes_and_says_so() {
    let ws = Workspace::new(&[]);
    ws.write("README.md", "# hi\n");
    let phase = ws.phase("outputs {\n    file \"README.md\"\n}\ngates {\n    syntax\n}");
    let reports = ws.gates(&phase, Some("done")).await;
    let syntax = report(&reports, "syntax");
    assert_eq!(syntax.status, GateStatus::Passed);
    assert_eq!(
        syntax.details,
        ["0 files checked: none of the phase's outputs is in a supported language"]
    );
}

#[tokio::test]
async fn syntax_does_not_pass_outputs_that_are_missing() {
    let ws = Workspace::new(&[]);
    let phase = ws.phase(
        "outputs {\n    file \"src/calc.py\"\n    file \"src/util.py\"\n    file \"docs/notes.md\"\n}\ngates {\n    syntax\n}",
    );
    let reports = ws.gates(&phase, Some("done")).await;
    assert_eq!(
        statuses(&reports),
        [
            ("outputs", GateStatus::Failed),
            ("syntax", GateStatus::Skipped)
        ]
    );
    assert_eq!(
        report(&reports, "syntax").details,
        ["not checked: `src/calc.py`, `src/util.py` are missing"]
    );
    assert!(
        feedback_for(&phase, &reports)
            .contains("- `syntax`: not checked: `src/calc.py`, `src/util.py` are missing"),
        "{}",
        feedback_for(&phase, &reports)
    );

    // The files that exist are checked; a pass names the missing one.
    ws.write("src/calc.py", "def add(a, b):\n    return a + b\n");
    let reports = ws.gates(&phase, Some("done")).await;
    let syntax = report(&reports, "syntax");
    assert_eq!(syntax.status, GateStatus::Passed);
    assert_eq!(syntax.details, ["not checked: `src/util.py` is missing"]);
    ws.write("src/calc.py", "def add(a, b):\n");
    let reports = ws.gates(&phase, Some("done")).await;
    let syntax = report(&reports, "syntax");
    assert_eq!(syntax.status, GateStatus::Failed);
    assert_eq!(
        syntax.details,
        [
            "src/calc.py:1:15: expected an indented block after the function definition on line 1\ndef add(a, b):\n              ^",
        ]
    );
}

#[tokio::test]
async fn syntax_with_nothing_found_is_skipped() {
    let ws = Workspace::new(&[]);
    let phase = ws.phase("outputs {\n    glob \"src/*.py\"\n}\ngates {\n    syntax\n}");
    let reports = ws.gates(&phase, Some("done")).await;
    let syntax = report(&reports, "syntax");
    assert_eq!(syntax.status, GateStatus::Skipped);
    assert_eq!(
        syntax.details,
        ["not checked: none of the phase's outputs exists"]
    );

    let phase = ws.phase("gates {\n    syntax \"src/**/*.rs\"\n}");
    let reports = ws.gates(&phase, Some("done")).await;
    let syntax = report(&reports, "syntax");
    assert_eq!(syntax.status, GateStatus::Skipped);
    assert_eq!(
        syntax.details,
        ["not checked: no file matches the gate's globs"]
    );
}

// ---------------------------------------------------------------------------------------------
// command

#[tokio::test]
async fn command_passes_on_exit_zero_and_sees_the_workspace_and_env() {
    let mut ws = Workspace::new(&[("marker", "")]);
    ws.env.push(("GATE_GREETING".into(), "hello".into()));
    let phase = ws.phase(
        r#"gates {
    command "test -f marker && test \"$GATE_GREETING\" = hello" name="env"
}"#,
    );
    let reports = ws.gates(&phase, Some("done")).await;
    assert_eq!(statuses(&reports), [("env", GateStatus::Passed)]);
    assert!(ws.logs.path().join("gate-1-env.stdout").is_file());
    assert!(ws.logs.path().join("gate-1-env.stderr").is_file());
}

#[tokio::test]
async fn command_failure_reports_exit_code_and_output_tails() {
    let ws = Workspace::new(&[]);
    let phase = ws.phase(
        r#"gates {
    command "for i in $(seq 1 60); do echo line $i; done; echo oops >&2; exit 3" name="tests"
}"#,
    );
    let reports = ws.gates(&phase, Some("done")).await;
    let tests = report(&reports, "tests");
    assert_eq!(tests.status, GateStatus::Failed);
    let detail = &tests.details[0];
    assert!(detail.starts_with("`for i in"), "{detail}");
    assert!(detail.contains("exited with code 3\nstdout:\n"), "{detail}");
    assert!(detail.contains("line 60\nstderr:\noops"), "{detail}");
    assert!(
        detail.contains("\nline 21\n"),
        "the last 40 lines: {detail}"
    );
    assert!(
        !detail.contains("\nline 20\n"),
        "only the last 40 lines: {detail}"
    );
    insta::assert_snapshot!("feedback-command", feedback_for(&phase, &reports));
}

#[tokio::test]
async fn command_timeout_stops_it_and_says_so() {
    let ws = Workspace::new(&[]);
    let phase = ws.phase(
        r#"gates {
    command "echo started; sleep 30" name="slow" timeout="1s"
}"#,
    );
    let started = std::time::Instant::now();
    let reports = ws.gates(&phase, Some("done")).await;
    assert!(started.elapsed() < Duration::from_secs(10), "stopped early");
    assert_eq!(
        report(&reports, "slow").details,
        ["`echo started; sleep 30` timed out after 1s and was stopped\nstdout:\nstarted"]
    );
}

#[tokio::test]
async fn command_fix_that_repairs_passes() {
    let ws = Workspace::new(&[]);
    let phase = ws.phase(
        r#"gates {
    command "test -f fixed" name="lint" fix="touch fixed"
}"#,
    );
    let reports = ws.gates(&phase, Some("done")).await;
    let lint = report(&reports, "lint");
    assert_eq!(lint.status, GateStatus::Passed);
    assert_eq!(
        lint.details,
        ["`test -f fixed` exited with code 1 at first; it passed after the fix `touch fixed` ran"]
    );
    for log in ["gate-1-lint", "gate-1-lint.fix", "gate-1-lint.recheck"] {
        assert!(
            ws.logs.path().join(format!("{log}.stdout")).is_file(),
            "{log}"
        );
    }
}

#[tokio::test]
async fn command_fix_that_does_not_repair_reports_the_second_run() {
    let ws = Workspace::new(&[]);
    let phase = ws.phase(
        r#"gates {
    command "echo run >> runs; cat runs; exit 1" name="lint" fix="echo fixing; exit 2"
}"#,
    );
    let reports = ws.gates(&phase, Some("done")).await;
    assert_eq!(
        report(&reports, "lint").details,
        [
            "`echo run >> runs; cat runs; exit 1` exited with code 1; the fix `echo fixing; exit 2` \
             ran and exited with code 2; then `echo run >> runs; cat runs; exit 1` exited with \
             code 1 again\nstdout:\nrun\nrun\nthe fix's stdout:\nfixing"
        ]
    );
    insta::assert_snapshot!("feedback-command-fix", feedback_for(&phase, &reports));
}

#[tokio::test]
async fn command_runs_in_its_cwd() {
    let ws = Workspace::new(&[("sub/dir/marker", "")]);
    let phase = ws.phase(
        r#"gates {
    command "test -f marker" name="in-sub" cwd="sub/dir"
    command "test -f marker" name="at-root"
    command "true" name="nowhere" cwd="missing"
}"#,
    );
    let reports = ws.gates(&phase, Some("done")).await;
    assert_eq!(
        statuses(&reports),
        [
            ("in-sub", GateStatus::Passed),
            ("at-root", GateStatus::Failed),
            ("nowhere", GateStatus::Failed),
        ]
    );
    assert_eq!(
        report(&reports, "at-root").details,
        ["`test -f marker` exited with code 1\n(no output)"]
    );
    assert_eq!(
        report(&reports, "nowhere").details,
        ["the gate's working folder `missing` does not exist"]
    );
}

// ---------------------------------------------------------------------------------------------
// matches, absent

#[tokio::test]
async fn matches_on_the_response() {
    let ws = Workspace::new(&[]);
    let phase = ws.phase(
        r##"gates {
    matches "response" #"^<!-- STEP: (done|finalize) -->$"# name="step-marker"
}"##,
    );
    let reports = ws
        .gates(&phase, Some("All good.\n<!-- STEP: done -->\n"))
        .await;
    assert_eq!(statuses(&reports), [("step-marker", GateStatus::Passed)]);

    let reports = ws
        .gates(&phase, Some("I wrote the parser.\nIt is finished."))
        .await;
    assert_eq!(
        report(&reports, "step-marker").details,
        [
            "the response does not match `^<!-- STEP: (done|finalize) -->$`; the response ended \
             with:\nI wrote the parser.\nIt is finished."
        ]
    );
    insta::assert_snapshot!("feedback-matches", feedback_for(&phase, &reports));

    let reports = ws.gates(&phase, Some("  \n")).await;
    assert_eq!(
        report(&reports, "step-marker").details,
        ["the response does not match `^<!-- STEP: (done|finalize) -->$`; the response is empty"]
    );
}

#[tokio::test]
async fn response_gates_fail_for_a_run_step() {
    let ws = Workspace::new(&[]);
    // Lint rejects these gates (HF127); a pipeline run without it still gets a clear failure.
    let phase = compile_phase_despite(
        ws.path(),
        "run \"true\"\ngates {\n    matches \"response\" \"done\"\n    absent \"response\" \"TODO\"\n}",
        &["HF127"],
    );
    let reports = ws.gates(&phase, None).await;
    for gate in ["matches", "absent"] {
        assert_eq!(
            report(&reports, gate).details,
            ["there is no agent response to check: this phase is a `run` step"]
        );
    }
}

#[tokio::test]
async fn matches_on_files_and_globs() {
    let ws = Workspace::new(&[]);
    ws.write("src/a.py", "import os\n")
        .write("src/b.py", "def main():\n    pass\n")
        .write("README.md", "no license here\n");
    let phase = ws.phase(
        r#"gates {
    matches "src/*.py" "^def main" name="has-main"
    matches "README.md" "(?i)license: mit" name="license"
    matches "src/*.rs" "fn main" name="rust"
    matches "src/*.py" "class " name="class"
}"#,
    );
    let reports = ws.gates(&phase, Some("done")).await;
    assert_eq!(
        statuses(&reports),
        [
            ("has-main", GateStatus::Passed),
            ("license", GateStatus::Failed),
            ("rust", GateStatus::Failed),
            ("class", GateStatus::Failed),
        ]
    );
    assert_eq!(
        report(&reports, "license").details,
        ["`(?i)license: mit` matches nowhere in `README.md`"]
    );
    assert_eq!(
        report(&reports, "rust").details,
        ["`src/*.rs` matches no file, so `fn main` cannot match"]
    );
    assert_eq!(
        report(&reports, "class").details,
        ["`class ` matches nowhere in the 2 files matching `src/*.py` (`src/a.py`, `src/b.py`)"]
    );
}

#[tokio::test]
async fn absent_lists_each_match_with_its_line() {
    let ws = Workspace::new(&[]);
    ws.write("src/a.py", "x = 1\n# TODO: finish\ny = 2  # TODO\n")
        .write("src/b.py", "import pytest\npytest.skip('later')\n")
        .write("src/clean.py", "z = 3\n")
        .write("src/image.py", "TODO\0binary");
    let phase = ws.phase(
        r#"gates {
    absent "src/**/*.py" "TODO|pytest\\.skip" name="no-shortcuts"
    absent "gen/**" "TODO" name="nothing-there"
}"#,
    );
    let reports = ws.gates(&phase, Some("done")).await;
    assert_eq!(
        report(&reports, "no-shortcuts").details,
        [
            "`TODO|pytest\\.skip` must not appear, but it matches 3 lines",
            "src/a.py:2: # TODO: finish",
            "src/a.py:3: y = 2  # TODO",
            "src/b.py:2: pytest.skip('later')",
        ]
    );
    assert_eq!(report(&reports, "nothing-there").status, GateStatus::Passed);
    insta::assert_snapshot!("feedback-absent", feedback_for(&phase, &reports));
}

#[tokio::test]
async fn absent_on_the_response_and_the_listing_cap() {
    let ws = Workspace::new(&[]);
    let phase = ws.phase("gates {\n    absent \"response\" \"skipped\"\n}");
    let reports = ws.gates(&phase, Some("all done")).await;
    assert_eq!(statuses(&reports), [("absent", GateStatus::Passed)]);

    let response: String = (1..=25).map(|i| format!("test {i} skipped\n")).collect();
    let reports = ws.gates(&phase, Some(&response)).await;
    let details = &report(&reports, "absent").details;
    assert_eq!(details.len(), 22, "{details:#?}");
    assert_eq!(
        details[0],
        "`skipped` must not appear, but it matches 25 lines"
    );
    assert_eq!(details[1], "response:1: test 1 skipped");
    assert_eq!(details[20], "response:20: test 20 skipped");
    assert_eq!(details[21], "… and 5 more matching lines");
}

#[tokio::test]
async fn details_are_redacted() {
    let mut ws = Workspace::new(&[]);
    ws.redactor = Redactor::new([("API_KEY".to_owned(), "sk-secret-123".to_owned())]);
    ws.write("config.py", "KEY = 'sk-secret-123'\n");
    let phase = ws.phase("gates {\n    absent \"config.py\" \"KEY\"\n}");
    let reports = ws.gates(&phase, Some("done")).await;
    assert_eq!(
        report(&reports, "absent").details[1],
        "config.py:1: KEY = '[REDACTED:API_KEY]'"
    );
}

// ---------------------------------------------------------------------------------------------
// front-matter, sections, paths-exist

#[tokio::test]
async fn front_matter_requires_every_dotted_key() {
    let ws = Workspace::new(&[
        ("adr/ADR-042.md", ADR),
        ("adr/plain.md", "# Title\n"),
        ("adr/open.md", "---\ntitle: x\n"),
        ("adr/broken.md", "---\ntitle: [x\n---\n"),
    ]);
    let phase = ws.phase(
        r#"gates {
    front-matter "adr/ADR-042.md" "adr_id" "title" "files.create" name="complete"
    front-matter "adr/ADR-042.md" "owner" "files.delete" name="incomplete"
    front-matter "adr/plain.md" "title" name="plain"
    front-matter "adr/open.md" "title" name="open"
    front-matter "adr/broken.md" "title" name="broken"
    front-matter "adr/none.md" "title" name="none"
}"#,
    );
    let reports = ws.gates(&phase, Some("done")).await;
    assert_eq!(report(&reports, "complete").status, GateStatus::Passed);
    assert_eq!(
        report(&reports, "incomplete").details,
        [
            "the front matter of `adr/ADR-042.md` has no key `owner`",
            "the front matter of `adr/ADR-042.md` has no key `files.delete`",
            "keys present: `adr_id`, `title`, `status`, `files`",
        ]
    );
    assert_eq!(
        report(&reports, "plain").details,
        [
            "`adr/plain.md` has no YAML front matter (a block between `---` lines at the top of \
             the file)"
        ]
    );
    assert_eq!(
        report(&reports, "open").details,
        ["the front matter of `adr/open.md` is not closed: add a `---` line after it"]
    );
    let broken = &report(&reports, "broken").details[0];
    assert!(
        broken.starts_with("`adr/broken.md`:3:") && broken.contains("not valid YAML"),
        "{broken}"
    );
    assert_eq!(
        report(&reports, "none").details,
        ["`adr/none.md` does not exist"]
    );
    let failed: Vec<GateReport> = reports
        .into_iter()
        .filter(|r| r.name == "incomplete")
        .collect();
    insta::assert_snapshot!("feedback-front-matter", feedback_for(&phase, &failed));
}

#[tokio::test]
async fn sections_require_every_heading_outside_code() {
    let ws = Workspace::new(&[("adr/ADR-042.md", ADR)]);
    let phase = ws.phase(
        r###"gates {
    sections "adr/ADR-042.md" "Kontext" "## entscheidung" name="present"
    sections "adr/ADR-042.md" "Kontext" "Akzeptanzkriterien" "Risiken" name="missing"
    sections "adr/none.md" "Kontext" name="none"
}"###,
    );
    let reports = ws.gates(&phase, Some("done")).await;
    assert_eq!(report(&reports, "present").status, GateStatus::Passed);
    assert_eq!(
        report(&reports, "missing").details,
        [
            "`adr/ADR-042.md` has no heading `Akzeptanzkriterien`",
            "`adr/ADR-042.md` has no heading `Risiken`",
            "headings found: `Kontext`, `Entscheidung`",
        ]
    );
    assert_eq!(
        report(&reports, "none").details,
        ["`adr/none.md` does not exist"]
    );
    let failed: Vec<GateReport> = reports
        .into_iter()
        .filter(|r| r.name == "missing")
        .collect();
    insta::assert_snapshot!("feedback-sections", feedback_for(&phase, &failed));
}

#[tokio::test]
async fn paths_exist_checks_every_listed_path() {
    let ws = Workspace::new(&[("adr/ADR-042.md", ADR), ("src/pay.py", "")]);
    ws.write("test/test_pay.py", "");
    let phase = ws.phase(
        r#"gates {
    paths-exist "adr/ADR-042.md" key="files.create"
    paths-exist "adr/ADR-042.md" key="title" name="not-a-list"
}"#,
    );
    let reports = ws.gates(&phase, Some("done")).await;
    assert_eq!(
        report(&reports, "paths-exist").details,
        [
            "missing `tests/test_pay.py` (listed under `files.create` in `adr/ADR-042.md`); found \
             `test/test_pay.py` — written to the wrong folder?"
        ]
    );
    // A single string is one path.
    assert_eq!(
        report(&reports, "not-a-list").details,
        ["missing `Payments` (listed under `title` in `adr/ADR-042.md`)"]
    );
    insta::assert_snapshot!("feedback-paths-exist", feedback_for(&phase, &reports));

    ws.write("tests/test_pay.py", "");
    let reports = ws.gates(&phase, Some("done")).await;
    assert_eq!(report(&reports, "paths-exist").status, GateStatus::Passed);
}

#[tokio::test]
async fn approval_is_left_to_a_person_after_the_other_gates() {
    let ws = Workspace::new(&[]);
    let phase = ws.phase("gates {\n    approval prompt=\"Ship it?\"\n}");
    let reports = ws.gates(&phase, Some("done")).await;
    let approval = report(&reports, "approval");
    assert_eq!(approval.status, GateStatus::Skipped);
    assert_eq!(
        approval.details,
        ["decided by a person once every other check passed"]
    );
}

// ---------------------------------------------------------------------------------------------
// order and fail-fast

#[tokio::test]
async fn implicit_gates_run_first_then_declared_in_order() {
    let ws = Workspace::new(&[]);
    ws.write("src/a.py", "");
    let phase = ws.phase(
        r#"outputs {
    file "src/a.py"
}
scope "src/**"
protect "tests/**"
gates {
    command "true" name="second"
    changes
}"#,
    );
    let reports = ws.gates(&phase, Some("done")).await;
    assert_eq!(
        statuses(&reports),
        [
            ("outputs", GateStatus::Passed),
            ("scope", GateStatus::Passed),
            ("protect", GateStatus::Passed),
            ("second", GateStatus::Passed),
            ("changes", GateStatus::Passed),
        ]
    );
    let kinds: Vec<&str> = reports.iter().map(|r| r.kind.as_str()).collect();
    assert_eq!(kinds, ["outputs", "scope", "protect", "command", "changes"]);
}

#[tokio::test]
async fn all_failures_are_reported_together_without_fail_fast() {
    let ws = Workspace::new(&[]);
    let phase = ws.phase(
        r#"outputs {
    file "a.txt"
}
gates {
    command "exit 1" name="first"
    command "exit 2" name="second"
}"#,
    );
    let reports = ws.gates(&phase, Some("done")).await;
    assert_eq!(
        statuses(&reports),
        [
            ("outputs", GateStatus::Failed),
            ("first", GateStatus::Failed),
            ("second", GateStatus::Failed),
        ]
    );
}

#[tokio::test]
async fn fail_fast_skips_the_gates_after_a_failure() {
    let ws = Workspace::new(&[]);
    let phase = ws.phase(
        r#"fail-fast #true
outputs {
    file "a.txt"
}
gates {
    command "touch ran" name="later"
    changes
}"#,
    );
    let reports = ws.gates(&phase, Some("done")).await;
    assert_eq!(
        statuses(&reports),
        [
            ("outputs", GateStatus::Failed),
            ("later", GateStatus::Skipped),
            ("changes", GateStatus::Skipped),
        ]
    );
    assert!(
        !ws.path().join("ran").exists(),
        "a skipped command does not run"
    );
    assert_eq!(
        report(&reports, "later").details,
        ["an earlier gate failed and the phase has `fail-fast`"]
    );
    insta::assert_snapshot!("feedback-fail-fast", feedback_for(&phase, &reports));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_stops_the_running_command_and_skips_the_rest() {
    let ws = Workspace::new(&[]);
    let phase = ws.phase(
        r#"gates {
    command "sleep 30" name="slow"
    command "touch ran" name="later"
}"#,
    );
    let started = std::time::Instant::now();
    let reports = ws
        .gates_cancelled_after(&phase, Some("done"), Some(Duration::from_millis(300)), &[])
        .await;
    assert!(started.elapsed() < Duration::from_secs(10), "stopped early");
    assert_eq!(
        statuses(&reports),
        [
            ("slow", GateStatus::Skipped),
            ("later", GateStatus::Skipped)
        ]
    );
    assert_eq!(
        report(&reports, "slow").details,
        ["stopped: the run was cancelled"]
    );
    assert_eq!(report(&reports, "later").details, ["the run was cancelled"]);
    assert!(
        !ws.path().join("ran").exists(),
        "a skipped command does not run"
    );
}

// ---------------------------------------------------------------------------------------------
// feedback for agent failures

fn agent_phase() -> Phase {
    compile_phase(Path::new("/nonexistent"), "agent \"a\"")
}

#[test]
fn feedback_for_a_non_zero_exit() {
    let failure = AgentFailure::Exit {
        code: Some(2),
        signal: None,
        reported: None,
        stderr: "Traceback (most recent call last):\n  File \"agent.py\", line 3\nValueError: no\n"
            .to_owned(),
    };
    insta::assert_snapshot!(feedback::render(&agent_phase(), 1, 3, Some(&failure), &[]));
}

#[test]
fn feedback_for_a_signal_without_stderr() {
    let failure = AgentFailure::Exit {
        code: None,
        signal: Some(9),
        reported: None,
        stderr: String::new(),
    };
    insta::assert_snapshot!(feedback::render(&agent_phase(), 1, 3, Some(&failure), &[]));
}

#[test]
fn feedback_for_a_run_step_exit_names_the_command() {
    let phase = compile_phase(Path::new("/nonexistent"), "run \"make\"");
    let failure = AgentFailure::Exit {
        code: Some(1),
        signal: None,
        reported: None,
        stderr: "make: *** No rule to make target.".to_owned(),
    };
    insta::assert_snapshot!(feedback::render(&phase, 1, 3, Some(&failure), &[]));
}

#[test]
fn feedback_for_timeouts() {
    let wall = AgentFailure::Timeout {
        kind: TimeoutKind::Wall,
        limit: Duration::from_mins(20),
    };
    let idle = AgentFailure::Timeout {
        kind: TimeoutKind::Idle,
        limit: Duration::from_secs(90),
    };
    insta::assert_snapshot!(
        "feedback-timeout-wall",
        feedback::render(&agent_phase(), 1, 3, Some(&wall), &[])
    );
    insta::assert_snapshot!(
        "feedback-timeout-idle",
        feedback::render(&agent_phase(), 1, 3, Some(&idle), &[])
    );
    let unknown = AgentFailure::Timeout {
        kind: TimeoutKind::Wall,
        limit: Duration::ZERO,
    };
    let text = feedback::render(&agent_phase(), 1, 3, Some(&unknown), &[]);
    assert!(
        text.contains("it ran past its time limit (`timeout`)."),
        "{text}"
    );
}

#[test]
fn feedback_quotes_the_first_10_and_last_30_lines_of_a_long_stderr() {
    let failure = AgentFailure::Exit {
        code: Some(1),
        signal: None,
        reported: None,
        stderr: (1..=100).map(|i| format!("error {i}\n")).collect(),
    };
    let text = feedback::render(&agent_phase(), 1, 3, Some(&failure), &[]);
    assert!(
        text.contains("The start and the end of its standard error"),
        "{text}"
    );
    assert!(text.contains("```text\nerror 1\n"), "{text}");
    assert!(
        text.contains("error 10\n[… 60 lines left out …]\nerror 71\n"),
        "{text}"
    );
    assert!(text.contains("error 100\n```"), "{text}");
    assert!(!text.contains("error 11\n"), "{text}");
    assert!(!text.contains("error 70\n"), "{text}");
}

#[test]
fn feedback_puts_the_error_the_agent_reported_first() {
    let failure = AgentFailure::Exit {
        code: Some(1),
        signal: None,
        reported: Some("the agent reported an error: API Error: 400 bad request".to_owned()),
        stderr: "\u{1b}[33mwarning\u{1b}[0m\n".to_owned(),
    };
    let text = feedback::render(&agent_phase(), 1, 3, Some(&failure), &[]);
    assert!(
        text.contains(
            "## The agent failed\n\nThe agent reported an error: API Error: 400 bad request\n\nThe agent exited with code 1."
        ),
        "{text}"
    );
    assert!(text.contains("warning"), "{text}");
    assert!(!text.contains('\u{1b}'), "{text:?}");
}

#[test]
fn feedback_given_to_an_agent_fits_one_argument() {
    let short = "# Attempt 1 of 3 failed verification\n";
    let file = Path::new("/run/phases/a/attempt-1/feedback.md");
    assert_eq!(feedback::for_agent(short, file), short);
    let long = format!("START\n{}END\n", "é line\n".repeat(40_000));
    let given = feedback::for_agent(&long, file);
    assert!(
        given.len() <= feedback::AGENT_FEEDBACK_LIMIT,
        "{}",
        given.len()
    );
    assert!(given.starts_with("START\n"));
    assert!(given.ends_with("END\n"));
    assert!(
        given.contains("bytes of this feedback are left out here; all of it is in /run/phases/a/attempt-1/feedback.md"),
        "{given}"
    );
}

#[test]
fn feedback_for_missing_evidence() {
    let failure = AgentFailure::NoEvidence {
        pattern: "\"type\":\"tool_use\"".to_owned(),
    };
    let text = feedback::render(&agent_phase(), 1, 3, Some(&failure), &[]);
    assert!(text.contains(
        "did not show the required evidence `\"type\":\"tool_use\"` — the work looks skipped"
    ));
    insta::assert_snapshot!(text);
}

#[test]
fn feedback_for_an_unreadable_response() {
    let failure = AgentFailure::Response(
        "standard output has no `result` event of `claude-stream-json`".to_owned(),
    );
    insta::assert_snapshot!(feedback::render(&agent_phase(), 1, 3, Some(&failure), &[]));
}

#[test]
fn feedback_warns_before_the_last_attempt_only() {
    let failure = AgentFailure::Exit {
        code: Some(1),
        signal: None,
        reported: None,
        stderr: String::new(),
    };
    let phase = agent_phase();
    let second_of_three = feedback::render(&phase, 2, 3, Some(&failure), &[]);
    assert!(second_of_three.contains("⚠ This is your last attempt: "));
    for (attempt, max) in [(1, 3), (3, 3), (1, 1)] {
        let text = feedback::render(&phase, attempt, max, Some(&failure), &[]);
        assert!(!text.contains("last attempt"), "{attempt} of {max}: {text}");
    }
    insta::assert_snapshot!(second_of_three);
}

#[test]
fn feedback_lists_passed_and_skipped_gates_and_is_deterministic() {
    let reports = [
        GateReport {
            name: "outputs".to_owned(),
            kind: "outputs".into(),
            status: GateStatus::Passed,
            duration_ms: 3,
            details: Vec::new(),
        },
        GateReport {
            name: "tests".to_owned(),
            kind: "command".into(),
            status: GateStatus::Failed,
            duration_ms: 1200,
            details: vec![
                "`pytest` exited with code 1\nstdout:\n```\nE assert 1 == 2\n```".to_owned(),
            ],
        },
        GateReport {
            name: "docs".to_owned(),
            kind: "sections".into(),
            status: GateStatus::Skipped,
            duration_ms: 0,
            details: vec!["the run was cancelled".to_owned()],
        },
    ];
    let phase = agent_phase();
    let text = feedback::render(&phase, 1, 3, None, &reports);
    assert_eq!(text, feedback::render(&phase, 1, 3, None, &reports));
    insta::assert_snapshot!(text);
}

#[tokio::test]
async fn syntax_lists_at_most_25_errors_in_path_order() {
    let ws = Workspace::new(&[]);
    for i in 0..30 {
        ws.write(&format!("src/m{i:02}.py"), "def f(:\n    pass\n");
    }
    let phase = ws.phase("gates {\n    syntax \"src/*.py\"\n}");
    let reports = ws.gates(&phase, Some("done")).await;
    let details = &report(&reports, "syntax").details;
    assert_eq!(details.len(), 26, "{details:#?}");
    for (i, detail) in details[..25].iter().enumerate() {
        assert!(
            detail.starts_with(&format!("src/m{i:02}.py:1:")),
            "{detail}"
        );
    }
    assert_eq!(
        details[25],
        "… and 5 more syntax errors (30 in all, in 30 files)"
    );
}

// ---------------------------------------------------------------------------------------------
// edge cases of outputs, command, matches/absent and sections

#[tokio::test]
async fn near_misses_are_found_in_ignored_folders_and_links_are_files_only_when_they_lead_to_one() {
    let ws = Workspace::new(&[(".gitignore", "build/\n")]);
    ws.write("build/src/gen.py", "x = 1\n")
        .write("build/dist/a.js", "")
        .write("docs/real.md", "");
    std::os::unix::fs::symlink("/nonexistent/file.md", ws.path().join("docs/dangling.md")).unwrap();
    std::fs::create_dir(ws.path().join("sub")).unwrap();
    std::os::unix::fs::symlink("../sub", ws.path().join("docs/folder.md")).unwrap();
    std::os::unix::fs::symlink("real.md", ws.path().join("docs/link.md")).unwrap();
    let phase = ws.phase(
        r#"outputs {
    file "src/gen.py"
    glob "dist/*.js"
    glob "docs/*.md" min=3
}"#,
    );
    let reports = ws.gates(&phase, Some("done")).await;
    assert_eq!(
        report(&reports, "outputs").details,
        [
            "missing `src/gen.py`; found `build/src/gen.py` — written to the wrong folder?",
            "no file matches `dist/*.js`; at least 1 expected; found `build/dist/a.js` — written \
             to the wrong folder?",
            "`docs/*.md` matches 2 files (`docs/link.md`, `docs/real.md`); at least 3 expected",
        ]
    );
}

#[tokio::test]
async fn an_empty_list_of_expected_files_fails() {
    let ws = Workspace::new(&[("doc.md", "---\nfiles:\n  create: []\n---\n# Plan\n")]);
    let phase = ws.phase("outputs {\n    from \"doc.md\" key=\"files.create\"\n}");
    let reports = ws.gates(&phase, Some("done")).await;
    assert_eq!(
        report(&reports, "outputs").details,
        [
            "`doc.md` lists no paths under `files.create`: an empty list of expected files never passes"
        ]
    );
}

#[tokio::test]
async fn a_failing_command_whose_last_line_is_long_still_shows_its_end() {
    let ws = Workspace::new(&[]);
    let phase = ws.phase(
        r#"gates {
    command "head -c 5000 /dev/zero | tr '\\0' x >&2; echo ' AssertionError: 2 != 3' >&2; exit 1" name="t"
}"#,
    );
    let reports = ws.gates(&phase, Some("done")).await;
    let details = &report(&reports, "t").details;
    assert_eq!(details.len(), 1, "{details:#?}");
    assert!(
        details[0].contains("` exited with code 1\nstderr:\n…xxx")
            && details[0].ends_with("xxx AssertionError: 2 != 3"),
        "{details:#?}"
    );
}

#[tokio::test]
async fn matches_and_absent_agree_on_crlf_lines_and_patterns_that_span_lines() {
    let ws = Workspace::new(&[]);
    ws.write("crlf.txt", "start\r\ndone\r\n")
        .write("multi.py", "foo\nbar\n");
    let phase = ws.phase(
        r#"gates {
    matches "crlf.txt" "^done$" name="matches-crlf"
    absent "crlf.txt" "^done$" name="absent-crlf"
    matches "multi.py" "foo\nbar" name="matches-multi"
    absent "multi.py" "foo\nbar" name="absent-multi"
    absent "multi.py" "(?s)o.*a" name="absent-dotall"
    absent "response" "one\ntwo" name="absent-response"
    absent "missing/**" "TODO" name="absent-nothing"
}"#,
    );
    let reports = ws.gates(&phase, Some("zero\none\ntwo\n")).await;
    assert_eq!(report(&reports, "matches-crlf").status, GateStatus::Passed);
    assert_eq!(
        report(&reports, "absent-crlf").details,
        [
            "`^done$` must not appear, but it matches 1 line",
            "crlf.txt:2: done"
        ]
    );
    assert_eq!(report(&reports, "matches-multi").status, GateStatus::Passed);
    assert_eq!(
        report(&reports, "absent-multi").details,
        [
            "`foo\nbar` must not appear, but it matches 1 line",
            "multi.py:1: foo"
        ]
    );
    assert_eq!(report(&reports, "absent-dotall").status, GateStatus::Failed);
    assert_eq!(
        report(&reports, "absent-response").details,
        [
            "`one\ntwo` must not appear, but it matches 1 line",
            "response:2: one"
        ]
    );
    let nothing = report(&reports, "absent-nothing");
    assert_eq!(nothing.status, GateStatus::Passed);
    assert_eq!(
        nothing.details,
        ["`missing/**` matches no file: nothing was checked for `TODO`"]
    );
}

#[tokio::test]
async fn sections_recognise_setext_headings() {
    let ws = Workspace::new(&[(
        "doc.md",
        "Title\n=====\n\nSome text\nover two lines\n---\n\n---\n\nNot a heading\n\n    code\n    ---\n",
    )]);
    let phase = ws.phase(
        "gates {\n    sections \"doc.md\" \"Title\" \"Some text over two lines\" \"Missing\"\n}",
    );
    let reports = ws.gates(&phase, Some("done")).await;
    assert_eq!(
        report(&reports, "sections").details,
        [
            "`doc.md` has no heading `Missing`",
            "headings found: `Title`, `Some text over two lines`",
        ]
    );
}
