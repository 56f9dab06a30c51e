//! The reporters, fed a realistic event stream: two phases in parallel (one retried then passing,
//! one failing), a phase skipped because of the failure, an escalation and a warning.

use std::collections::HashMap;
use std::io::BufWriter;
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use helixflow::{
    AttemptOutcome, ChildExit, Event, GateReport, GateStatus, PhaseStatus, RunStatus, Stamped,
};
use helixflow::{EventSink, Sinks};
use helixflow::{Junit, Ndjson, Plain, Progress, Summary};
use indicatif::{ProgressDrawTarget, TermLike};

/// The run's start: 2025-03-01T10:00:00Z.
const START_SECS: u64 = 1_740_823_200;

fn at(elapsed_ms: u64, event: Event) -> Stamped {
    let when = UNIX_EPOCH + Duration::from_secs(START_SECS) + Duration::from_millis(elapsed_ms);
    Stamped {
        time: humantime::format_rfc3339_millis(when).to_string(),
        elapsed_ms,
        event,
    }
}

fn attempt_started(phase: &str, attempt: u32, max_attempts: u32) -> Event {
    Event::AttemptStarted {
        phase: phase.to_owned(),
        attempt,
        max_attempts,
        tier: None,
    }
}

fn step(phase: &str, attempt: u32, step: &str) -> Event {
    Event::Step {
        phase: phase.to_owned(),
        attempt,
        step: step.into(),
    }
}

fn exited(phase: &str, attempt: u32, code: i32, duration_ms: u64) -> Event {
    Event::ChildExited {
        phase: phase.to_owned(),
        attempt,
        exit: ChildExit {
            code: Some(code),
            signal: None,
            timeout: None,
            cancelled: false,
            duration_ms,
            stdout_bytes: 18_204,
            stderr_bytes: 311,
        },
    }
}

fn gate(
    phase: &str,
    attempt: u32,
    name: &str,
    kind: &str,
    status: GateStatus,
    duration_ms: u64,
    details: &[&str],
) -> Event {
    Event::GateFinished {
        phase: phase.to_owned(),
        attempt,
        report: GateReport {
            name: name.to_owned(),
            kind: kind.into(),
            status,
            duration_ms,
            details: details.iter().map(|d| (*d).to_owned()).collect(),
        },
    }
}

fn attempt_finished(
    phase: &str,
    attempt: u32,
    outcome: AttemptOutcome,
    duration_ms: u64,
    failed_gates: &[&str],
    feedback: Option<&str>,
) -> Event {
    Event::AttemptFinished {
        phase: phase.to_owned(),
        attempt,
        outcome,
        duration_ms,
        failed_gates: failed_gates.iter().map(|g| (*g).to_owned()).collect(),
        feedback: feedback.map(str::to_owned),
        error: None,
        usage: None,
        class: None,
        nothing_to_change: false,
    }
}

fn phase_finished(
    phase: &str,
    status: PhaseStatus,
    attempts: u32,
    duration_ms: u64,
    reason: Option<&str>,
) -> Event {
    Event::PhaseFinished {
        phase: phase.to_owned(),
        status,
        attempts,
        duration_ms,
        reason: reason.map(str::to_owned),
    }
}

/// The gate details of the lexer's last attempt: markup characters, a colour sequence, a bell and
/// a NUL, as command output really contains them.
const LEXER_SYNTAX_DETAILS: [&str; 2] = [
    "src/helix/adr/lexer.py:3:9: invalid syntax\n    if x < 1 && y > \"2\" or 'z':\n            ^",
    "pytest said: \u{1b}[31mFAILED\u{1b}[0m bell\u{7} nul\u{0} end",
];

