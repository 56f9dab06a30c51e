//! Ways past the verdict, closed, in real runs with real git: commands planted in a repository's
//! configuration, hooks and attributes; agents and verifiers that change `.git`; outputs that are
//! symlinks leading out of the workspace; protected files whose permissions change.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use common::{Test, git_repo, latest_run, run_phase};
use serde_json::Value;

/// Runs git in the test's folder.
fn git(test: &Test, args: &[&str]) {
    let status = Command::new("git")
        .args(args)
        .current_dir(test.path())
        .stdout(Stdio::null())
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?}");
}

/// An executable shell script at `path` that notes `name` in the folder `markers` and passes
/// its standard input through (so that it works as a filter, too).
fn marker_script(path: &Path, markers: &Path, name: &str) {
    std::fs::write(
        path,
        format!("#!/bin/sh\ntouch '{}/{name}'\ncat\n", markers.display()),
    )
    .unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The names noted in the folder `markers`.
fn marked(markers: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(markers)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn status(test: &Test, phase: &str) -> String {
    run_phase(test.path(), phase)["status"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The reports of attempt `attempt` of `phase`.
fn gates(test: &Test, phase: &str, attempt: u32) -> Vec<Value> {
    let path = latest_run(test.path()).join(format!("phases/{phase}/attempt-{attempt}/gates.json"));
    let reports: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    reports.as_array().unwrap().clone()
}

/// The status and details of the report `name` of attempt 1 of `phase`.
fn report(test: &Test, phase: &str, name: &str) -> (String, Vec<String>) {
    let reports = gates(test, phase, 1);
    let report = reports
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no report {name} in {reports:#?}"));
    let details = report["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap().to_owned())
        .collect();
    (report["status"].as_str().unwrap().to_owned(), details)
}

#[test]
fn helixflow_s_own_git_runs_no_command_the_repository_names() {
    let markers = tempfile::tempdir().unwrap();
    let test = Test::new()
        .file("notes.txt", "committed\n")
        .file(".gitattributes", "*.txt filter=planted\n")
        .pipeline(
            r#"pipeline "p"
phase "isolated" {
    run "echo done > out.txt"
    isolation "worktree"
    outputs { file "out.txt" }
    retries 0
}
"#,
        );
    git_repo(test.path());
    // Planted as an agent of an earlier run could have: a file-system monitor, hooks, and a
    // filter driver that the committed attributes and `info/attributes` name.
    let scripts = tempfile::tempdir().unwrap();
    let script = |name: &str| {
        let path = scripts.path().join(name);
        marker_script(&path, markers.path(), name);
        path.display().to_string()
    };
    git(&test, &["config", "core.fsmonitor", &script("fsmonitor")]);
    git(
        &test,
        &["config", "filter.planted.smudge", &script("smudge")],
    );
    git(&test, &["config", "filter.planted.clean", &script("clean")]);
    git(&test, &["config", "filter.planted.required", "true"]);
    std::fs::write(
        test.path().join(".git/info/attributes"),
        "* filter=planted\n",
    )
    .unwrap();
    for hook in ["post-checkout", "reference-transaction"] {
        marker_script(
            &test.path().join(".git/hooks").join(hook),
            markers.path(),
            hook,
        );
    }

    test.with_args(&["run", "--no-progress"]).run().code(0);
    assert_eq!(test.read("out.txt"), "done\n");
    assert_eq!(
        marked(markers.path()),
        Vec::<String>::new(),
        "a command the repository names ran inside helixflow's git"
    );
}

/// Plants a file-system monitor and a hook with git, as an agent would, then does its work.
const PLANTER: &str = r#"set -e
git config core.fsmonitor "$PWD/evil.sh"
printf '#!/bin/sh\ntouch "$PWD/hooked"\n' > .git/hooks/post-commit
chmod +x .git/hooks/post-commit
mkdir -p src && echo work > src/work.txt
"#;

#[test]
fn an_agent_that_changes_the_repository_s_configuration_or_hooks_fails_and_they_are_put_back() {
    let test = Test::new()
        .file("planter.sh", PLANTER)
        .file("src/keep.txt", "kept\n")
        .pipeline(
            r#"pipeline "p"
phase "a" {
    run "sh planter.sh"
    scope "src/**"
    retries 0
}
"#,
        );
    git_repo(test.path());
    let config = std::fs::read_to_string(test.path().join(".git/config")).unwrap();

    test.with_args(&["run", "--no-progress"]).run().code(1);
    assert_eq!(status(&test, "a"), "failed");
    let (status, details) = report(&test, "a", "repository");
    assert_eq!(status, "failed");
    assert_eq!(
        details[1..],
        [
            "`.git/hooks/post-commit` was created, and was put back as it was",
            "`.git/config` was modified, and was put back as it was",
        ]
    );
    assert!(
        details[0].contains("no phase may change them"),
        "{details:?}"
    );
    assert_eq!(
        std::fs::read_to_string(test.path().join(".git/config")).unwrap(),
        config
    );
    assert!(!test.path().join(".git/hooks/post-commit").exists());
    // The scope gate, which does not see `.git`, passed: only the guard caught it.
    assert_eq!(report(&test, "a", "scope").0, "passed");
}

#[test]
fn an_agent_that_commits_its_work_is_not_held_to_have_changed_the_repository() {
    let test = Test::new().file("src/keep.txt", "kept\n").pipeline(
        r#"pipeline "p"
phase "a" {
    run "echo work > src/work.txt && git add src && git -c user.name=a -c user.email=a@example.com commit --quiet -m work"
    retries 0
}
"#,
    );
    git_repo(test.path());
    test.with_args(&["run", "--no-progress"]).run().code(0);
}

#[test]
fn a_verifier_that_adds_a_hook_has_its_review_voided() {
    let test = Test::new()
        .file(
            "verifier.sh",
            "printf '#!/bin/sh\\n' > .git/hooks/pre-push\necho '{\"success\": true}'\n",
        )
        .file("doc.md", "original\n")
        .pipeline(
            r#"pipeline "p"
agent "reviewer" {
    command "sh" "verifier.sh"
}
phase "a" {
    run "echo changed > doc.md"
    verify "sub-agent"
    verifier "reviewer"
    retries 0
}
"#,
        );
    git_repo(test.path());
    test.with_args(&["run", "--no-progress"]).run().code(1);
    let (status, details) = report(&test, "a", "sub-agent");
    assert_eq!(status, "failed");
    assert!(
        details[0].contains("the verifier changed the git repository's configuration")
            && details[0].contains("`.git/hooks/pre-push` was created"),
        "{details:?}"
    );
    assert!(!test.path().join(".git/hooks/pre-push").exists());
}

/// An output that is a symlink to a file outside the workspace, which the gates would read.
#[test]
fn an_output_that_leads_out_of_the_workspace_fails_and_no_gate_reads_through_it() {
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "TOKEN=hunter2\n").unwrap();
    let test = Test::new().pipeline(&format!(
        r#"pipeline "p"
phase "a" {{
    run "ln -s '{}' out.txt && mkdir -p docs && ln -s '{}' docs && ln -s ../out.txt docs/inside.txt"
    outputs {{
        file "out.txt"
        glob "docs/**"
    }}
    gates {{
        matches "out.txt" "TOKEN" name="token"
        absent "docs/*.txt" "nothing" name="clean"
    }}
    retries 0
}}
"#,
        secret.display(),
        outside.path().display(),
    ));
    test.with_args(&["run", "--no-progress"]).run().code(1);
    let (status, details) = report(&test, "a", "outputs");
    assert_eq!(status, "failed");
    assert_eq!(
        details,
        [
            format!(
                "`out.txt` leads outside the workspace, to `{}`: an output must be a file in the workspace",
                secret.canonicalize().unwrap().display()
            ),
            format!(
                "`docs/inside.txt` leads outside the workspace, to `{}`: an output must be a file in the workspace",
                secret.canonicalize().unwrap().display()
            ),
            // A link that leads out is not a match.
            "no file matches `docs/**`; at least 1 expected".to_owned(),
        ]
    );
    let (status, details) = report(&test, "a", "token");
    assert_eq!(status, "failed");
    assert!(
        details[0].starts_with("`out.txt` leads outside the workspace"),
        "{details:?}"
    );
    assert_eq!(report(&test, "a", "clean").0, "failed");
}

#[test]
fn a_symlink_output_inside_the_workspace_is_an_output() {
    let test = Test::new().file("real.txt", "TOKEN\n").pipeline(
        r#"pipeline "p"
phase "a" {
    run "ln -s real.txt out.txt"
    outputs { file "out.txt" }
    gates { matches "out.txt" "TOKEN" name="token"; }
    retries 0
}
"#,
    );
    test.with_args(&["run", "--no-progress"]).run().code(0);
}

#[test]
fn a_protected_file_whose_permissions_change_is_changed() {
    for (how, mode) in [
        ("chmod 666", 0o666),
        ("chmod u+s", 0o4644),
        ("chmod 000", 0o000),
    ] {
        let test = Test::new()
            .file("data/keep.txt", "kept\n")
            .pipeline(&format!(
                r#"pipeline "p"
phase "a" {{
    run "{how} data/keep.txt"
    protect "data/**"
    retries 0
}}
"#
            ));
        std::fs::set_permissions(
            test.path().join("data/keep.txt"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        test.with_args(&["run", "--no-progress"]).run().code(1);
        let (status, details) = report(&test, "a", "protect");
        assert_eq!(status, "failed", "{how}");
        assert_eq!(
            details,
            ["protected file `data/keep.txt` was modified"],
            "{how}"
        );
        let now = std::fs::metadata(test.path().join("data/keep.txt"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(now & 0o7777, mode, "{how}");
    }
}
