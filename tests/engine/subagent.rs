//! `sub-agent` verification with fake verifiers: real `sh` scripts run as real child processes in
//! real temporary workspaces, judged from their real logs, with real snapshots around the review.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use helixflow::Cancel;
use helixflow::Redactor;
use helixflow::subagent::{
    self, DIFF_LIMIT, FILE_DIFF_LIMIT, SubAgentCheck, SubAgentOutcome, Verdict, VerdictError,
};
use helixflow::{Agent, Phase};
use helixflow::{Changes, Snapshot, SnapshotOptions};
use helixflow::{FsLoader, Options, compile};
use helixflow::{GateReport, GateStatus};

/// The state dir, inside the workspace as in a real run.
const STATE_DIR: &str = ".helixflow";

/// A workspace whose "attempt" has run, and a verifier to review it.
struct Review {
    root: tempfile::TempDir,
    before: Snapshot,
    phase: Phase,
    verifier: Agent,
    gate_reports: Vec<GateReport>,
    redactor: Redactor,
    cancel: Cancel,
}

impl Review {
    /// A workspace holding these files before the attempt (snapshotted with kept contents).
    fn new(files: &[(&str, &[u8])]) -> Self {
        let root = tempfile::tempdir().expect("temporary folder");
        std::fs::create_dir_all(root.path().join("ws").join(STATE_DIR)).expect("state dir");
        std::fs::create_dir_all(root.path().join("bin")).expect("script folder");
        for (path, bytes) in files {
            write(&root.path().join("ws"), path, bytes);
        }
        let before = Snapshot::take(&root.path().join("ws"), &keeping(), None).expect("snapshot");
        let (phase, verifier) = compile_review(root.path(), "echo unused", "", "");
        Self {
            root,
            before,
            phase,
            verifier,
            gate_reports: Vec::new(),
            redactor: Redactor::default(),
            cancel: Cancel::default(),
        }
    }

    fn workspace(&self) -> PathBuf {
        self.root.path().join("ws")
    }

    fn attempt_dir(&self) -> PathBuf {
        self.workspace()
            .join(STATE_DIR)
            .join("runs/r1/build/attempt-2")
    }

    /// Writes a file during "the attempt".
    fn write(&self, path: &str, bytes: &[u8]) -> &Self {
        write(&self.workspace(), path, bytes);
        self
    }

    /// The verifier runs `sh verifier.sh PROMPT_FILE` with this script; `agent` and `phase` are
    /// extra children of the verifier agent and of the phase.
    fn verifier(&mut self, script: &str, agent: &str, phase: &str) -> &mut Self {
        (self.phase, self.verifier) = compile_review(self.root.path(), script, agent, phase);
        self
    }

    /// What the attempt changed, as the engine would compute it.
    fn changes(&self) -> Changes {
        let after = Snapshot::take(&self.workspace(), &keeping(), Some(&self.before))
            .expect("snapshot after");
        self.before.diff(&after)
    }

    fn run_check(&self) -> SubAgentOutcome {
        let changes = self.changes();
        let workspace = self.workspace();
        let attempt_dir = self.attempt_dir();
        let env: Vec<(OsString, OsString)> =
            vec![("REVIEW_FROM_PIPELINE".into(), "pipeline".into())];
        let exclude = [PathBuf::from(STATE_DIR)];
        let check = SubAgentCheck {
            workspace: &workspace,
            phase: &self.phase,
            task: "Write src/app.py with a main() that prints hello",
            verifier: &self.verifier,
            attempt_dir: &attempt_dir,
            gate_reports: &self.gate_reports,
            changes: &changes,
            before: &self.before,
            env: &env,
            exclude: &exclude,
            cancel: &self.cancel,
            redactor: Arc::new(self.redactor.clone()),
            grace: Duration::from_millis(200),
            attempt: 2,
            alongside: &[],
        };
        runtime()
            .block_on(subagent::check(&check))
            .expect("the verification runs")
    }

    fn attempt_file(&self, name: &str) -> String {
        std::fs::read_to_string(self.attempt_dir().join(name))
            .unwrap_or_else(|e| panic!("{name} in the attempt folder: {e}"))
    }