/// `parser` (3 attempts allowed) and `lexer` (2 allowed) run side by side; `parser` fails its
/// first attempt on two gates and passes its second; `lexer`'s agent fails, then its syntax gate
/// fails on the last attempt, so it escalates and `docs`, which depends on it, is skipped.
fn run_events() -> Vec<Stamped> {
    vec![
        at(
            0,
            Event::RunStarted {
                run_id: "20250301-100000-7f3a".to_owned(),
                pipeline: "adr-042-payments".to_owned(),
                phases: vec!["parser".to_owned(), "lexer".to_owned(), "docs".to_owned()],
                max_parallel: 2,
                resumes: None,
            },
        ),
        at(10, attempt_started("parser", 1, 3)),
        at(12, attempt_started("lexer", 1, 2)),
        at(15, step("parser", 1, "agent")),
        at(16, step("lexer", 1, "agent")),
        at(8_000, exited("parser", 1, 0, 7_985)),
        at(8_001, step("parser", 1, "gate outputs")),
        at(
            8_005,
            gate(
                "parser",
                1,
                "outputs",
                "outputs",
                GateStatus::Failed,
                4,
                &[
                    "src/helix/adr/parser.py is missing\n  found output/src/helix/adr/parser.py; written to the wrong folder?",
                ],
            ),
        ),
        at(8_006, step("parser", 1, "gate syntax")),
        at(
            8_130,
            gate(
                "parser",
                1,
                "syntax",
                "syntax",
                GateStatus::Passed,
                124,
                &[],
            ),
        ),
        at(8_131, step("parser", 1, "gate tests")),
        at(
            11_530,
            gate(
                "parser",
                1,
                "tests",
                "command",
                GateStatus::Failed,
                3_399,
                &[
                    "`pytest -q tests/adr` exited with code 1; its last lines:\n  E   assert parse(\"<adr>\") == {'id': 42}\n  1 failed, 4 passed in 0.21s",
                ],
            ),
        ),
        at(
            11_540,
            attempt_finished(
                "parser",
                1,
                AttemptOutcome::Failed,
                11_530,
                &["outputs", "tests"],
                Some(
                    "Attempt 1 of 3 failed.\n- outputs: src/helix/adr/parser.py is missing (found output/src/helix/adr/parser.py)\n- tests: assert parse(\"<adr>\") == {'id': 42}\n",
                ),
            ),
        ),
        at(
            11_541,
            Event::RetryScheduled {
                phase: "parser".to_owned(),
                next_attempt: 2,
                backoff_ms: 2_000,
            },
        ),
        at(
            11_542,
            Event::Warning {
                message: "retry budget: 5 of 6 retries left".to_owned(),
            },
        ),
        at(13_541, attempt_started("parser", 2, 3)),
        at(13_542, step("parser", 2, "agent")),
        at(14_000, exited("lexer", 1, 1, 13_988)),
        at(
            14_001,
            attempt_finished(
                "lexer",
                1,
                AttemptOutcome::Failed,
                13_989,
                &[],
                Some("The agent exited with code 1."),
            ),
        ),
        at(
            14_002,
            Event::RetryScheduled {
                phase: "lexer".to_owned(),
                next_attempt: 2,
                backoff_ms: 0,
            },
        ),
        at(14_003, attempt_started("lexer", 2, 2)),
        at(14_004, step("lexer", 2, "agent")),
        at(20_000, exited("parser", 2, 0, 6_458)),
        at(
            20_010,
            gate(
                "parser",
                2,
                "outputs",
                "outputs",
                GateStatus::Passed,
                10,
                &[],
            ),
        ),
        at(
            20_140,
            gate(
                "parser",
                2,
                "syntax",
                "syntax",
                GateStatus::Passed,
                130,
                &[],
            ),
        ),
        at(
            23_641,
            gate(
                "parser",
                2,
                "tests",
                "command",
                GateStatus::Passed,
                3_501,
                &[],
            ),
        ),
        at(
            23_650,
            attempt_finished("parser", 2, AttemptOutcome::Passed, 10_109, &[], None),
        ),
        at(
            23_651,
            phase_finished("parser", PhaseStatus::Passed, 2, 23_641, None),
        ),
        at(40_000, exited("lexer", 2, 0, 25_996)),
        at(
            40_050,
            gate(
                "lexer",
                2,
                "outputs",
                "outputs",
                GateStatus::Passed,
                50,
                &[],
            ),
        ),
        at(
            40_170,
            gate(
                "lexer",
                2,
                "syntax",
                "syntax",
                GateStatus::Failed,
                120,
                &LEXER_SYNTAX_DETAILS,
            ),
        ),
        at(
            40_171,
            gate("lexer", 2, "tests", "command", GateStatus::Skipped, 0, &[]),
        ),
        at(
            40_180,
            attempt_finished(
                "lexer",
                2,
                AttemptOutcome::Failed,
                26_177,
                &["syntax"],
                Some(
                    "This was the last attempt.\n- syntax: src/helix/adr/lexer.py:3:9: invalid syntax",
                ),
            ),
        ),
        at(
            40_181,
            phase_finished(
                "lexer",
                PhaseStatus::Failed,
                2,
                40_169,
                Some("no retries left"),
            ),
        ),
        at(
            40_500,
            Event::Escalated {
                phase: "lexer".to_owned(),
                code: Some(0),
            },
        ),
        at(
            40_501,
            phase_finished(
                "docs",
                PhaseStatus::Skipped,
                0,
                0,
                Some("dependency lexer failed"),
            ),
        ),
        at(
            42_100,
            Event::RunFinished {
                status: RunStatus::Failed,
                duration_ms: 42_100,
                exit_code: 1,
            },
        ),
    ]
}

