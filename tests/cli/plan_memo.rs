//! The remembered plan (`.helixflow/cache/plan`): a `status` or `run` of a workspace where
//! nothing changed since every phase was found up to date answers from it, and any change to what
//! the plan looked at (a file, a record, the pipeline) or a forced run makes the plan again.
//!
//! A plan is remembered only once everything it looked at has settled (2 seconds, the racy
//! margin), so each test lets that time pass, for all its workspaces together.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::common::Test;

const PIPELINE: &str = r#"pipeline "p"
phase "a" {
    run "cat in/a.txt > out/a.txt; echo a >> calls.log"
    inputs { file "in/a.txt" }
    outputs { file "out/a.txt" }
}
phase "b" {
    run "cat out/a.txt in/b.txt > out/b.txt; echo b >> calls.log"
    depends-on "a"
    inputs { file "out/a.txt"; file "in/b.txt"; file "in/optional.txt" }
    outputs { file "out/b.txt" }
}
phase "c" {
    run "cat out/b.txt > out/c.txt; echo c >> calls.log"
    depends-on "b"
    outputs { file "out/c.txt" }
}
"#;

const MEMO: &str = ".helixflow/cache/plan";

fn project() -> Test {
    let test = Test::new()
        .file("in/a.txt", "one\n")
        .file("in/b.txt", "two\n")
        .dir("out")
        .pipeline(PIPELINE);
    test.with_args(&["run", "--no-progress"]).run().code(0);
    let _ = std::fs::remove_file(test.path().join("calls.log"));
    test
}

/// Lets everything the workspaces' plans look at settle, then has `status` remember each plan.
/// Twice: files stamped within the racy margin of being written are read again by the next run,
/// which writes their records anew.
fn settle(tests: &[&Test]) {
    std::thread::sleep(Duration::from_millis(2300));
    for test in tests {
        test.with_args(&["run", "--no-progress"]).run().code(0);
        assert!(!test.path().join("calls.log").exists());
    }
    std::thread::sleep(Duration::from_millis(2300));
    for test in tests {
        let status = plans(test);
        assert!(status.values().all(Option::is_some), "{status:?}");
        assert!(test.path().join(MEMO).is_file(), "no plan remembered");
    }
}