    fn verdict_json(&self) -> serde_json::Value {
        serde_json::from_str(&self.attempt_file("verdict.json")).expect("verdict.json is JSON")
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn keeping() -> SnapshotOptions {
    SnapshotOptions {
        exclude: vec![PathBuf::from(STATE_DIR)],
        keep_contents_under: Some(32 << 20),
        ..SnapshotOptions::default()
    }
}

fn write(root: &Path, path: &str, bytes: &[u8]) {
    let full = root.join(path);
    std::fs::create_dir_all(full.parent().expect("a parent folder")).expect("folders created");
    std::fs::write(full, bytes).expect("file written");
}

/// Writes the verifier script under `root/bin` and compiles a pipeline whose phase `build` is
/// reviewed by agent `checker`, running `sh verifier.sh PROMPT_FILE`.
fn compile_review(root: &Path, script: &str, agent: &str, phase: &str) -> (Phase, Agent) {
    let script_path = root.join("bin/verifier.sh");
    std::fs::write(&script_path, script).expect("script written");
    let text = format!(
        r#"pipeline "review"
agent "worker" {{
    command "true"
}}
agent "checker" {{
    command "sh" "{}" "{{{{ prompt_file }}}}"
    {agent}
}}
phase "build" {{
    description "Build the app"
    agent "worker"
    prompt "Write src/app.py with a main() that prints hello"
    outputs {{
        file "src/app.py"
    }}
    verify "sub-agent"
    verifier "checker"
    {phase}
}}
"#,
        script_path.display()
    );
    compile_pipeline(&root.join("ws"), &text)
}

fn compile_pipeline(workspace: &Path, text: &str) -> (Phase, Agent) {
    let compiled = compile(
        &workspace.join("pipeline.kdl"),
        text,
        &FsLoader,
        Options::default(),
    );
    assert!(
        !compiled.has_errors(),
        "the test pipeline compiles:\n{text}\n{:#?}",
        compiled.diagnostics
    );
    let pipeline = compiled.pipeline.expect("a pipeline");
    let phase = pipeline.phases[0].clone();
    let verifier = pipeline.agents["checker"].clone();
    (phase, verifier)
}

fn void_reason(outcome: &SubAgentOutcome) -> &str {
    match outcome {
        SubAgentOutcome::Void { reason, .. } => reason,
        other => panic!("expected a void verdict, got {other:?}"),
    }
}

/// A review of an attempt that changed `src/app.py`.
fn reviewed_app() -> Review {
    let review = Review::new(&[("src/app.py", b"def main():\n    pass\n")]);
    review.write("src/app.py", b"def main():\n    print('hello')\n");
    review
}

// --- verdicts -----------------------------------------------------------------------------------

#[test]
fn a_passing_verdict_is_returned_and_kept_with_the_logs() {
    let mut review = reviewed_app();
    review.verifier(
        r#"grep -q "print('hello')" "$1" || { echo "the diff is not in the prompt" >&2; exit 7; }
echo "I read src/app.py and ran it."
echo "{\"success\": true, \"checks_passed\": [\"phase=$HELIXFLOW_PHASE attempt=$HELIXFLOW_ATTEMPT pipeline=$REVIEW_FROM_PIPELINE agent=$FROM_AGENT phase_env=$FROM_PHASE pyc=$PYTHONDONTWRITEBYTECODE\"]}"
"#,
        r#"env "FROM_AGENT" "agent""#,
        r#"env "FROM_PHASE" "phase""#,
    );
    let outcome = review.run_check();
    assert_eq!(
        outcome,
        SubAgentOutcome::Verdict(Verdict {
            success: true,
            errors: vec![],
            checks_passed: vec![
                "phase=build attempt=2 pipeline=pipeline agent=agent phase_env=phase pyc=1".into()
            ],
            feedback: String::new(),
        })
    );
    let json = review.verdict_json();
    assert_eq!(json["success"], true);
    assert!(
        review
            .attempt_file("verifier.stdout.log")
            .contains("I read src/app.py")
    );
    assert!(review.attempt_dir().join("verifier.stderr.log").is_file());
    let prompt = review.attempt_file("verifier-prompt.md");
    assert!(prompt.contains("+    print('hello')"), "{prompt}");
    assert!(prompt.contains("-    pass"), "{prompt}");
}

#[test]
fn a_failing_verdict_carries_its_errors_and_feedback() {
    let mut review = reviewed_app();
    review.verifier(
        r#"cat <<'EOF'
The function prints the wrong word.
{"success": false, "errors": ["src/app.py:2: prints 'hello' but the task says 'Hello'"], "checks_passed": ["src/app.py exists"], "feedback": "Print exactly 'Hello'."}
EOF
"#,
        "",
        "",
    );
    let expected = Verdict {
        success: false,
        errors: vec!["src/app.py:2: prints 'hello' but the task says 'Hello'".into()],
        checks_passed: vec!["src/app.py exists".into()],
        feedback: "Print exactly 'Hello'.".into(),
    };
    assert_eq!(
        review.run_check(),
        SubAgentOutcome::Verdict(expected.clone())
    );
    let kept: Verdict =
        serde_json::from_str(&review.attempt_file("verdict.json")).expect("verdict.json");
    assert_eq!(kept, expected);
}

#[test]
fn a_fenced_json_verdict_is_read() {
    let mut review = reviewed_app();
    review.verifier(
        r#"cat <<'EOF'
Review done.

```json
{
  "success": true,
  "errors": [],
  "checks_passed": ["main() prints hello"],
  "feedback": ""
}
```
EOF
"#,
        "",
        "",
    );
    assert_eq!(
        review.run_check(),
        SubAgentOutcome::Verdict(Verdict {
            success: true,
            errors: vec![],
            checks_passed: vec!["main() prints hello".into()],
            feedback: String::new(),
        })
    );
}

#[test]
fn claude_stream_json_with_evidence_is_read() {
    let mut review = reviewed_app();
    review.verifier(
        r#"cat <<'EOF'
{"type":"system","subtype":"init"}
{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Read","input":{"file_path":"src/app.py"}}]}}
{"type":"result","subtype":"success","is_error":false,"result":"Looks right.\n```json\n{\"success\": true, \"checks_passed\": [\"read src/app.py\"]}\n```"}
EOF
"#,
        r#"response "claude-stream-json"
    evidence "\"type\":\"tool_use\"""#,
        "",
    );
    assert_eq!(
        review.run_check(),
        SubAgentOutcome::Verdict(Verdict {
            success: true,
            errors: vec![],
            checks_passed: vec!["read src/app.py".into()],
            feedback: String::new(),
        })
    );
}

#[test]
fn the_prompt_goes_to_standard_input_when_asked() {
    let mut review = reviewed_app();
    review.verifier(
        r#"prompt=$(cat)
case "$prompt" in
  *"Review the work of phase \`build\`"*"+    print('hello')"*) echo '{"success": true}' ;;
  *) echo "no prompt on stdin" ;;
esac
"#,
        "stdin #true",
        "",
    );
    assert!(matches!(
        review.run_check(),
        SubAgentOutcome::Verdict(Verdict { success: true, .. })
    ));
}

#[test]
fn secrets_are_redacted_from_the_verdict_and_its_file() {
    let mut review = reviewed_app();
    review.redactor = Redactor::new([("API_KEY".to_owned(), "sk-hunter2".to_owned())]);
    review.verifier(
        r#"echo '{"success": false, "errors": ["the key sk-hunter2 is hard-coded"], "feedback": "drop sk-hunter2"}'"#,
        "",
        "",
    );
    let outcome = review.run_check();
    let SubAgentOutcome::Verdict(verdict) = outcome else {
        panic!("expected a verdict, got {outcome:?}");
    };
    assert_eq!(
        verdict.errors,
        vec!["the key [REDACTED:API_KEY] is hard-coded"]
    );
    assert_eq!(verdict.feedback, "drop [REDACTED:API_KEY]");
    assert!(!review.attempt_file("verdict.json").contains("hunter2"));
    assert!(
        !review
            .attempt_file("verifier.stdout.log")
            .contains("hunter2")
    );
}

// --- void verdicts ------------------------------------------------------------------------------

#[test]
fn a_pass_without_evidence_is_void() {
    let mut review = reviewed_app();
    review.verifier(
        r#"echo 'Everything is fine. {"success": true}'"#,
        r#"evidence "\"type\":\"tool_use\"""#,
        "",
    );
    let outcome = review.run_check();
    let reason = void_reason(&outcome);
    assert!(reason.contains("`evidence` pattern"), "{reason}");
    assert!(reason.contains("looks skipped"), "{reason}");
    let json = review.verdict_json();
    assert!(
        json["void"]
            .as_str()
            .is_some_and(|r| r.contains("evidence")),
        "{json}"
    );
    assert_eq!(
        json["verdict"]["success"], true,
        "the voided verdict is kept for people"
    );
}

#[test]
fn garbage_is_void() {
    let mut review = reviewed_app();
    review.verifier("echo 'LGTM!!! success: yes {approved}'\n", "", "");
    let outcome = review.run_check();
    let reason = void_reason(&outcome);
    assert!(reason.contains("gave no verdict"), "{reason}");
}

#[test]
fn an_invalid_verdict_is_void() {
    let mut review = reviewed_app();
    review.verifier(
        r#"echo '{"success": false, "errors": "it is broken"}'"#,
        "",
        "",
    );
    let outcome = review.run_check();
    let reason = void_reason(&outcome);
    assert!(
        reason.contains("invalid: `errors` must be a list of strings"),
        "{reason}"
    );
}

#[test]
fn a_non_zero_exit_is_void_even_with_a_verdict() {
    let mut review = reviewed_app();
    review.verifier("echo '{\"success\": true}'\nexit 3\n", "", "");
    let outcome = review.run_check();
    let reason = void_reason(&outcome);
    assert!(reason.contains("exited with code 3"), "{reason}");
}

#[test]
fn a_timeout_is_void() {
    let mut review = reviewed_app();
    review.verifier(
        "sleep 30\necho '{\"success\": true}'\n",
        r#"timeout "1s""#,
        "",
    );
    let started = Instant::now();
    let outcome = review.run_check();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "stopped at its timeout, took {:?}",
        started.elapsed()
    );
    let reason = void_reason(&outcome);
    assert!(reason.contains("ran past its `timeout` of 1s"), "{reason}");
}

