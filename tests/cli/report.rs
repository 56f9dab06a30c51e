//! The HTML report, without a browser (tests/browser/ loads it in one): what every run writes in
//! its folder and `helixflow report` writes for any run, from the journal; markup from agents kept
//! as text; the live page while the run goes on; the size of a large run's page.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{self, Test, latest_run};

/// A copy of a fixture folder of tests/fixtures/report/ as a test's workspace.
fn fixture(name: &str) -> Test {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/report")
        .join(name);
    let mut test = Test::new();
    for entry in std::fs::read_dir(&root).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        test = test.file(&name, &std::fs::read_to_string(&path).unwrap());
    }
    test
}

fn report_of(workspace: &Path) -> String {
    std::fs::read_to_string(latest_run(workspace).join("report.html")).expect("report.html")
}

/// The page with its own script and style taken out: what is left came from the run.
fn without_own_code(html: &str) -> String {
    let mut rest = html.to_owned();
    for (open, close) in [("<script nonce=", "</script>"), ("<style>", "</style>")] {
        let start = rest.find(open).expect("the page's own code");
        let end = rest[start..].find(close).unwrap() + start + close.len();
        rest.replace_range(start..end, "");
    }
    rest
}

#[test]
fn every_run_writes_its_report_and_markup_from_the_run_stays_text() {
    let test = fixture("showcase");
    let out = test.with_args(&["run", "--no-progress"]).run().code(1);
    let run = latest_run(test.path());
    let id = run.file_name().unwrap().to_string_lossy().into_owned();
    let last = out.stderr.lines().last().unwrap();
    assert_eq!(
        last,
        format!(
            "run {id} — journal in .helixflow/runs/{id}, report .helixflow/runs/{id}/report.html"
        )
    );
    // `latest` leads to it.
    assert_eq!(
        std::fs::read_link(test.path().join(".helixflow/runs/latest")).unwrap(),
        PathBuf::from(&id)
    );
    let html = report_of(test.path());
    assert!(html.starts_with("<!DOCTYPE html>"), "{}", &html[..100]);
    assert!(
        !html.contains("data-live=\""),
        "the last page does not reload"
    );
    assert!(html.contains("default-src 'none'"), "no request is allowed");
    let text = without_own_code(&html);
    for hostile in ["<script", "</div><script", "<b>no such", "<img"] {
        assert!(
            !text.contains(hostile),
            "{hostile} reached the page as markup"
        );
    }
    for escaped in [
        // A gate's output, in its details and in the feedback.
        "&lt;/div&gt;&lt;script&gt;alert(&#39;gate&#39;)&lt;/script&gt;",
        // The verifier's errors.
        "&lt;/div&gt;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;",
        // The agent's standard error, quoted in the feedback.
        "&lt;b&gt;no such file&lt;/b&gt;",
        // A file name.
        "release/x&lt;/div&gt;&lt;script&gt;alert(1)&lt;/script&gt;.md",
    ] {
        assert!(text.contains(escaped), "{escaped} is not in the page");
    }
    // Every phase, its attempts, the totals.
    for phase in [
        "plan", "lexer", "parser", "docs", "bench", "migrate", "cleanup", "release",
    ] {
        assert!(
            html.contains(&format!("<span class=\"pname\">{phase}</span>")),
            "{phase}"
        );
    }
    assert_eq!(html.matches("<details class=\"attempt ").count(), 12);
    assert_eq!(html.matches("<a class=\"bar ").count(), 12);
    assert!(html.contains("$0.11 and the unknown cost of 1 attempt"));
    assert!(html.contains("5 of the retry-budget of 8"));
    assert!(html.contains("rejected the work"));
    // The diff of a file one phase made and a later one changed, saved for later reports.
    assert!(
        html.contains("<span class=\"del\">-2. Parser.</span>"),
        "no diff"
    );
    let saved = run.join("phases/docs/report-files.json");
    assert!(saved.is_file());

    // `helixflow report` makes the same page from the journal, anywhere.
    let written = test
        .with_args(&["report", "latest", "-o", "elsewhere.html"])
        .run()
        .code(0);
    assert_eq!(
        written.stdout,
        format!("report of run {id}: elsewhere.html\n")
    );
    let again = test.read("elsewhere.html");
    assert_eq!(
        again.matches("<details class=\"attempt ").count(),
        12,
        "the same attempts"
    );
    assert!(again.contains("<span class=\"del\">-2. Parser.</span>"));
    // Its links lead into the run folder, from where it is.
    assert!(
        again.contains(&format!(
            "href=\".helixflow/runs/{id}/phases/parser/attempt-1/feedback.md\""
        )),
        "links into the run folder"
    );
    let stdout = test.with_args(&["report", "-o", "-"]).run().code(0);
    assert!(stdout.stdout.starts_with("<!DOCTYPE html>"));
    assert!(
        stdout.stdout.contains("href=\"file:///"),
        "absolute links on stdout"
    );
}