/// `status --json`: each phase with the run it is up to date from, or `None` when it will run.
fn plans(test: &Test) -> BTreeMap<String, Option<String>> {
    let status = test.with_args(&["status", "--json"]).run().code(0).json();
    status["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["phase"].as_str().unwrap().to_owned(),
                p["up-to-date"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

/// Rewrites the run the remembered plan says every phase passed in (the same length, so the memo
/// still reads): a plan that shows it came from the memo. Returns the new name.
fn mark(test: &Test) -> String {
    let path = test.path().join(MEMO);
    let run = plans(test)["a"].clone().expect("a is up to date");
    let marked = format!("M{}", &run[1..]);
    let bytes = std::fs::read(&path).unwrap();
    let text = bytes_replace(&bytes, run.as_bytes(), marked.as_bytes());
    assert_ne!(text, bytes, "the memo names the run");
    std::fs::write(&path, text).unwrap();
    marked
}

fn bytes_replace(haystack: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < haystack.len() {
        if haystack[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    out
}

fn will_run(plans: &BTreeMap<String, Option<String>>) -> Vec<&str> {
    plans
        .iter()
        .filter(|(_, run)| run.is_none())
        .map(|(phase, _)| phase.as_str())
        .collect()
}

/// Rewrites a file with other bytes of the same size and puts its modification time back: only
/// its change time (and content) tell.
fn rewrite_in_place(path: &Path) {
    let was = std::fs::read(path).unwrap();
    let modified = std::fs::metadata(path).unwrap().modified().unwrap();
    let other: Vec<u8> = was.iter().map(u8::to_ascii_uppercase).collect();
    assert_ne!(other, was);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .unwrap();
    std::io::Write::write_all(&mut &file, &other).unwrap();
    file.set_modified(modified).unwrap();
}

type Change = fn(&Test);

#[test]
fn a_remembered_plan_answers_only_while_everything_it_looked_at_is_the_same() {
    let changes: [(&str, Change, &[&str]); 7] = [
        ("nothing", |_| {}, &[]),
        (
            "an input rewritten in place, its modification time put back",
            |t| rewrite_in_place(&t.path().join("in/a.txt")),
            &["a", "b", "c"],
        ),
        (
            "an output deleted",
            |t| std::fs::remove_file(t.path().join("out/c.txt")).unwrap(),
            &["c"],
        ),
        (
            "a declared input that was missing created",
            |t| std::fs::write(t.path().join("in/optional.txt"), "new\n").unwrap(),
            &["b", "c"],
        ),
        (
            "the pipeline edited",
            |t| {
                let text = std::fs::read_to_string(t.path().join("pipeline.kdl")).unwrap();
                let text = text.replace("cat out/b.txt > out/c.txt", "cp out/b.txt out/c.txt");
                std::fs::write(t.path().join("pipeline.kdl"), text).unwrap();
            },
            &["c"],
        ),
        (
            "a record removed",
            |t| std::fs::remove_file(t.path().join(".helixflow/passed/b.json")).unwrap(),
            &["b", "c"],
        ),
        (
            "a record replaced by a copy of itself",
            |t| {
                let path = t.path().join(".helixflow/passed/a.json");
                let text = std::fs::read(&path).unwrap();
                std::fs::remove_file(&path).unwrap();
                std::fs::write(&path, text).unwrap();
            },
            &[],
        ),
    ];
    let tests: Vec<Test> = changes.iter().map(|_| project()).collect();
    settle(&tests.iter().collect::<Vec<_>>());
    for ((what, change, expected), test) in changes.iter().zip(&tests) {
        let marked = mark(test);
        change(test);
        let plans = plans(test);
        assert_eq!(will_run(&plans), *expected, "{what}: {plans:?}");
        let remembered = plans
            .values()
            .any(|run| run.as_deref() == Some(marked.as_str()));
        // Only an unchanged workspace is answered from the memo.
        assert_eq!(remembered, *what == "nothing", "{what}: {plans:?}");
        // And a run does what the plan says.
        test.with_args(&["run", "--no-progress"]).run().code(0);
        let calls = std::fs::read_to_string(test.path().join("calls.log")).unwrap_or_default();
        assert_eq!(
            calls.lines().collect::<Vec<_>>(),
            *expected,
            "{what}: {calls}"
        );
    }
}

#[test]
fn a_touched_file_makes_the_plan_again_and_a_forced_run_never_answers_from_memory() {
    let touched = project();
    let forced = project();
    settle(&[&touched, &forced]);

    // The same content under a new modification time: up to date, found by reading it; the memo
    // is dropped (the record takes the new time at the next run).
    let marked = mark(&touched);
    let path = touched.path().join("in/b.txt");
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(std::time::SystemTime::now())
        .unwrap();
    let plans_now = plans(&touched);
    assert!(will_run(&plans_now).is_empty(), "{plans_now:?}");
    assert!(
        !plans_now
            .values()
            .any(|r| r.as_deref() == Some(marked.as_str())),
        "{plans_now:?}"
    );
    assert!(!touched.path().join(MEMO).exists(), "a stale memo kept");
    touched.with_args(&["run", "--no-progress"]).run().code(0);
    assert!(!touched.path().join("calls.log").exists());

    mark(&forced);
    forced
        .with_args(&["run", "--no-progress", "--force", "b"])
        .run()
        .code(0);
    assert_eq!(forced.read("calls.log"), "b\nc\n");
}

#[test]
fn globs_are_never_remembered_and_a_broken_memo_is_no_memo() {
    let globbed = Test::new()
        .file("in/a.txt", "one\n")
        .dir("out")
        .pipeline(
            "pipeline \"p\"\nphase \"a\" {\n    run \"cat in/*.txt > out/a.txt\"\n    inputs { glob \"in/*.txt\" }\n    outputs { file \"out/a.txt\" }\n}\n",
        );
    globbed.with_args(&["run", "--no-progress"]).run().code(0);
    let broken = project();
    settle(&[&broken]);
    std::thread::sleep(Duration::from_millis(100));
    assert!(will_run(&plans(&globbed)).is_empty());
    assert!(!globbed.path().join(MEMO).exists());
    // A file matching the glob appears: nothing the plan looked up by name changed.
    std::fs::write(globbed.path().join("in/new.txt"), "new\n").unwrap();
    assert_eq!(will_run(&plans(&globbed)), ["a"]);

    let memo = broken.path().join(MEMO);
    let bytes = std::fs::read(&memo).unwrap();
    for cut in [0, 8, 40, bytes.len() / 2, bytes.len() - 1] {
        std::fs::write(&memo, &bytes[..cut]).unwrap();
        let plans = plans(&broken);
        assert!(will_run(&plans).is_empty(), "cut at {cut}: {plans:?}");
    }
    std::fs::write(&memo, [bytes.as_slice(), b"trailing"].concat()).unwrap();
    assert!(will_run(&plans(&broken)).is_empty());
    // Each made the plan again and wrote the memo anew.
    assert_eq!(std::fs::read(&memo).unwrap(), bytes);
}

#[test]
fn a_status_after_a_run_is_remembered_once_its_files_settle_though_their_stamps_are_read_again() {
    let test = project();
    let record = || std::fs::read(test.path().join(".helixflow/passed/c.json")).unwrap();
    let before = record();
    // The outputs were stamped as soon as they were written: the next plan reads them again.
    std::thread::sleep(Duration::from_millis(2300));
    let now = plans(&test);
    assert!(will_run(&now).is_empty(), "{now:?}");
    assert!(
        test.path().join(MEMO).is_file(),
        "a status remembers its plan"
    );
    let marked = mark(&test);
    assert!(
        plans(&test)
            .values()
            .all(|run| run.as_deref() == Some(marked.as_str()))
    );
    // A run answered from it leaves the records as they were.
    test.with_args(&["run", "--no-progress"]).run().code(0);
    assert!(!test.path().join("calls.log").exists());
    assert_eq!(record(), before);
    // A change: the run plans in full, runs what changed and restamps the rest.
    std::fs::write(test.path().join("in/b.txt"), "three\n").unwrap();
    test.with_args(&["run", "--no-progress"]).run().code(0);
    assert_eq!(test.read("calls.log"), "b\nc\n");
    assert_ne!(record(), before);
}