#[test]
fn changes_by_the_verifier_void_the_verdict_and_are_undone_byte_exact() {
    let binary: &[u8] = &[0, 159, 146, 150, 255, b'\n', 0, 1, 2];
    let review = Review::new(&[
        ("src/app.py", b"def main():\n    pass\n"),
        ("data.bin", binary),
    ]);
    review.write("src/app.py", b"def main():\n    print('hello')\n");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            review.workspace().join("data.bin"),
            std::fs::Permissions::from_mode(0o751),
        )
        .expect("chmod");
    }
    let mut review = review;
    review.verifier(
        r#"printf 'def main():\n    print("fixed by the reviewer")\n' > src/app.py
rm data.bin
mkdir -p scratch/deep
echo leftover > scratch/deep/notes.txt
echo '{"success": true, "checks_passed": ["fixed it myself"]}'
"#,
        "",
        "",
    );
    let app_before_review = std::fs::read(review.workspace().join("src/app.py")).unwrap();
    let outcome = review.run_check();
    let SubAgentOutcome::Void {
        reason,
        changed,
        not_restored,
    } = &outcome
    else {
        panic!("expected a void verdict, got {outcome:?}");
    };
    assert_eq!(
        changed,
        &vec![
            "scratch/deep/notes.txt".to_owned(),
            "src/app.py".to_owned(),
            "data.bin".to_owned()
        ]
    );
    assert!(not_restored.is_empty(), "{not_restored:?}");
    assert!(
        reason.contains("the verifier changed the workspace"),
        "{reason}"
    );
    assert!(
        reason.contains("created `scratch/deep/notes.txt`"),
        "{reason}"
    );
    assert!(reason.contains("modified `src/app.py`"), "{reason}");
    assert!(reason.contains("deleted `data.bin`"), "{reason}");
    assert!(reason.contains("(all undone)"), "{reason}");

    let ws = review.workspace();
    assert_eq!(
        std::fs::read(ws.join("src/app.py")).unwrap(),
        app_before_review
    );
    assert_eq!(std::fs::read(ws.join("data.bin")).unwrap(), binary);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(ws.join("data.bin"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o751);
    }
    assert!(
        !ws.join("scratch").exists(),
        "the created folders are gone too"
    );

    let json = review.verdict_json();
    assert!(json["void"].as_str().is_some());
    assert_eq!(json["changed"].as_array().map(Vec::len), Some(3));
    assert_eq!(json["not_restored"], serde_json::json!([]));
}