/// Feeds every event and finishes, as the engine's caller does.
fn feed(reporter: &mut dyn EventSink, events: &[Stamped]) {
    for event in events {
        reporter
            .event(event)
            .expect("the reporter accepts the event");
    }
    reporter.finish().expect("the reporter finishes");
}

#[test]
fn plain_writes_one_stable_line_per_notable_event() {
    let mut plain = Plain::new(Vec::new());
    feed(&mut plain, &run_events());
    let text = String::from_utf8(plain.into_inner()).unwrap();
    assert!(!text.contains('\u{1b}'), "no escape sequences: {text}");
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "no control characters but newlines: {text:?}"
    );
    insta::assert_snapshot!("plain", text);
}

#[test]
fn summary_is_an_aligned_table_in_run_order_with_totals() {
    let mut summary = Summary::new(Vec::new());
    feed(&mut summary, &run_events());
    let text = String::from_utf8(summary.into_inner()).unwrap();
    // Written on `RunFinished`, and not again on finish.
    assert_eq!(text.matches("failing gates").count(), 1);
    assert!(text.ends_with("1 passed, 1 failed, 1 skipped in 42.1s\n"));
    let rows: Vec<&str> = text.lines().collect();
    let status_column = rows[0].find("status").unwrap();
    for row in &rows[1..4] {
        assert!(
            row[status_column..].starts_with(['p', 'f', 's']),
            "`{row}` is aligned under `status`"
        );
    }
    insta::assert_snapshot!("summary", text);
}

#[test]
fn summary_of_a_run_that_ended_abnormally_still_accounts_for_every_phase() {
    let events = run_events();
    // The run stops (helixflow was killed) while `lexer` retries and before `docs` started: how
    // long the unfinished phases and the run lasted is not known.
    let cut = events
        .iter()
        .position(|e| matches!(e.event, Event::AttemptStarted { ref phase, attempt: 2, .. } if phase == "lexer"))
        .unwrap();
    let mut summary = Summary::new(Vec::new());
    feed(&mut summary, &events[..=cut]);
    let text = String::from_utf8(summary.into_inner()).unwrap();
    assert_eq!(
        text,
        "\
phase   status       attempts  duration  cost  tokens  failing gates
parser  unfinished   2/3       ?         -     -
lexer   unfinished   2/2       ?         -     -
docs    not started  0         -         -     -
0 passed, 0 failed, 0 skipped, 2 unfinished, 1 not started; the run did not finish, its length is unknown
"
    );
}

