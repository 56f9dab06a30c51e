//! File names an agent makes reach the terminal and the feedback clean: no escape sequence (a
//! window title, a cleared screen) and no newline that starts a line of its own.

use crate::common::Test;

/// A name with an OSC window title, a clear-screen sequence and a newline before a fake line.
const NASTY: &str = "x\u{1b}]0;owned\u{7}\u{1b}[2J\nfake line";

fn assert_clean(what: &str, text: &str) {
    assert!(!text.contains('\u{1b}'), "{what}: raw ESC in {text:?}");
    assert!(!text.contains('\u{7}'), "{what}: raw BEL in {text:?}");
    assert!(
        !text.lines().any(|line| line.starts_with("fake line")),
        "{what}: a line of the name's own in {text:?}"
    );
}

#[test]
fn agent_made_file_names_reach_status_dry_run_show_and_feedback_clean() {
    let test = Test::new()
        .pipeline(
            r#"pipeline "p"
phase "a" {
    inputs { glob "src/**" }
    run "true"
}
phase "b" {
    run "printf x > \"$(cat name.txt)\""
    scope "elsewhere/**"
    retries 0
}
"#,
        )
        .file("name.txt", NASTY)
        .file("src/keep.txt", "kept");
    test.with_args(&["run", "--no-progress", "--only", "a"])
        .run()
        .code(0);
    std::fs::write(test.path().join("src").join(NASTY), "new input").unwrap();

    let status = test.with_args(&["status"]).run();
    assert!(status.stdout.contains("input"), "{}", status.stdout);
    assert_clean("status", &status.stdout);
    let dry = test.with_args(&["run", "--dry-run"]).run().code(0);
    assert!(dry.stdout.contains("will run"), "{}", dry.stdout);
    assert_clean("run --dry-run", &dry.stdout);

    test.with_args(&["run", "--no-progress", "--only", "b"])
        .run()
        .code(1);
    let runs = test.path().join(".helixflow/runs");
    let folders = crate::common::run_folders(&runs);
    let feedback = std::fs::read_to_string(
        folders
            .last()
            .unwrap()
            .join("phases/b/attempt-1/feedback.md"),
    )
    .unwrap();
    assert!(
        feedback.contains("`x\u{241b}]0;owned\u{2407}\u{241b}[2J\u{240a}fake line` was created"),
        "{feedback}"
    );
    assert_clean("feedback.md", &feedback);
    let show = test.with_args(&["show", "latest", "b"]).run();
    assert!(show.stdout.contains("was created"), "{}", show.stdout);
    assert_clean("show", &show.stdout);
    assert_clean("show", &show.stderr);
}

#[test]
fn agent_made_file_names_reach_the_verifiers_prompt_clean() {
    let test = Test::new()
        .file("name.txt", NASTY)
        .file(
            "verifier.sh",
            "cat > /dev/null\necho '{\"success\": true}'\n",
        )
        .pipeline(
            r#"pipeline "p"
agent "reviewer" {
    command "sh" "verifier.sh"
    stdin #true
}
phase "a" {
    run "printf x > \"$(cat name.txt)\""
    verify "sub-agent"
    verifier "reviewer"
    retries 0
}
"#,
        );
    test.with_args(&["run", "--no-progress"]).run();
    let prompt = std::fs::read_to_string(
        crate::common::latest_run(test.path()).join("phases/a/attempt-1/verifier-prompt.md"),
    )
    .expect("the verifier's prompt");
    assert!(prompt.contains("created"), "{prompt}");
    assert_clean("the verifier's prompt", &prompt);
}