/// Every path below `root` but the state folder (folders with a trailing `/`, symlinks as
/// `-> target`), with the contents of each file, in name order: the whole workspace, to compare
/// before and after.
fn every_path(root: &Path) -> Vec<(String, String)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .expect("a folder")
            .map(|e| e.expect("an entry").path())
            .collect();
        entries.sort();
        for path in entries {
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            if rel == STATE_DIR {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                out.push((rel, format!("-> {}", target.display())));
            } else if meta.is_dir() {
                out.push((format!("{rel}/"), String::new()));
                walk(root, &path, out);
            } else {
                out.push((rel, std::fs::read_to_string(&path).unwrap_or_default()));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out
}

#[test]
fn a_folder_the_verifier_moves_and_links_back_is_put_back_exactly() {
    let mut review = Review::new(&[
        ("src/app.py", b"def main():\n    pass\n"),
        ("sub/a.txt", b"a\n"),
        ("sub/deep/b.txt", b"b\n"),
    ]);
    review.write("src/app.py", b"def main():\n    print('hello')\n");
    let before_review = every_path(&review.workspace());
    review.verifier(
        "mv sub sub_real\nln -s sub_real sub\necho '{\"success\": true}'\n",
        "",
        "",
    );
    let outcome = review.run_check();
    let SubAgentOutcome::Void {
        reason,
        not_restored,
        ..
    } = &outcome
    else {
        panic!("expected a void verdict, got {outcome:?}");
    };
    assert!(reason.contains("(all undone)"), "{reason}");
    assert!(not_restored.is_empty(), "{not_restored:?}");
    assert_eq!(
        every_path(&review.workspace()),
        before_review,
        "the workspace is as the review found it: `sub` a folder again, no `sub_real`"
    );
}

#[test]
fn a_cancelled_review_is_undone_too() {
    let mut review = reviewed_app();
    review.verifier(
        "echo vandalised > src/app.py\necho changed\nsleep 30\n",
        "",
        "",
    );
    let before_review = std::fs::read(review.workspace().join("src/app.py")).unwrap();
    let soft = review.cancel.soft.clone();
    let marker = review.attempt_dir().join("verifier.stdout.log");
    let canceller = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if std::fs::read_to_string(&marker).is_ok_and(|log| log.contains("changed")) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        soft.cancel();
    });
    let outcome = review.run_check();
    canceller.join().unwrap();
    assert_eq!(outcome, SubAgentOutcome::Cancelled);
    assert_eq!(
        std::fs::read(review.workspace().join("src/app.py")).unwrap(),
        before_review
    );
    assert_eq!(review.verdict_json()["cancelled"], true);
}

