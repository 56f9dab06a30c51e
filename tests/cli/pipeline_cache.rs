//! The compiled pipeline kept in the state folder: used while the pipeline file and everything
//! its compilation read are unchanged, and compiled again as soon as one of them changes, the
//! cache is corrupt, or the helixflow binary is another.

use crate::common::Test;

const PIPELINE: &str = r#"pipeline "p"
import "lib.kdl"
phase "a" {
    description "the first"
    agent "bot"
    prompt file="prompt.md"
    scope "docs"
}
"#;

const LIB: &str = r#"agent "bot" {
    command "sh" "-c" "true"
}
"#;

fn project() -> Test {
    let test = Test::new()
        .file("lib.kdl", LIB)
        .file("prompt.md", "Do it.\n")
        .pipeline(PIPELINE);
    std::fs::create_dir_all(test.path().join(".helixflow")).unwrap();
    test
}

/// The one cache entry of the test's pipeline.
fn entry(test: &Test) -> std::path::PathBuf {
    // The remembered plan (`plan`) and a run's `pipeline.json` (`run-pipeline-…`) are not
    // compiled pipelines.
    let entries = cached(test, "pipeline-");
    assert_eq!(entries.len(), 1, "{entries:?}");
    entries[0].clone()
}

/// The files of the test's cache folder whose names start with `prefix`, sorted.
fn cached(test: &Test, prefix: &str) -> Vec<std::path::PathBuf> {
    let dir = test.path().join(".helixflow/cache");
    let mut found: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .collect();
    found.sort();
    found
}

/// What `compile` says the first phase's description is.
fn description(test: &Test) -> String {
    let out = test.with_args(&["compile"]).run().code(0);
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    json["phases"][0]["description"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Rewrites the cached pipeline's description, keeping everything the entry is checked by: a
/// command that shows the new text used the cache.
fn tamper(test: &Test) {
    let path = entry(test);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("the first") || text.contains("from the cache"));
    std::fs::write(&path, text.replace("the first", "from the cache")).unwrap();
}

/// A change to what a compilation read.
type Change = Box<dyn Fn(&Test)>;

#[test]
fn an_unchanged_pipeline_comes_from_the_cache_and_any_change_compiles_it_again() {
    let test = project();
    assert_eq!(description(&test), "the first");
    tamper(&test);
    assert_eq!(description(&test), "from the cache");

    // Each thing the compilation read, changed, is a miss; the entry is then written again.
    let changes: [(&str, Change); 5] = [
        (
            "the pipeline file",
            Box::new(|t: &Test| {
                std::fs::write(t.path().join("pipeline.kdl"), format!("{PIPELINE}\n")).unwrap();
            }),
        ),
        (
            "an import",
            Box::new(|t: &Test| {
                std::fs::write(t.path().join("lib.kdl"), format!("{LIB}// changed\n")).unwrap();
            }),
        ),
        (
            "the prompt file",
            Box::new(|t: &Test| {
                std::fs::write(t.path().join("prompt.md"), "Do it now.\n").unwrap();
            }),
        ),
        (
            "a folder a glob names",
            Box::new(|t: &Test| {
                std::fs::create_dir_all(t.path().join("docs")).unwrap();
            }),
        ),
        (
            "a corrupt entry",
            Box::new(|t: &Test| {
                std::fs::write(entry(t), "{\"format\": 1, \"helixf").unwrap();
            }),
        ),
    ];
    for (what, change) in changes {
        tamper(&test);
        change(&test);
        if what == "a folder a glob names" {
            // Compiled again: `scope "docs"` now names a folder, which lint reports.
            let out = test.with_args(&["compile"]).run().code(2);
            assert!(out.stderr.contains("HF309"), "{what}: {}", out.stderr);
            // Gone again, every answer is as the entry has it: a hit.
            std::fs::remove_dir(test.path().join("docs")).unwrap();
            assert_eq!(description(&test), "from the cache", "{what}");
            continue;
        }
        assert_eq!(
            description(&test),
            "the first",
            "{what}: the cache was used"
        );
    }
    // Another helixflow binary (here: a copy, made later) compiles for itself.
    tamper(&test);
    let copy = test.path().join("helixflow-copy");
    std::fs::copy(env!("CARGO_BIN_EXE_helixflow"), &copy).unwrap();
    let out = std::process::Command::new(&copy)
        .arg("compile")
        .current_dir(test.path())
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["phases"][0]["description"], "the first");
}