#[test]
fn a_report_outside_the_run_withholds_file_contents_it_cannot_redact() {
    let test = Test::new()
        .pipeline(
            r#"pipeline "p" {
    secret "TOKEN"
}
phase "a" {
    run "echo token=$TOKEN > notes.txt"
}
"#,
        )
        .env("TOKEN", "hunter2-secret");
    test.with_args(&["run", "--no-progress", "--bundles"])
        .run()
        .code(0);
    let html = report_of(test.path());
    assert!(
        html.contains("token=[REDACTED:TOKEN]"),
        "shown redacted in the run's report"
    );
    assert!(!html.contains("hunter2-secret"));
    // Later, without the run's saved views, the secret's value is unknown here: no contents.
    std::fs::remove_file(latest_run(test.path()).join("phases/a/report-files.json")).unwrap();
    test.with_args(&["report", "-o", "later.html"])
        .env_remove("TOKEN")
        .run()
        .code(0);
    let later = test.read("later.html");
    assert!(later.contains("notes.txt"));
    assert!(later.contains("contents not shown: a secret"));
    assert!(!later.contains("hunter2-secret"));
}

#[test]
fn no_report_writes_none_and_report_finds_runs_by_id_or_latest() {
    let test = Test::new().pipeline("pipeline \"p\"\nphase \"a\" {\n    run \"true\"\n}\n");
    let out = test
        .with_args(&["run", "--no-progress", "--no-report"])
        .run()
        .code(0);
    assert!(out.stderr.lines().last().unwrap().ends_with(&format!(
        "journal in .helixflow/runs/{}",
        latest_run(test.path()).file_name().unwrap().to_string_lossy()
    )));
    assert!(!latest_run(test.path()).join("report.html").exists());
    let id = latest_run(test.path())
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    test.with_args(&["report", &id]).run().code(0);
    assert!(latest_run(test.path()).join("report.html").is_file());
    test.with_args(&["show", "latest"]).run().code(0);
    let missing = test.with_args(&["report", "20000101-000000"]).run().code(2);
    assert!(
        missing.stderr.contains("no run \"20000101-000000\""),
        "{}",
        missing.stderr
    );
    // `latest` is not a run of its own.
    let runs = test.with_args(&["runs"]).run().code(0);
    assert_eq!(runs.stdout.lines().count(), 2, "{}", runs.stdout);
}

