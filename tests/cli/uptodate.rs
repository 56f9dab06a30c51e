//! Up-to-date phases: what a second run skips, what re-runs and why (`status`), `--force` and
//! `--from`, resuming after a failure, and records that survive `SIGKILL` at any moment.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::Test;

/// Writes `out/<phase>.txt` from its input files, and notes the call in `calls.log`. It fails
/// while `fail-<phase>` exists, and sleeps `SLEEP` seconds first when set.
const AGENT: &str = r#"
import os, sys, time
phase = sys.argv[1]
time.sleep(float(os.environ.get("SLEEP", "0")))
with open("calls.log", "a") as log:
    log.write(phase + "\n")
if os.path.exists("fail-" + phase):
    print("cannot do it")
    sys.exit(1)
os.makedirs("out", exist_ok=True)
text = phase
for source in sys.argv[2:]:
    if os.path.exists(source):
        text += "|" + open(source).read()
tmp = "out/" + phase + ".tmp"
with open(tmp, "w") as out:
    out.write(text)
os.replace(tmp, "out/" + phase + ".txt")
"#;

const PIPELINE: &str = r#"pipeline "p"
agent "bot" {
    command "python3" "agent.py" "{{ phase }}" "data/c.txt" "out/a.txt"
}
template "step" {
    param "what"
    agent "bot"
    prompt "Write {{ what }}"
    retries 0
}
phase "a" {
    agent "bot"
    prompt file="prompts/a.md"
    retries 0
    outputs { file "out/a.txt" }
}
phase "b" {
    agent "bot"
    prompt "Write b from a"
    retries 0
    depends-on "a"
    outputs { file "out/b.txt" }
}
phase "c" {
    agent "bot"
    prompt "Write c"
    retries 0
    inputs { file "data/c.txt" }
    outputs { file "out/c.txt" }
    gates { command "test -s out/c.txt" name="nonempty" }
}
phase "d" use="step" what="d" {
    outputs { file "out/d.txt" }
}
"#;

fn project() -> Test {
    Test::new()
        .file("agent.py", AGENT)
        .file("prompts/a.md", "Write a.\n")
        .file("data/c.txt", "one\n")
        .pipeline(PIPELINE)
}

/// The phases the agent was called for since the log was last taken, in order.
fn take_calls(test: &Test) -> Vec<String> {
    let path = test.path().join("calls.log");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let _ = std::fs::remove_file(&path);
    text.lines().map(str::to_owned).collect()
}

fn set(calls: &[String]) -> BTreeSet<&str> {
    calls.iter().map(String::as_str).collect()
}

/// `status --json`: the phases that will run, and the text of every reason, by phase.
fn will_run(test: &Test) -> (BTreeSet<String>, String) {
    let status = test.with_args(&["status", "--json"]).run().code(0).json();
    let mut phases = BTreeSet::new();
    let mut reasons = String::new();
    for phase in status["phases"].as_array().unwrap() {
        if phase["status"] == "will-run" {
            let name = phase["phase"].as_str().unwrap();
            phases.insert(name.to_owned());
            for reason in phase["reasons"].as_array().unwrap() {
                reasons.push_str(&format!("{name}: {}\n", reason["text"].as_str().unwrap()));
            }
        }
    }
    (phases, reasons)
}

fn names(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|&n| n.to_owned()).collect()
}

fn edit(test: &Test, path: &str, text: &str) {
    // A later modification time than the record's, whatever the clock's granularity.
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(test.path().join(path), text).unwrap();
}

#[test]
fn a_second_run_invokes_no_agent_and_says_every_phase_is_up_to_date() {
    let test = project();
    test.with_args(&["run", "--no-progress"]).run().code(0);
    assert_eq!(
        set(&take_calls(&test)),
        BTreeSet::from(["a", "b", "c", "d"])
    );
    let junit = test.path().join("junit.xml");
    let second = test
        .with_args(&["run", "--no-progress", "--junit", junit.to_str().unwrap()])
        .run()
        .code(0);
    assert!(take_calls(&test).is_empty(), "no agent runs again");
    assert!(
        second.stderr.contains("[a] up to date: passed in run"),
        "{}",
        second.stderr
    );
    assert!(
        second
            .stderr
            .contains("0 passed, 0 failed, 0 skipped, 4 up to date"),
        "{}",
        second.stderr
    );
    let report = std::fs::read_to_string(junit).unwrap();
    assert!(
        report.contains("<skipped message=\"passed in run"),
        "{report}"
    );
    let run = crate::common::run_phase(test.path(), "a");
    assert_eq!(run["status"], "up-to-date");
    let (phases, _) = will_run(&test);
    assert!(phases.is_empty(), "{phases:?}");
}