#[test]
fn a_pipeline_without_a_state_folder_is_not_cached() {
    let test = Test::new()
        .file("lib.kdl", LIB)
        .file("prompt.md", "Do it.\n")
        .pipeline(PIPELINE);
    test.with_args(&["compile"]).run().code(0);
    assert!(
        !test.path().join(".helixflow").exists(),
        "compile made a state folder"
    );
}

/// A pipeline with warnings is kept with them: a hit reports them exactly as a compilation does,
/// from the files as they are now; one whose warned file changed is compiled again; one with an
/// error is never kept.
#[test]
fn warnings_come_from_the_cache_as_a_compilation_reports_them() {
    let warned = PIPELINE.replace(
        "    scope \"docs\"\n",
        "    scope \"docs\"\n    outputs {\n        glob \"out/*.txt\" min=0\n    }\n",
    );
    let test = project();
    std::fs::write(test.path().join("pipeline.kdl"), &warned).unwrap();
    let compiled = test.with_args(&["run", "--dry-run"]).run().code(0);
    assert!(compiled.stderr.contains("HF601"), "{}", compiled.stderr);
    let hit = test.with_args(&["run", "--dry-run"]).run().code(0);
    assert_eq!(
        hit.stderr, compiled.stderr,
        "the same warning, the same way"
    );
    let status = test.with_args(&["status"]).run().code(0);
    assert_eq!(status.stderr, compiled.stderr);
    // Those were hits: a warning changed in the entry is what a command reports.
    let path = entry(&test);
    let text = std::fs::read_to_string(&path).unwrap();
    let message = compiled
        .stderr
        .lines()
        .find(|l| l.contains("HF601"))
        .unwrap();
    assert!(text.contains("\"rule\":\"HF601\""), "{text}");
    std::fs::write(
        &path,
        text.replacen("\"message\":\"", "\"message\":\"(cached) ", 1),
    )
    .unwrap();
    let planted = test.with_args(&["status"]).run().code(0);
    assert!(
        planted.stderr.contains("(cached) "),
        "{message}: {}",
        planted.stderr
    );

    // The pipeline file changes (a comment above): compiled again, the warning where it is now.
    std::fs::write(
        test.path().join("pipeline.kdl"),
        format!("// a comment\n{warned}"),
    )
    .unwrap();
    let again = test.with_args(&["run", "--dry-run"]).run().code(0);
    assert!(!again.stderr.contains("(cached) "), "{}", again.stderr);
    assert!(
        again.stderr.contains("pipeline.kdl:10:26"),
        "{}",
        again.stderr
    );

    // An error: reported every time, never kept.
    std::fs::remove_dir_all(test.path().join(".helixflow/cache")).unwrap();
    std::fs::write(
        test.path().join("pipeline.kdl"),
        PIPELINE.replace("agent \"bot\"", "agent \"nobody\""),
    )
    .unwrap();
    for _ in 0..2 {
        let out = test.with_args(&["run", "--dry-run"]).run().code(2);
        assert!(out.stderr.contains("error"), "{}", out.stderr);
    }
    assert!(!test.path().join(".helixflow/cache").exists());
}