#[test]
fn a_verifier_that_cannot_start_is_an_error() {
    let mut review = reviewed_app();
    review.verifier("", "", "");
    review.verifier.command = vec!["/nonexistent/reviewer-bin".into(), "{{ prompt }}".into()];
    let changes = review.changes();
    let workspace = review.workspace();
    let attempt_dir = review.attempt_dir();
    let check = SubAgentCheck {
        workspace: &workspace,
        phase: &review.phase,
        task: "task",
        verifier: &review.verifier,
        attempt_dir: &attempt_dir,
        gate_reports: &[],
        changes: &changes,
        before: &review.before,
        env: &[],
        exclude: &[PathBuf::from(STATE_DIR)],
        cancel: &review.cancel,
        redactor: Arc::new(Redactor::default()),
        grace: Duration::from_millis(200),
        attempt: 1,
        alongside: &[],
    };
    let error = runtime()
        .block_on(subagent::check(&check))
        .expect_err("no such program");
    assert!(
        error.to_string().contains("/nonexistent/reviewer-bin"),
        "{error}"
    );
}

// --- parsing verdicts ---------------------------------------------------------------------------

#[test]
fn a_verdict_inside_prose_is_found() {
    let response = "I checked it {carefully}. My verdict: {\"success\": false, \"errors\": \
                    [\"a {brace} in a string\"], \"feedback\": \"use } and { freely\"} — \
                    that is all. {not json either";
    assert_eq!(
        subagent::parse_verdict(response),
        Ok(Verdict {
            success: false,
            errors: vec!["a {brace} in a string".into()],
            checks_passed: vec![],
            feedback: "use } and { freely".into(),
        })
    );
}