#[test]
fn a_run_after_a_failure_resumes_it_and_reruns_only_what_did_not_pass() {
    let test = project().file("fail-c", "");
    let first = test.with_args(&["run", "--no-progress"]).run().code(1);
    let calls = take_calls(&test);
    assert!(
        calls.contains(&"c".to_owned()),
        "{calls:?}\n{}",
        first.stderr
    );
    let first_passed: BTreeSet<String> = ["a", "b", "d"]
        .iter()
        .filter(|p| {
            test.path()
                .join(format!(".helixflow/passed/{p}.json"))
                .exists()
        })
        .map(|p| (*p).to_owned())
        .collect();
    std::fs::remove_file(test.path().join("fail-c")).unwrap();
    let (phases, reasons) = will_run(&test);
    let expected: BTreeSet<String> = names(&["a", "b", "c", "d"])
        .difference(&first_passed)
        .cloned()
        .collect();
    assert_eq!(phases, expected, "{reasons}");
    assert!(
        reasons.contains("c: failed in run") && reasons.contains("fresh budget of 1 attempt"),
        "{reasons}"
    );
    let second = test.with_args(&["run", "--no-progress"]).run().code(0);
    let calls = take_calls(&test);
    assert_eq!(
        set(&calls),
        expected.iter().map(String::as_str).collect(),
        "a passed phase's agent ran again\n{}",
        second.stderr
    );
    assert!(second.stderr.contains("resumes run"), "{}", second.stderr);
    let runs = test.with_args(&["runs"]).run().code(0);
    assert!(runs.stdout.contains(", resumes "), "{}", runs.stdout);
}

#[test]
fn each_edit_reruns_exactly_the_phases_it_affects_and_status_names_the_cause() {
    let test = project();
    test.with_args(&["run", "--no-progress"]).run().code(0);
    take_calls(&test);

    // The prompt file of `a`: `a` re-runs, and `b` after it.
    edit(&test, "prompts/a.md", "Write a, better.\n");
    let (phases, reasons) = will_run(&test);
    assert_eq!(phases, names(&["a", "b"]), "{reasons}");
    assert!(reasons.contains("a: prompt changed"), "{reasons}");
    assert!(reasons.contains("b: upstream re-runs: `a`"), "{reasons}");
    let status = test.with_args(&["status"]).run().code(0);
    assert!(
        status.stdout.contains("-Write a.") && status.stdout.contains("+Write a, better."),
        "{}",
        status.stdout
    );
    test.with_args(&["run", "--no-progress"]).run().code(0);
    assert_eq!(set(&take_calls(&test)), BTreeSet::from(["a", "b"]));

    // A declared input of `c`.
    edit(&test, "data/c.txt", "two\n");
    let (phases, reasons) = will_run(&test);
    assert_eq!(phases, names(&["c"]), "{reasons}");
    assert!(
        reasons.contains("c: input changed: modified `data/c.txt`"),
        "{reasons}"
    );
    test.with_args(&["run", "--no-progress"]).run().code(0);
    assert_eq!(take_calls(&test), ["c"]);

    // Someone edits the generated output of `b`.
    edit(&test, "out/b.txt", "edited by hand");
    let (phases, reasons) = will_run(&test);
    assert_eq!(phases, names(&["b"]), "{reasons}");
    assert!(
        reasons.contains("b: output changed since it passed: modified `out/b.txt`"),
        "{reasons}"
    );
    test.with_args(&["run", "--no-progress"]).run().code(0);
    assert_eq!(take_calls(&test), ["b"]);

    // A gate of `c`.
    let pipeline = PIPELINE.replace("test -s out/c.txt", "test -f out/c.txt");
    edit(&test, "pipeline.kdl", &pipeline);
    let (phases, reasons) = will_run(&test);
    assert_eq!(phases, names(&["c"]), "{reasons}");
    assert!(
        reasons.contains(
            "c: definition changed: gate `nonempty` command changed: `test -s out/c.txt` → `test -f out/c.txt`"
        ),
        "{reasons}"
    );
    test.with_args(&["run", "--no-progress"]).run().code(0);
    assert_eq!(take_calls(&test), ["c"]);

    // The shared template `d` is made from.
    let pipeline = pipeline.replace(
        "prompt \"Write {{ what }}\"",
        "prompt \"Now write {{ what }}\"",
    );
    edit(&test, "pipeline.kdl", &pipeline);
    let (phases, reasons) = will_run(&test);
    assert_eq!(phases, names(&["d"]), "{reasons}");
    assert!(
        reasons.contains("d: prompt changed (the phase is made from template `step`)"),
        "{reasons}"
    );
    let pipeline = pipeline.replace(
        "template \"step\" {\n    param \"what\"\n    agent \"bot\"",
        "template \"step\" {\n    param \"what\"\n    agent \"bot\"\n    timeout \"5m\"",
    );
    edit(&test, "pipeline.kdl", &pipeline);
    let (phases, reasons) = will_run(&test);
    assert_eq!(phases, names(&["d"]), "{reasons}");
    assert!(
        reasons.contains("(the phase is made from template `step`)"),
        "{reasons}"
    );
    test.with_args(&["run", "--no-progress"]).run().code(0);
    assert_eq!(take_calls(&test), ["d"]);

    // Nothing else changed: nothing runs.
    let (phases, reasons) = will_run(&test);
    assert!(phases.is_empty(), "{reasons}");
}