/// An entry something else writes while a run goes on (here the run's own step) is removed by
/// the run, a remembered plan too: the next run compiles the pipeline afresh.
#[test]
fn an_entry_written_during_a_run_is_removed() {
    let test = Test::new().pipeline(
        r#"pipeline "p"
phase "forge" {
    description "the first"
    run "for f in .helixflow/cache/*.json; do sed -i 's/the first/from the cache/' \"$f\"; done; echo x > .helixflow/cache/planted.json; echo x > .helixflow/cache/plan"
}
"#,
    );
    std::fs::create_dir_all(test.path().join(".helixflow")).unwrap();
    // The entry the run itself uses.
    assert_eq!(description(&test), "the first");
    test.with_args(&["run", "--no-progress"]).run().code(0);
    let left: Vec<_> = std::fs::read_dir(test.path().join(".helixflow/cache"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(description(&test), "the first");
}

#[test]
fn the_runs_commands_find_the_state_folder_of_an_unchanged_pipeline_in_the_cache() {
    let test = project();
    assert_eq!(description(&test), "the first");
    // An entry that names another state folder, one with runs of its own: `runs`, `show` and
    // `report` find the runs where the cached pipeline keeps them.
    let path = entry(&test);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"state-dir\":\".helixflow\""), "{text}");
    std::fs::write(
        &path,
        text.replace(
            "\"state-dir\":\".helixflow\"",
            "\"state-dir\":\"elsewhere\"",
        ),
    )
    .unwrap();
    std::fs::create_dir_all(test.path().join("elsewhere/runs")).unwrap();
    let out = test.with_args(&["runs"]).run().code(0);
    assert!(
        out.stdout.contains("no runs yet in ./elsewhere/runs"),
        "{}",
        out.stdout
    );
    // Once the pipeline changes, it is compiled again: its own state folder.
    std::fs::write(test.path().join("pipeline.kdl"), format!("{PIPELINE}\n")).unwrap();
    let out = test.with_args(&["runs"]).run().code(0);
    assert!(
        out.stdout.contains("no runs yet in ./.helixflow/runs"),
        "{}",
        out.stdout
    );
}

#[test]
fn a_runs_pipeline_json_is_the_pipeline_it_ran_copied_while_the_pipeline_is_unchanged() {
    use std::os::unix::fs::MetadataExt;
    let test = Test::new().pipeline(
        r#"pipeline "p"
phase "a" {
    description "the first"
    run "true"
    always-run
}
"#,
    );
    std::fs::create_dir_all(test.path().join(".helixflow")).unwrap();
    let ran = |test: &Test| {
        test.with_args(&["run", "--no-progress"]).run().code(0);
        let json = crate::common::latest_run(test.path()).join("pipeline.json");
        let text = std::fs::read_to_string(&json).unwrap();
        (json, text)
    };
    let (first, text) = ran(&test);
    assert!(text.contains("the first"), "{text}");
    // What the run wrote is kept beside the cache entry, and the next run of the same pipeline
    // copies it: the same bytes, in a file of its own.
    let kept = cached(&test, "run-pipeline-");
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(std::fs::read_to_string(&kept[0]).unwrap(), text);
    let (second, again) = ran(&test);
    assert_ne!(first, second);
    assert_eq!(again, text);
    assert_ne!(
        std::fs::metadata(&first).unwrap().ino(),
        std::fs::metadata(&second).unwrap().ino()
    );
    assert_eq!(cached(&test, "run-pipeline-"), kept);

    // An edited pipeline is written anew, and replaces what was kept of the old one.
    let edited = test.read("pipeline.kdl").replace("the first", "the second");
    std::fs::write(test.path().join("pipeline.kdl"), edited).unwrap();
    let (_, text) = ran(&test);
    assert!(
        text.contains("the second") && !text.contains("the first"),
        "{text}"
    );
    let now = cached(&test, "run-pipeline-");
    assert_eq!(now.len(), 1, "{now:?}");
    assert_ne!(now, kept);
    assert_eq!(std::fs::read_to_string(&now[0]).unwrap(), text);

    // With a secret to redact, the pipeline is serialized, redacted, for every run, and nothing
    // of it is kept.
    std::fs::remove_dir_all(test.path().join(".helixflow/cache")).unwrap();
    let secret = r#"pipeline "p" {
    secret "TOKEN"
    env "TOKEN" "pipeline-level-secret"
}
phase "a" {
    description "the third"
    run "true"
    always-run
}
"#;
    std::fs::write(test.path().join("pipeline.kdl"), secret).unwrap();
    for _ in 0..2 {
        let (_, text) = ran(&test);
        assert!(text.contains("the third"), "{text}");
        assert!(!text.contains("pipeline-level-secret"), "{text}");
        assert!(text.contains("[REDACTED:TOKEN]"), "{text}");
        assert_eq!(
            cached(&test, "run-pipeline-"),
            Vec::<std::path::PathBuf>::new()
        );
    }
}