#[test]
fn ndjson_writes_every_event_as_one_json_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.ndjson");
    let events = run_events();
    let mut ndjson = Ndjson::new(BufWriter::new(std::fs::File::create(&path).unwrap()));
    // Flushed after each line: a reader following the file sees an event as soon as it is written.
    ndjson.event(&events[0]).unwrap();
    let first = std::fs::read_to_string(&path).unwrap();
    assert_eq!(first.lines().count(), 1);
    assert!(first.ends_with('\n'));
    for event in &events[1..] {
        ndjson.event(event).unwrap();
    }
    ndjson.finish().unwrap();
    drop(ndjson);

    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), events.len());
    for (line, event) in lines.iter().zip(&events) {
        let value: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("line is not JSON ({e}): {line}"));
        let object = value.as_object().expect("each line is an object");
        assert!(object["event"].is_string(), "`event` in {line}");
        assert_eq!(
            object["time"],
            serde_json::json!(event.time),
            "`time` in {line}"
        );
        assert_eq!(object["elapsed_ms"], serde_json::json!(event.elapsed_ms));
    }
    let kinds: Vec<String> = lines
        .iter()
        .map(|line| {
            serde_json::from_str::<serde_json::Value>(line).unwrap()["event"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(kinds.first().map(String::as_str), Some("run-started"));
    assert_eq!(kinds.last().map(String::as_str), Some("run-finished"));
    assert_eq!(kinds.iter().filter(|k| *k == "phase-finished").count(), 3);
    assert_eq!(lines[0].split('T').next(), Some(r#"{"time":"2025-03-01"#));

    // The stream is for machines: details arrive byte for byte, control characters included.
    let syntax: serde_json::Value = lines
        .iter()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .find(|v| {
            v["event"] == "gate-finished"
                && v["report"]["name"] == "syntax"
                && v["phase"] == "lexer"
        })
        .unwrap();
    assert_eq!(
        syntax["report"]["details"],
        serde_json::json!(LEXER_SYNTAX_DETAILS)
    );
}

#[test]
fn junit_has_one_suite_per_phase_and_one_case_per_gate_of_the_last_attempt() {
    let dir = tempfile::tempdir().unwrap();
    // The folder does not exist yet: CI configurations name report paths before anything made them.
    let path = dir.path().join("reports/junit.xml");
    let mut junit = Junit::new(&path);
    feed(&mut junit, &run_events());
    let xml = std::fs::read_to_string(&path).unwrap();
    let elements = parse_xml(&xml).unwrap_or_else(|e| panic!("{e}\n{xml}"));

    let suites: Vec<&Element> = elements.iter().filter(|e| e.name == "testsuite").collect();
    let names: Vec<&str> = suites.iter().map(|s| s.attrs["name"].as_str()).collect();
    assert_eq!(names, ["parser", "lexer", "docs"]);
    let root = &elements[0];
    assert_eq!(root.name, "testsuites");
    assert_eq!(root.attrs["tests"], "7");
    assert_eq!(root.attrs["failures"], "1");
    assert_eq!(root.attrs["skipped"], "2");
    assert_eq!(root.attrs["time"], "42.100");

    let cases = |phase: &str| -> Vec<String> {
        elements
            .iter()
            .filter(|e| e.name == "testcase" && e.attrs["classname"] == phase)
            .map(|e| e.attrs["name"].clone())
            .collect()
    };
    // Only the last attempt counts: parser's failed first attempt leaves no failure behind.
    assert_eq!(cases("parser"), ["outputs", "syntax", "tests"]);
    assert_eq!(suites[0].attrs["failures"], "0");
    assert_eq!(cases("lexer"), ["outputs", "syntax", "tests"]);
    assert_eq!(cases("docs"), ["phase"]);
    let skipped: Vec<&str> = elements
        .iter()
        .filter(|e| e.name == "skipped")
        .map(|e| e.attrs["message"].as_str())
        .collect();
    assert_eq!(skipped, ["not run", "dependency lexer failed"]);

    let failure = elements.iter().find(|e| e.name == "failure").unwrap();
    assert_eq!(failure.attrs["type"], "syntax");
    assert_eq!(
        failure.attrs["message"],
        "src/helix/adr/lexer.py:3:9: invalid syntax"
    );
    // The body carries every detail and the attempt's feedback, with markup escaped.
    assert!(
        failure
            .text
            .contains("    if x < 1 && y > \"2\" or 'z':\n            ^")
    );
    assert!(
        failure
            .text
            .contains("feedback:\nThis was the last attempt.")
    );
    assert!(xml.contains("if x &lt; 1 &amp;&amp; y &gt; &quot;2&quot; or &apos;z&apos;:"));
    // The colour sequence is gone and the bell and NUL are shown, not written raw.
    assert!(
        failure
            .text
            .contains("pytest said: FAILED bell\u{2407} nul\u{2400} end")
    );

    insta::assert_snapshot!("junit", xml);
}

#[test]
fn junit_escapes_markup_and_control_characters_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("junit.xml");
    let phase = "a<b>&\"c\"'d'\u{1}";
    let gate_name = "tests \"unit\" & <more>";
    let details = "line one\ttabbed\r\nline two \u{8}\u{b}\u{c}\u{1f}\u{1b}]0;title\u{7} ]]> end";
    let events = vec![
        at(
            0,
            Event::RunStarted {
                run_id: "r".to_owned(),
                pipeline: "p&<'\"".to_owned(),
                phases: vec![phase.to_owned()],
                max_parallel: 1,
                resumes: None,
            },
        ),
        at(1, attempt_started(phase, 1, 1)),
        at(
            2,
            Event::ChildExited {
                phase: phase.to_owned(),
                attempt: 1,
                exit: ChildExit {
                    code: None,
                    signal: Some(9),
                    timeout: None,
                    cancelled: false,
                    duration_ms: 1,
                    stdout_bytes: 0,
                    stderr_bytes: 0,
                },
            },
        ),
        at(
            3,
            gate(
                phase,
                1,
                gate_name,
                "command",
                GateStatus::Failed,
                1,
                &[details],
            ),
        ),
        at(
            4,
            attempt_finished(
                phase,
                1,
                AttemptOutcome::Failed,
                3,
                &[gate_name],
                Some("feedback with <tags> & \u{0}"),
            ),
        ),
        at(
            5,
            phase_finished(
                phase,
                PhaseStatus::Failed,
                1,
                4,
                Some("reason \"quoted\"\nsecond line"),
            ),
        ),
        at(
            6,
            Event::RunFinished {
                status: RunStatus::Failed,
                duration_ms: 6,
                exit_code: 1,
            },
        ),
    ];
    let mut junit = Junit::new(&path);
    feed(&mut junit, &events);
    let xml = std::fs::read_to_string(&path).unwrap();
    let elements = parse_xml(&xml).unwrap_or_else(|e| panic!("{e}\n{xml}"));

    // Names survive the round trip (the SOH shown as its control picture).
    assert_eq!(elements[0].attrs["name"], "p&<'\"");
    let suite = elements.iter().find(|e| e.name == "testsuite").unwrap();
    assert_eq!(suite.attrs["name"], "a<b>&\"c\"'d'\u{2401}");
    let reason = elements
        .iter()
        .find(|e| e.name == "property" && e.attrs["name"] == "reason")
        .unwrap();
    // A newline in an attribute is kept as a character reference, not normalized to a space.
    assert_eq!(reason.attrs["value"], "reason \"quoted\"\nsecond line");
    let cases: Vec<&Element> = elements.iter().filter(|e| e.name == "testcase").collect();
    assert_eq!(cases[0].attrs["name"], "agent");
    assert_eq!(cases[1].attrs["name"], gate_name);
    let failures: Vec<&Element> = elements.iter().filter(|e| e.name == "failure").collect();
    assert_eq!(
        failures[0].attrs["message"],
        "the agent was killed by signal 9 (SIGKILL)"
    );
    assert_eq!(
        failures[1].text,
        "line one\ttabbed\nline two \u{2408}\u{240b}\u{240c}\u{241f} ]]> end\n\nfeedback:\nfeedback with <tags> & \u{2400}"
    );
    assert!(xml.contains("]]&gt; end"));
    assert!(
        !xml.chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t'),
        "no raw control characters: {xml:?}"
    );
}

/// A run of one `run` step whose command is not found.
fn run_step_events() -> Vec<Stamped> {
    vec![
        at(
            0,
            Event::RunStarted {
                run_id: "20250301-100000".to_owned(),
                pipeline: "p".to_owned(),
                phases: vec!["fmt".to_owned()],
                max_parallel: 1,
                resumes: None,
            },
        ),
        at(1, attempt_started("fmt", 1, 1)),
        at(1, step("fmt", 1, helixflow::RUN_STEP)),
        at(5, exited("fmt", 1, 127, 4)),
        at(5, step("fmt", 1, "verify")),
        at(
            6,
            attempt_finished("fmt", 1, AttemptOutcome::Failed, 5, &[], Some("fb")),
        ),
        at(
            6,
            phase_finished("fmt", PhaseStatus::Failed, 1, 5, Some("no retries left")),
        ),
        at(
            7,
            Event::RunFinished {
                status: RunStatus::Failed,
                duration_ms: 7,
                exit_code: 1,
            },
        ),
    ]
}

#[test]
fn a_failed_run_step_is_named_as_the_run_command_not_as_an_agent() {
    let events = run_step_events();
    let mut plain = Plain::new(Vec::new());
    feed(&mut plain, &events);
    let text = String::from_utf8(plain.into_inner()).unwrap();
    assert!(
        text.contains("[fmt] attempt 1/1 failed in 5ms: run command exited with code 127"),
        "{text}"
    );
    assert!(!text.contains("agent"), "{text}");

    let mut summary = Summary::new(Vec::new());
    feed(&mut summary, &events);
    let text = String::from_utf8(summary.into_inner()).unwrap();
    let row = text.lines().find(|l| l.starts_with("fmt")).unwrap();
    assert!(row.trim_end().ends_with(" run"), "{text}");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("junit.xml");
    let mut junit = Junit::new(&path);
    feed(&mut junit, &events);
    let xml = std::fs::read_to_string(&path).unwrap();
    let elements = parse_xml(&xml).unwrap_or_else(|e| panic!("{e}\n{xml}"));
    let case = elements.iter().find(|e| e.name == "testcase").unwrap();
    assert_eq!(case.attrs["name"], "run");
    let failure = elements.iter().find(|e| e.name == "failure").unwrap();
    assert_eq!(
        failure.attrs["message"],
        "the run command exited with code 127"
    );
}

#[test]
fn junit_of_a_run_that_ended_abnormally_marks_unfinished_phases() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("junit.xml");
    let events = run_events();
    let mut junit = Junit::new(&path);
    // Cut right after parser's first attempt failed its gates.
    for event in &events[..13] {
        junit.event(event).unwrap();
    }
    junit.finish().unwrap();
    let xml = std::fs::read_to_string(&path).unwrap();
    let elements = parse_xml(&xml).unwrap_or_else(|e| panic!("{e}\n{xml}"));
    let messages: Vec<(&str, &str)> = elements
        .iter()
        .zip(elements.iter().skip(1))
        .filter(|(_, next)| next.name == "skipped" || next.name == "failure")
        .map(|(case, next)| {
            (
                case.attrs["classname"].as_str(),
                next.attrs["message"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        messages,
        [
            ("parser", "src/helix/adr/parser.py is missing"),
            (
                "parser",
                "`pytest -q tests/adr` exited with code 1; its last lines:"
            ),
            ("lexer", "the run ended before this phase finished"),
            ("docs", "the run ended before this phase started"),
        ]
    );
}

#[test]
fn junit_reports_a_file_it_cannot_write_as_an_error() {
    let dir = tempfile::tempdir().unwrap();
    // A file where the report's folder should be.
    std::fs::write(dir.path().join("reports"), "not a folder").unwrap();
    let mut junit = Junit::new(dir.path().join("reports/junit.xml"));
    for event in &run_events() {
        junit.event(event).unwrap();
    }
    assert!(junit.finish().is_err());
    assert!(junit.name().contains("reports/junit.xml"));
}

/// A reporter whose events fail from the second one on, counting the calls it gets.
struct Flaky {
    calls: Arc<Mutex<(usize, usize)>>,
}

impl EventSink for Flaky {
    fn event(&mut self, _: &Stamped) -> std::io::Result<()> {
        let mut calls = self.calls.lock().unwrap();
        calls.0 += 1;
        if calls.0 >= 2 {
            return Err(std::io::Error::other("disk full"));
        }
        Ok(())
    }

    fn finish(&mut self) -> std::io::Result<()> {
        self.calls.lock().unwrap().1 += 1;
        Ok(())
    }
}

#[test]
fn reporters_skip_a_failing_reporter_and_keep_feeding_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.ndjson");
    let calls = Arc::new(Mutex::new((0, 0)));
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let mut reporters = Sinks::new(vec![
        Box::new(Flaky {
            calls: Arc::clone(&calls),
        }),
        // Writing to /dev/full fails with "no space left on device", like a real full disk.
        Box::new(Plain::new(full)),
        Box::new(Ndjson::new(std::fs::File::create(&path).unwrap())),
    ]);
    let events = run_events();
    for event in &events {
        reporters.event(event);
    }
    reporters.finish();
    reporters.finish();
    assert_eq!(reporters.failed(), 2);
    // The flaky reporter saw its failing event and nothing after it, and was not finished.
    assert_eq!(*calls.lock().unwrap(), (2, 0));
    let written = std::fs::read_to_string(&path).unwrap();
    assert_eq!(written.lines().count(), events.len());
}

#[test]
fn progress_tracks_running_phases_and_counts_finished_ones() {
    let events = run_events();
    let mut progress = Progress::with_draw_target(0, ProgressDrawTarget::hidden());
    let mut next = 0;
    // Feeds the events up to `until` (elapsed milliseconds) that were not fed yet.
    let mut feed_until = |progress: &mut Progress, until: u64| {
        while next < events.len() && events[next].elapsed_ms <= until {
            progress.event(&events[next]).unwrap();
            next += 1;
        }
    };
    feed_until(&mut progress, 0);
    assert_eq!(progress.phases_total(), 3);
    assert!(progress.running().is_empty());

    feed_until(&mut progress, 8_001);
    assert_eq!(progress.running(), ["parser", "lexer"]);
    assert_eq!(
        progress.status("parser").unwrap(),
        "attempt 1/3  gate outputs"
    );
    assert_eq!(progress.status("lexer").unwrap(), "attempt 1/2  agent");

    feed_until(&mut progress, 11_541);
    assert_eq!(
        progress.status("parser").unwrap(),
        "retrying as attempt 2/3 in 2.0s"
    );

    feed_until(&mut progress, 23_651);
    assert_eq!(progress.running(), ["lexer"]);
    assert_eq!(progress.phases_done(), 1);
    assert_eq!(progress.status("lexer").unwrap(), "attempt 2/2  agent");

    feed_until(&mut progress, 42_100);
    assert!(progress.running().is_empty());
    assert_eq!(progress.phases_done(), 3);
    assert!(progress.is_finished());
    progress.finish().unwrap();
}

#[test]
fn progress_leaves_only_the_finished_lines_on_the_terminal() {
    let screen = Screen::default();
    let mut progress =
        Progress::with_draw_target(3, ProgressDrawTarget::term_like(Box::new(screen.clone())));
    feed(&mut progress, &run_events());
    drop(progress);
    let lines = screen.lines();
    assert!(
        lines
            .iter()
            .all(|l| !l.contains("phases") && !l.contains("running")),
        "no bar is left: {lines:#?}"
    );
    insta::assert_snapshot!("progress-screen", lines.join("\n"));
}

#[test]
fn progress_clears_its_bars_when_dropped_mid_run() {
    let screen = Screen::default();
    let mut progress =
        Progress::with_draw_target(3, ProgressDrawTarget::term_like(Box::new(screen.clone())));
    let events = run_events();
    for event in &events[..7] {
        progress.event(event).unwrap();
    }
    assert_eq!(progress.running(), ["parser", "lexer"]);
    drop(progress);
    assert_eq!(screen.lines(), Vec::<String>::new());
}

/// A terminal that keeps its screen's text, so a test sees what a person would see at the end.
#[derive(Debug, Clone, Default)]
struct Screen {
    state: Arc<Mutex<ScreenState>>,
}

#[derive(Debug, Default)]
struct ScreenState {
    rows: Vec<Vec<char>>,
    row: usize,
    col: usize,
}

impl Screen {
    /// The non-empty lines on screen, trailing blanks trimmed.
    fn lines(&self) -> Vec<String> {
        let state = self.state.lock().unwrap();
        let mut lines: Vec<String> = state
            .rows
            .iter()
            .map(|row| row.iter().collect::<String>().trim_end().to_owned())
            .collect();
        while lines.last().is_some_and(String::is_empty) {
            lines.pop();
        }
        lines
    }
}

impl ScreenState {
    /// Writes like a VT100 with autowrap: a line exactly as wide as the screen leaves the cursor
    /// past the last column, and only the next character wraps (indicatif relies on this).
    fn put(&mut self, text: &str) {
        for c in text.chars() {
            match c {
                '\n' => {
                    self.row += 1;
                    self.col = 0;
                }
                '\r' => self.col = 0,
                c => {
                    if self.col >= SCREEN_WIDTH {
                        self.row += 1;
                        self.col = 0;
                    }
                    while self.rows.len() <= self.row {
                        self.rows.push(Vec::new());
                    }
                    let row = &mut self.rows[self.row];
                    while row.len() <= self.col {
                        row.push(' ');
                    }
                    row[self.col] = c;
                    self.col += 1;
                }
            }
        }
    }

    /// Cursor movement ends a pending wrap.
    fn move_to(&mut self, row: usize, col: usize) {
        self.row = row;
        self.col = col.min(SCREEN_WIDTH - 1);
    }
}

/// Columns of the [`Screen`].
const SCREEN_WIDTH: usize = 120;

impl TermLike for Screen {
    fn width(&self) -> u16 {
        SCREEN_WIDTH as u16
    }

    fn height(&self) -> u16 {
        40
    }

    fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
        let mut state = self.state.lock().unwrap();
        let (row, col) = (state.row.saturating_sub(n), state.col);
        state.move_to(row, col);
        Ok(())
    }

    fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
        let mut state = self.state.lock().unwrap();
        let (row, col) = (state.row + n, state.col);
        state.move_to(row, col);
        Ok(())
    }

    fn move_cursor_right(&self, n: usize) -> std::io::Result<()> {
        let mut state = self.state.lock().unwrap();
        let (row, col) = (state.row, state.col + n);
        state.move_to(row, col);
        Ok(())
    }

    fn move_cursor_left(&self, n: usize) -> std::io::Result<()> {
        let mut state = self.state.lock().unwrap();
        let (row, col) = (state.row, state.col.saturating_sub(n));
        state.move_to(row, col);
        Ok(())
    }

    fn write_line(&self, s: &str) -> std::io::Result<()> {
        let mut state = self.state.lock().unwrap();
        state.put(s);
        state.put("\n");
        Ok(())
    }

    fn write_str(&self, s: &str) -> std::io::Result<()> {
        self.state.lock().unwrap().put(s);
        Ok(())
    }

    fn clear_line(&self) -> std::io::Result<()> {
        let mut state = self.state.lock().unwrap();
        let row = state.row;
        if let Some(line) = state.rows.get_mut(row) {
            line.clear();
        }
        state.col = 0;
        Ok(())
    }

    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }
}

/// An element of a parsed XML document.
#[derive(Debug)]
struct Element {
    name: String,
    attrs: HashMap<String, String>,
    /// Its direct text, unescaped.
    text: String,
}

/// A strict little XML 1.0 reader, enough to prove the report is well-formed: one root, matching
/// tags, quoted and unique attributes, only the predefined entities and character references,
/// no `<` or `&` unescaped, and only characters XML 1.0 allows. Returns the elements in document
/// order.
fn parse_xml(xml: &str) -> Result<Vec<Element>, String> {
    let rest = xml
        .strip_prefix("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n")
        .ok_or("missing XML declaration")?;
    let mut elements: Vec<Element> = Vec::new();
    let mut open: Vec<(String, usize)> = Vec::new();
    let mut roots = 0;
    let mut i = 0;
    let bytes = rest.as_bytes();
    while i < rest.len() {
        if bytes[i] == b'<' {
            let end = rest[i..].find('>').ok_or("unterminated tag")? + i;
            let tag = &rest[i + 1..end];
            i = end + 1;
            if let Some(name) = tag.strip_prefix('/') {
                let (expected, _) = open.pop().ok_or(format!("stray </{name}>"))?;
                if expected != name {
                    return Err(format!("</{name}> closes <{expected}>"));
                }
                continue;
            }
            let (tag, closed) = match tag.strip_suffix('/') {
                Some(tag) => (tag, true),
                None => (tag, false),
            };
            let name_end = tag.find([' ', '\n', '\t']).unwrap_or(tag.len());
            let name = &tag[..name_end];
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                return Err(format!("bad element name in <{tag}>"));
            }
            if open.is_empty() {
                roots += 1;
            }
            let attrs = parse_attributes(&tag[name_end..])?;
            elements.push(Element {
                name: name.to_owned(),
                attrs,
                text: String::new(),
            });
            if !closed {
                open.push((name.to_owned(), elements.len() - 1));
            }
        } else {
            let end = rest[i..].find('<').map_or(rest.len(), |n| n + i);
            let text = unescape(&rest[i..end])?;
            match open.last() {
                Some(&(_, index)) => elements[index].text.push_str(&text),
                None if text.trim().is_empty() => {}
                None => return Err(format!("text outside the root: {text:?}")),
            }
            i = end;
        }
    }
    if let Some((name, _)) = open.pop() {
        return Err(format!("<{name}> is never closed"));
    }
    if roots != 1 {
        return Err(format!("{roots} root elements"));
    }
    // Whitespace between child elements is layout, not content.
    for element in &mut elements {
        if element.text.trim().is_empty() {
            element.text.clear();
        }
    }
    Ok(elements)
}