#[test]
fn a_touched_file_with_the_same_content_keeps_the_phase_up_to_date_and_is_restamped() {
    let test = project();
    test.with_args(&["run", "--no-progress"]).run().code(0);
    take_calls(&test);
    let record = || -> serde_json::Value {
        let text = std::fs::read_to_string(test.path().join(".helixflow/passed/c.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    };
    let before = record()["inputs"]["data/c.txt"].clone();
    edit(&test, "data/c.txt", "one\n");
    let (phases, reasons) = will_run(&test);
    assert!(phases.is_empty(), "{reasons}");
    // `status` changes nothing; `run` writes the new time into the record.
    assert_eq!(record()["inputs"]["data/c.txt"], before);
    test.with_args(&["run", "--no-progress"]).run().code(0);
    assert!(take_calls(&test).is_empty());
    let after = record()["inputs"]["data/c.txt"].clone();
    assert_eq!(after["hash"], before["hash"]);
    assert_ne!(after["mtime_ns"], before["mtime_ns"]);
}

#[test]
fn force_and_from_run_what_they_name() {
    let test = project();
    test.with_args(&["run", "--no-progress"]).run().code(0);
    take_calls(&test);
    test.with_args(&["run", "--no-progress", "--force"])
        .run()
        .code(0);
    assert_eq!(
        set(&take_calls(&test)),
        BTreeSet::from(["a", "b", "c", "d"])
    );
    // A bare `--force` before the file still means every phase of that file.
    test.with_args(&["run", "--no-progress", "--force", "pipeline.kdl"])
        .run()
        .code(0);
    assert_eq!(
        set(&take_calls(&test)),
        BTreeSet::from(["a", "b", "c", "d"])
    );
    let forced = test
        .with_args(&["run", "--no-progress", "--force=a"])
        .run()
        .code(0);
    assert_eq!(set(&take_calls(&test)), BTreeSet::from(["a", "b"]));
    assert!(
        forced.stderr.contains("[a] will run: forced")
            && forced
                .stderr
                .contains("[b] will run: upstream re-runs: `a`"),
        "{}",
        forced.stderr
    );
    test.with_args(&["run", "--no-progress", "--force", "c", "--force", "d"])
        .run()
        .code(0);
    assert_eq!(set(&take_calls(&test)), BTreeSet::from(["c", "d"]));
    test.with_args(&["run", "--no-progress", "--from", "a"])
        .run()
        .code(0);
    assert_eq!(set(&take_calls(&test)), BTreeSet::from(["a", "b"]));
    let unknown = test
        .with_args(&["run", "--no-progress", "--force=e"])
        .run()
        .code(2);
    assert!(
        unknown.stderr.contains("--force: no phase \"e\""),
        "{}",
        unknown.stderr
    );
    let dry = test
        .with_args(&["run", "--dry-run", "--from", "b"])
        .run()
        .code(0);
    assert!(
        dry.stdout.contains("up to date: passed in run")
            && dry.stdout.contains("will run: `--from b`"),
        "{}",
        dry.stdout
    );
    assert!(take_calls(&test).is_empty());
}

#[test]
fn a_failed_forced_rerun_is_not_called_a_pass_of_the_upstream() {
    let test = project();
    test.with_args(&["run", "--no-progress"]).run().code(0);
    std::fs::write(test.path().join("fail-a"), "").unwrap();
    test.with_args(&["run", "--no-progress", "--force=a"])
        .run()
        .code(1);
    take_calls(&test);
    // `a` failed: its record is gone, and it runs next because the failed run is resumed; `b`
    // runs because `a` does, not because `a` "passed again".
    let (phases, reasons) = will_run(&test);
    assert_eq!(phases, names(&["a", "b"]), "{reasons}");
    assert_eq!(
        reasons
            .lines()
            .filter(|line| line.starts_with("b: "))
            .collect::<Vec<_>>(),
        ["b: upstream re-runs: `a`"],
        "{reasons}"
    );
    // Run alone, `b` says what is true of `a`: it has no record of a pass.
    let alone = test
        .with_args(&["run", "--dry-run", "--only", "b"])
        .run()
        .code(0);
    assert!(
        alone
            .stdout
            .contains("will run: upstream has no record of a pass: `a`\n"),
        "{}",
        alone.stdout
    );
    // Once `a` passed again, `b` runs for what changed (its input, `a`'s output), and no
    // reason speaks of `a` as not passed.
    std::fs::remove_file(test.path().join("fail-a")).unwrap();
    test.with_args(&["run", "--no-progress", "--only", "a"])
        .run()
        .code(0);
    let (phases, reasons) = will_run(&test);
    assert_eq!(phases, names(&["b"]), "{reasons}");
    assert_eq!(reasons, "b: input changed: modified `out/a.txt`\n");
}

#[test]
fn always_run_phases_are_never_up_to_date() {
    let pipeline = PIPELINE.replace(
        "phase \"c\" {\n    agent \"bot\"",
        "phase \"c\" {\n    always-run #true\n    agent \"bot\"",
    );
    let test = project().pipeline(&pipeline);
    test.with_args(&["run", "--no-progress"]).run().code(0);
    take_calls(&test);
    test.with_args(&["run", "--no-progress"]).run().code(0);
    assert_eq!(take_calls(&test), ["c"]);
}

/// The records on the disk, by phase.
fn recorded(workspace: &Path) -> BTreeSet<String> {
    ["a", "b", "c", "d"]
        .iter()
        .filter(|p| {
            workspace
                .join(format!(".helixflow/passed/{p}.json"))
                .exists()
        })
        .map(|p| (*p).to_owned())
        .collect()
}

/// Every phase any run's journal shows as passed.
fn journalled_passes(workspace: &Path) -> BTreeSet<String> {
    let mut passed = BTreeSet::new();
    for run in crate::common::run_folders(&workspace.join(".helixflow/runs")) {
        let journal = std::fs::read_to_string(run.join("events.jsonl")).unwrap_or_default();
        for line in journal.lines() {
            let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if event["event"] == "phase-finished" && event["status"] == "passed" {
                passed.insert(event["phase"].as_str().unwrap().to_owned());
            }
        }
    }
    passed
}

#[test]
fn sigkill_at_any_moment_leaves_records_only_of_phases_that_passed() {
    // A chain, one phase at a time, each agent taking a little while: kills land before, during
    // and between phases.
    let pipeline = PIPELINE
        .replace("phase \"c\" {", "phase \"c\" {\n    depends-on \"b\"")
        .replace(
            "phase \"d\" use=\"step\" what=\"d\" {",
            "phase \"d\" use=\"step\" what=\"d\" {\n    depends-on \"c\"",
        );
    for delay_ms in [0u64, 60, 150, 250, 400, 550, 700, 900] {
        let test = project().pipeline(&pipeline);
        let mut child = Command::new(env!("CARGO_BIN_EXE_helixflow"))
            .args(["run", "--no-progress"])
            .current_dir(test.path())
            .env("SLEEP", "0.1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap();
        child.wait().unwrap();
        // The watchdog stops the agent the killed helixflow leaves behind.
        std::thread::sleep(Duration::from_millis(300));
        let records = recorded(test.path());
        // A phase the journal says passed has its record: it is written before the scheduler
        // hears of the pass.
        let passed = journalled_passes(test.path());
        assert!(
            passed.is_subset(&records),
            "killed after {delay_ms} ms: passes {passed:?} but records {records:?}"
        );
        // A record is complete and belongs to work that is there: its output as recorded.
        for phase in &records {
            let text = std::fs::read_to_string(
                test.path().join(format!(".helixflow/passed/{phase}.json")),
            )
            .unwrap();
            let record: serde_json::Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("a partial record of {phase} ({e}): {text}"));
            let output = format!("out/{phase}.txt");
            let size = std::fs::metadata(test.path().join(&output))
                .unwrap_or_else(|e| panic!("{phase} has a record but no {output}: {e}"))
                .len();
            assert_eq!(record["outputs"][&output]["size"], size, "{text}");
        }
        take_calls(&test);
        test.with_args(&["run", "--no-progress"]).run().code(0);
        let rerun = set(&take_calls(&test))
            .into_iter()
            .map(str::to_owned)
            .collect::<BTreeSet<_>>();
        let expected: BTreeSet<String> = names(&["a", "b", "c", "d"])
            .difference(&records)
            .cloned()
            .collect();
        assert_eq!(
            rerun, expected,
            "killed after {delay_ms} ms with records {records:?}: the next run re-ran {rerun:?}"
        );
    }
}

#[test]
fn a_same_size_rewrite_with_its_modification_time_put_back_is_seen() {
    let test = project();
    test.with_args(&["run", "--no-progress"]).run().code(0);
    take_calls(&test);
    let output = test.path().join("out/c.txt");
    let was = std::fs::read(&output).unwrap();
    let modified = std::fs::metadata(&output).unwrap().modified().unwrap();
    // Another writer: the same size, other bytes, the modification time put back.
    let other: Vec<u8> = was.iter().map(u8::to_ascii_uppercase).collect();
    assert_ne!(other, was);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&output)
        .unwrap();
    std::io::Write::write_all(&mut &file, &other).unwrap();
    file.set_modified(modified).unwrap();
    drop(file);
    assert_eq!(
        std::fs::metadata(&output).unwrap().modified().unwrap(),
        modified
    );
    let (phases, reasons) = will_run(&test);
    assert_eq!(phases, names(&["c"]), "{reasons}");
    assert!(
        reasons.contains("c: output changed since it passed: modified `out/c.txt`"),
        "{reasons}"
    );
}

/// Phase `b`'s agent rewrites `a`'s output and edits `a`'s record to match it, every stamp
/// included (the hash it needs is given to it).
const FORGER: &str = r#"
import json, os
open("a.txt", "w").write("evil\n")
st = os.stat("a.txt")
path = ".helixflow/passed/a.json"
record = json.load(open(path))
record["outputs"]["a.txt"] = {
    "size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns,
    "inode": st.st_ino, "read_ns": st.st_ctime_ns + 10**10, "hash": os.environ["FORGED_HASH"],
}
json.dump(record, open(path + ".new", "w"))
os.replace(path + ".new", path)
"#;

/// A pipeline whose phase `b` runs the forger: as an agent, or as a `run` step.
fn forged(b: &str) -> Test {
    Test::new()
        .file("forge.py", FORGER)
        .env("FORGED_HASH", blake3::hash(b"evil\n").to_hex().as_str())
        .pipeline(&format!(
            r#"pipeline "p"
agent "forger" {{
    command "python3" "forge.py"
}}
phase "a" {{
    run "echo fine > a.txt"
    outputs {{ file "a.txt" }}
    retries 0
}}
phase "b" {{
    {b}
    depends-on "a"
    retries 0
}}
"#
        ))
}

#[test]
fn a_record_an_agent_writes_is_removed_and_fails_its_attempt() {
    let test = forged("agent \"forger\"\n    prompt \"Forge.\"");
    test.with_args(&["run", "--no-progress"]).run().code(1);
    let gates = std::fs::read_to_string(
        crate::common::latest_run(test.path()).join("phases/b/attempt-1/gates.json"),
    )
    .unwrap();
    assert!(
        gates.contains(
            "`passed/a.json` in the state folder was written by something other than helixflow"
        ),
        "{gates}"
    );
    assert!(!test.path().join(".helixflow/passed/a.json").exists());
    let (phases, reasons) = will_run(&test);
    assert_eq!(phases, names(&["a", "b"]), "{reasons}");
}

#[test]
fn a_record_a_run_step_writes_does_not_outlive_the_run() {
    let test = forged("run \"python3 forge.py\"");
    let run = test.with_args(&["run", "--no-progress"]).run().code(0);
    assert!(
        run.stderr.contains(
            "`passed/a.json` in the state folder was written by something other than helixflow"
        ),
        "{}",
        run.stderr
    );
    assert!(!test.path().join(".helixflow/passed/a.json").exists());
    let (phases, reasons) = will_run(&test);
    assert_eq!(phases, names(&["a", "b"]), "{reasons}");
}

/// Six independent `run` steps, one at a time: each notes its call, sleeps `SLEEP` seconds and
/// writes its output.
fn run_steps() -> Test {
    let mut pipeline = String::from("pipeline \"p\" {\n    max-parallel 1\n}\n");
    for n in 1..=6 {
        pipeline.push_str(&format!(
            "phase \"s{n}\" {{\n    run \"echo s{n} >> calls.log; sleep ${{SLEEP:-0}}; echo {n} > out/s{n}.txt\"\n    outputs {{ file \"out/s{n}.txt\" }}\n}}\n"
        ));
    }
    Test::new().file("out/.keep", "").pipeline(&pipeline)
}

/// The records of the run steps, by phase, with the run each names.
fn step_records(test: &Test) -> std::collections::BTreeMap<String, String> {
    (1..=6)
        .filter_map(|n| {
            let text =
                std::fs::read_to_string(test.path().join(format!(".helixflow/passed/s{n}.json")))
                    .ok()?;
            let record: serde_json::Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("a partial record of s{n} ({e}): {text}"));
            Some((
                format!("s{n}"),
                record["run-id"].as_str().unwrap().to_owned(),
            ))
        })
        .collect()
}

#[test]
fn sigkill_during_forced_run_steps_leaves_records_only_of_passes() {
    // Records of quick steps are removed ahead of their start, several in one sync: a kill at any
    // moment still leaves only records of passes, each the one of its last pass.
    for delay_ms in [0u64, 80, 200, 350, 500] {
        let test = run_steps();
        test.with_args(&["run", "--no-progress"]).run().code(0);
        let first = step_records(&test);
        assert_eq!(first.len(), 6);
        take_calls(&test);
        let mut child = Command::new(env!("CARGO_BIN_EXE_helixflow"))
            .args(["run", "--no-progress", "--force"])
            .current_dir(test.path())
            .env("SLEEP", "0.1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap();
        child.wait().unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let started: BTreeSet<String> = set(&take_calls(&test))
            .into_iter()
            .map(str::to_owned)
            .collect();
        let passed = journalled_passes(test.path());
        let records = step_records(&test);
        for (phase, run) in &records {
            // A phase that started in the killed run has a record only when it passed there.
            if started.contains(phase) {
                assert!(
                    passed.contains(phase) && *run != first[phase],
                    "killed after {delay_ms} ms: {phase} started, did not pass, has a record of {run}"
                );
            } else {
                assert_eq!(run, &first[phase], "killed after {delay_ms} ms");
            }
        }
        // The next run runs exactly the phases without a record.
        test.with_args(&["run", "--no-progress"]).run().code(0);
        let rerun: BTreeSet<String> = set(&take_calls(&test))
            .into_iter()
            .map(str::to_owned)
            .collect();
        let missing: BTreeSet<String> = (1..=6)
            .map(|n| format!("s{n}"))
            .filter(|p| !records.contains_key(p))
            .collect();
        assert_eq!(rerun, missing, "killed after {delay_ms} ms");
    }
}

#[test]
fn an_interrupted_forced_run_keeps_the_records_of_the_steps_it_did_not_start() {
    let test = run_steps();
    test.with_args(&["run", "--no-progress"]).run().code(0);
    let first = step_records(&test);
    take_calls(&test);
    let child = Command::new(env!("CARGO_BIN_EXE_helixflow"))
        .args(["run", "--no-progress", "--force"])
        .current_dir(test.path())
        .env("SLEEP", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The first step is under way, the others waiting, their records set aside. (Its line is
    // waited for, not the file: the shell creates the file before it writes the line.)
    let log = test.path().join("calls.log");
    while std::fs::read_to_string(&log).map_or(true, |text| !text.ends_with('\n')) {
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: sending SIGINT to our own child process.
    unsafe { libc::kill(i32::try_from(child.id()).unwrap(), libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    let started = take_calls(&test);
    assert_eq!(started, ["s1"]);
    let records = step_records(&test);
    let kept: Vec<&String> = records.keys().collect();
    assert_eq!(kept, ["s2", "s3", "s4", "s5", "s6"]);
    for (phase, run) in &records {
        assert_eq!(run, &first[phase]);
    }
    test.with_args(&["run", "--no-progress"]).run().code(0);
    assert_eq!(take_calls(&test), ["s1"]);
}