#[test]
fn the_last_verdict_wins() {
    let response = "First thought: {\"success\": false, \"errors\": [\"x\"]}\nOn reflection:\n\
                    ```json\n{\"success\": true, \"checks_passed\": [\"y\"]}\n```\n\
                    {\"note\": \"objects without success do not count\"}";
    assert_eq!(
        subagent::parse_verdict(response),
        Ok(Verdict {
            success: true,
            errors: vec![],
            checks_passed: vec!["y".into()],
            feedback: String::new(),
        })
    );
}

#[test]
fn null_fields_count_as_absent() {
    assert_eq!(
        subagent::parse_verdict(
            r#"{"success": true, "errors": null, "checks_passed": null, "feedback": null, "extra": 1}"#
        ),
        Ok(Verdict {
            success: true,
            errors: vec![],
            checks_passed: vec![],
            feedback: String::new(),
        })
    );
}

#[test]
fn invalid_verdicts_say_what_is_wrong() {
    let invalid = |response: &str| match subagent::parse_verdict(response) {
        Err(VerdictError::Invalid(why)) => why,
        other => panic!("expected an invalid verdict for {response}, got {other:?}"),
    };
    assert_eq!(
        invalid(r#"{"success": "yes"}"#),
        "`success` must be true or false, not \"yes\""
    );
    assert_eq!(
        invalid(r#"{"success": false, "errors": ["a", 2]}"#),
        "`errors` must be a list of strings, but entry 2 is 2"
    );
    assert_eq!(
        invalid(r#"{"success": false, "checks_passed": "all"}"#),
        "`checks_passed` must be a list of strings, not \"all\""
    );
    assert_eq!(
        invalid(r#"{"success": false, "feedback": ["a"]}"#),
        "`feedback` must be a string, not [\"a\"]"
    );
    assert!(
        invalid(r#"{"success": true, "errors": ["tests fail"]}"#).contains("contradict"),
        "a passing verdict that lists errors"
    );
}

#[test]
fn no_verdict_is_missing() {
    for response in [
        "",
        "looks good to me",
        "{\"success\": true",
        "{success: true}",
        "{\"result\": {\"success\": true}}",
        "{\"success\": true | false, \"errors\": [\"…\"]}",
    ] {
        assert_eq!(
            subagent::parse_verdict(response),
            Err(VerdictError::Missing),
            "{response}"
        );
    }
}

#[test]
fn a_verdict_after_a_long_transcript_is_found() {
    let mut response = "{\"partial\": [1, 2, {\"nested\": \"{\"}]} log line\n".repeat(60_000);
    assert!(response.len() > 2 * 1024 * 1024);
    response.push_str("{\"success\": true}\n");
    assert!(matches!(
        subagent::parse_verdict(&response),
        Ok(Verdict { success: true, .. })
    ));
}

// --- the prompt and the diff --------------------------------------------------------------------

#[test]
fn the_prompt_shows_task_outputs_gates_changes_and_diff() {
    let mut review = Review::new(&[
        (
            "src/app.py",
            b"import sys\n\n\ndef main():\n    pass\n\n\nif __name__ == '__main__':\n    main()\n",
        ),
        ("notes.txt", b"obsolete notes\n"),
        ("logo.png", &[0x89, b'P', b'N', b'G', 0, 0, 1]),
    ]);
    review.write(
        "src/app.py",
        b"import sys\n\n\ndef main():\n    print('hello')\n\n\nif __name__ == '__main__':\n    main()\n",
    );
    review.write(
        "src/util.py",
        b"def shout(text):\n    return text.upper()\n",
    );
    review.write("logo.png", &[0x89, b'P', b'N', b'G', 0, 0, 2, 3]);
    std::fs::remove_file(review.workspace().join("notes.txt")).unwrap();
    review.verifier(
        "true",
        "",
        r#"verifier-prompt "Also check that nothing is printed to stderr.""#,
    );
    review.gate_reports = vec![
        GateReport {
            name: "outputs".into(),
            kind: "outputs".into(),
            status: GateStatus::Passed,
            duration_ms: 1,
            details: vec![],
        },
        GateReport {
            name: "tests".into(),
            kind: "command".into(),
            status: GateStatus::Passed,
            duration_ms: 120,
            details: vec!["passed after `fix` ran\n3 passed in 0.02s".into()],
        },
    ];
    let changes = review.changes();
    let workspace = review.workspace();
    let attempt_dir = review.attempt_dir();
    let check = SubAgentCheck {
        workspace: &workspace,
        phase: &review.phase,
        task: "Write src/app.py with a main() that prints hello.\n\n```python\nprint('hello')\n```",
        verifier: &review.verifier,
        attempt_dir: &attempt_dir,
        gate_reports: &review.gate_reports,
        changes: &changes,
        before: &review.before,
        env: &[],
        exclude: &[PathBuf::from(STATE_DIR)],
        cancel: &review.cancel,
        redactor: Arc::new(Redactor::default()),
        grace: Duration::from_millis(200),
        attempt: 2,
        alongside: &[],
    };
    let diff = subagent::diff_of_changes(&workspace, &review.before, &changes);
    let prompt = subagent::verification_prompt(&check, &diff);
    let root = review.root.path().display().to_string();
    insta::assert_snapshot!("verification-prompt", prompt.replace(&root, "[TEMP]"));
}

#[test]
fn the_diff_is_bounded_per_file_and_in_all() {
    let review = Review::new(&[("small.txt", b"one\ntwo\n")]);
    let big = (0..4000).fold(String::new(), |mut text, i| {
        let _ = writeln!(text, "line {i} of a long file");
        text
    });
    for i in 0..8 {
        review.write(&format!("gen/file{i}.txt"), big.as_bytes());
    }
    review.write("small.txt", b"one\n2\n");
    let changes = review.changes();
    let diff = subagent::diff_of_changes(&review.workspace(), &review.before, &changes);
    assert!(diff.len() <= DIFF_LIMIT, "{} bytes", diff.len());
    // Files in path order: gen/file0.txt … gen/file7.txt, then small.txt.
    let parts: Vec<&str> = diff.split("--- /dev/null\n").skip(1).collect();
    assert!(parts.len() >= 3, "several files fit: {}", parts.len());
    for part in &parts {
        let part = part
            .split("[helixflow: the diff is cut")
            .next()
            .unwrap_or(part);
        assert!(part.len() + 14 <= FILE_DIFF_LIMIT, "{} bytes", part.len());
        assert!(
            part.contains("more lines of this file's diff left out]"),
            "a cut part says so"
        );
    }
    assert!(diff.contains("+++ b/gen/file0.txt\n@@ -0,0 +1,4000 @@\n+line 0 of a long file\n"));
    let note = diff.lines().last().expect("a closing note");
    assert!(
        note.starts_with("[helixflow: the diff is cut at 64 KiB; not shown:"),
        "{note}"
    );
    assert!(note.contains("`small.txt`"), "{note}");
}

#[test]
fn files_that_are_not_text_are_named_not_diffed() {
    let review = Review::new(&[
        ("image.bin", &[1, 2, 0, 3]),
        ("tool.sh", b"#!/bin/sh\necho hi\n"),
    ]);
    review.write("image.bin", &[1, 2, 0, 3, 4]);
    review.write("empty.txt", b"");
    review.write("latin1.txt", &[b'c', b'a', b'f', 0xe9, b'\n']);
    let huge = vec![b'x'; 2 * 1024 * 1024];
    review.write("huge.txt", &huge);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            review.workspace().join("tool.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::os::unix::fs::symlink("tool.sh", review.workspace().join("link.sh")).unwrap();
    }
    let changes = review.changes();
    let diff = subagent::diff_of_changes(&review.workspace(), &review.before, &changes);
    assert!(diff.contains("`empty.txt`: created, empty\n"), "{diff}");
    assert!(
        diff.contains("`huge.txt`: created, a file of 2097152 bytes, too large to diff\n"),
        "{diff}"
    );
    assert!(
        diff.contains(
            "`image.bin`: changed from a binary file of 4 bytes to a binary file of 5 bytes\n"
        ),
        "{diff}"
    );
    assert!(
        diff.contains("`latin1.txt`: created, a binary file of 5 bytes\n"),
        "{diff}"
    );
    #[cfg(unix)]
    {
        assert!(
            diff.contains("`link.sh`: created, a symlink to `tool.sh`\n"),
            "{diff}"
        );
        assert!(diff.contains("`tool.sh`: made executable\n"), "{diff}");
    }
}

#[test]
fn without_kept_contents_a_modified_file_is_only_named() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", b"old\n");
    let before = Snapshot::take(dir.path(), &SnapshotOptions::default(), None).unwrap();
    write(dir.path(), "a.txt", b"new text\n");
    let after = Snapshot::take(dir.path(), &SnapshotOptions::default(), Some(&before)).unwrap();
    let changes = before.diff(&after);
    let diff = subagent::diff_of_changes(dir.path(), &before, &changes);
    assert_eq!(
        diff,
        "`a.txt`: changed from a file of 4 bytes whose contents before the attempt were not kept \
         to a text file of 9 bytes\n"
    );
}

#[test]
fn a_prompt_too_long_for_the_command_line_says_how_to_pass_it() {
    let mut review = reviewed_app();
    review.verifier("", "", "");
    review.verifier.command = vec![
        "sh".into(),
        "-c".into(),
        "true".into(),
        "{{ prompt }}".into(),
    ];
    let task = "Implement everything. ".repeat(10_000);
    let changes = review.changes();
    let workspace = review.workspace();
    let attempt_dir = review.attempt_dir();
    let check = SubAgentCheck {
        workspace: &workspace,
        phase: &review.phase,
        task: &task,
        verifier: &review.verifier,
        attempt_dir: &attempt_dir,
        gate_reports: &[],
        changes: &changes,
        before: &review.before,
        env: &[],
        exclude: &[PathBuf::from(STATE_DIR)],
        cancel: &review.cancel,
        redactor: Arc::new(Redactor::default()),
        grace: Duration::from_millis(200),
        attempt: 1,
        alongside: &[],
    };
    let error = runtime()
        .block_on(subagent::check(&check))
        .expect_err("the argument is longer than the system allows");
    assert_eq!(error.kind(), std::io::ErrorKind::ArgumentListTooLong);
    assert!(error.to_string().contains("{{ prompt_file }}"), "{error}");
}

// --- feedback for the next attempt --------------------------------------------------------------

#[test]
fn a_rejection_becomes_feedback() {
    let rejected = SubAgentOutcome::Verdict(Verdict {
        success: false,
        errors: vec![
            "src/app.py:2: prints 'hello', the task says 'Hello'".into(),
            "no test for main()\nexpected tests/test_app.py".into(),
        ],
        checks_passed: vec!["src/app.py parses".into()],
        feedback: "Print exactly 'Hello' and add a test.".into(),
    });
    insta::assert_snapshot!("rejection-feedback", rejected.feedback().expect("feedback"));

    let void = SubAgentOutcome::Void {
        reason: "the verifier exited with code 3 (see verifier.stderr.log)".into(),
        changed: vec![],
        not_restored: vec![],
    };
    assert_eq!(
        void.feedback().expect("feedback"),
        "## The review of the work was void\n\nThe independent review of this attempt could not \
         be trusted, so the attempt counts as failed: the verifier exited with code 3 (see \
         verifier.stderr.log). That is the verifier's failure, not the work's: the verifier is \
         asked again, and the work is not run again for it.\n"
    );

    let passed = SubAgentOutcome::Verdict(Verdict {
        success: true,
        errors: vec![],
        checks_passed: vec!["all".into()],
        feedback: String::new(),
    });
    assert_eq!(passed.feedback(), None);
    assert_eq!(SubAgentOutcome::Cancelled.feedback(), None);
}