fn parse_attributes(mut text: &str) -> Result<HashMap<String, String>, String> {
    let mut attrs = HashMap::new();
    loop {
        text = text.trim_start();
        if text.is_empty() {
            return Ok(attrs);
        }
        let eq = text
            .find('=')
            .ok_or(format!("attribute without value: {text}"))?;
        let name = &text[..eq];
        let value = text[eq + 1..]
            .strip_prefix('"')
            .ok_or(format!("unquoted attribute {name}"))?;
        let close = value
            .find('"')
            .ok_or(format!("unterminated attribute {name}"))?;
        let raw = &value[..close];
        if raw.contains('<') {
            return Err(format!("`<` in attribute {name}"));
        }
        if attrs.insert(name.to_owned(), unescape(raw)?).is_some() {
            return Err(format!("attribute {name} twice"));
        }
        text = &value[close + 1..];
        if !text.is_empty() && !text.starts_with([' ', '\n', '\t']) {
            return Err(format!("no space after attribute {name}"));
        }
    }
}

/// Resolves entity and character references; fails on anything XML 1.0 does not allow.
fn unescape(text: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let semi = rest[amp..].find(';').ok_or("`&` without `;`")? + amp;
        let name = &rest[amp + 1..semi];
        let c = match name {
            "amp" => '&',
            "lt" => '<',
            "gt" => '>',
            "quot" => '"',
            "apos" => '\'',
            _ => {
                let code = if let Some(hex) = name.strip_prefix("#x") {
                    u32::from_str_radix(hex, 16)
                } else if let Some(dec) = name.strip_prefix('#') {
                    dec.parse()
                } else {
                    return Err(format!("unknown entity &{name};"));
                };
                code.ok()
                    .and_then(char::from_u32)
                    .ok_or(format!("bad character reference &{name};"))?
            }
        };
        out.push(c);
        rest = &rest[semi + 1..];
    }
    out.push_str(rest);
    if let Some(bad) = out.chars().find(|&c| !xml_char(c)) {
        return Err(format!("character {bad:?} is not allowed in XML 1.0"));
    }
    Ok(out)
}

/// XML 1.0's `Char` production.
fn xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
}

#[test]
fn the_xml_check_rejects_what_it_must() {
    let declaration = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    let ok = format!("{declaration}<a x=\"1 &amp; 2\"><b/>t &lt; u</a>\n");
    assert!(parse_xml(&ok).is_ok());
    for bad in [
        "<a><b></a></b>",
        "<a>",
        "<a/><b/>",
        "<a x=\"1\" x=\"2\"/>",
        "<a x=1/>",
        "<a>&nbsp;</a>",
        "<a>a & b</a>",
        "<a>\u{1}</a>",
        "<a>&#1;</a>",
        "<a x=\"<\"/>",
    ] {
        assert!(
            parse_xml(&format!("{declaration}{bad}")).is_err(),
            "{bad} is rejected"
        );
    }
}