#[test]
fn the_report_is_live_while_the_run_goes_on() {
    let test = Test::new().pipeline(
        "pipeline \"p\"\nphase \"quick\" {\n    run \"true\"\n}\nphase \"slow\" {\n    depends-on \"quick\"\n    run \"sleep 4\"\n}\n",
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_helixflow"))
        .args(["run", "--no-progress"])
        .current_dir(test.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let report = test.path().join(".helixflow/runs/latest/report.html");
    let started = Instant::now();
    let live = loop {
        let html = std::fs::read_to_string(&report).unwrap_or_default();
        if html.contains("id=\"p1-a1\"") {
            break html;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "no live page");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(live.contains("data-live=\"3\""), "the live page reloads");
    assert!(live.contains("▶ running"), "the slow phase runs");
    assert!(live.contains("This run is still going"));
    assert!(child.wait().unwrap().success());
    assert!(
        started.elapsed() < Duration::from_secs(4) + Duration::from_secs(30),
        "sanity"
    );
    let last = std::fs::read_to_string(&report).unwrap();
    assert!(!last.contains("data-live=\""));
    assert!(last.contains(
        "<span class=\"badge s-passed\">✓ passed</span> <span class=\"pname\">slow</span>"
    ));
    // Nothing is left half written.
    let leftovers: Vec<_> = common::run_folders(&test.path().join(".helixflow/runs"))
        .into_iter()
        .flat_map(|run| std::fs::read_dir(run).unwrap())
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_report_of_fifty_phases_with_retries_and_long_output_stays_small() {
    // Each phase fails twice, its gate printing 100 KB, then passes: 150 attempts.
    let mut pipeline = String::from("pipeline \"big\" {\n    max-parallel 8\n}\n");
    for n in 0..50 {
        pipeline.push_str(&format!(
            "phase \"p{n}\" {{\n    run \"true\"\n    retries 2\n    gates {{\n        command \"python3 ../gate.py p{n}\" name=\"long\"\n    }}\n}}\n"
        ));
    }
    let gate = r#"
import os, sys
marker = os.path.join("..", "marks", sys.argv[1])
count = int(open(marker).read()) if os.path.exists(marker) else 0
open(marker, "w").write(str(count + 1))
if count < 2:
    print(("x" * 99 + "\n") * 1000)
    sys.exit(1)
"#;
    let test = Test::new()
        .file("gate.py", gate)
        .dir("marks")
        .file("work/pipeline.kdl", &pipeline)
        .current_dir("work");
    test.with_args(&["run", "--no-progress"]).run().code(0);
    let run = common::latest_run(&test.path().join("work"));
    let size = std::fs::metadata(run.join("report.html")).unwrap().len();
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert_eq!(html.matches("<details class=\"attempt ").count(), 150);
    assert!(size < 2 << 20, "{size} bytes");
    assert!(html.contains("more not shown"), "long texts are cut");
}

/// A page with its nonce and the time it was written taken out.
fn without_nonce_and_time(html: &str) -> String {
    let mut out = html.to_owned();
    for (start, end) in [
        ("'nonce-", "'"),
        ("nonce=\"", "\""),
        (" at ", " from the journal"),
    ] {
        let mut from = 0;
        while let Some(at) = out[from..].find(start) {
            let begin = from + at + start.len();
            let Some(len) = out[begin..].find(end) else {
                break;
            };
            out.replace_range(begin..begin + len, "…");
            from = begin + "…".len();
        }
    }
    out
}

#[test]
fn the_last_live_page_of_a_run_read_ahead_is_the_report_of_it() {
    // Long enough for the live report to read ahead what ended several times: 40 phases, four at
    // once, each a few milliseconds; some fail a gate once, some make a file (a bundle).
    let mut pipeline = String::from("pipeline \"p\" {\n    max-parallel 4\n}\n");
    for n in 0..40 {
        let depends = if n >= 4 {
            format!("    depends-on \"p{}\"\n", n - 4)
        } else {
            String::new()
        };
        let work = if n % 3 == 0 {
            format!("    run \"sleep 0.02; echo {n} > out/p{n}.txt\"\n    scope \"out/**\"\n")
        } else {
            "    run \"sleep 0.02\"\n".to_owned()
        };
        let gate = if n % 5 == 0 {
            format!(
                "    retries 1\n    gates {{\n        command \"test -e marks/p{n} || {{ touch marks/p{n}; exit 1; }}\" name=\"once\"\n    }}\n"
            )
        } else {
            String::new()
        };
        pipeline.push_str(&format!("phase \"p{n}\" {{\n{depends}{work}{gate}}}\n"));
    }
    let test = Test::new()
        .pipeline(&pipeline)
        .dir("out")
        .dir("marks")
        .file(".gitignore", "marks/\n");
    test.with_args(&["run", "--no-progress"]).run().code(0);
    let run = common::latest_run(test.path());
    let live = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert_eq!(live.matches("<details class=\"attempt ").count(), 48);
    test.with_args(&["report", "-o", "again.html"])
        .run()
        .code(0);
    let again = std::fs::read_to_string(test.path().join("again.html")).unwrap();
    assert_eq!(
        without_nonce_and_time(&live),
        without_nonce_and_time(&again),
        "the run's own last page differs from the report of the run"
    );
}
