//! Remote imports (`import "git+…//FILE" rev="…"`), on real repositories of this machine: bare
//! repositories through `git+file://` and a `git daemon` on 127.0.0.1, tags that move, a branch
//! that advances, a repository deleted after locking, a cached file edited by hand, two processes
//! filling the cache at once, and a remote file that imports a sibling.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};

use crate::common::Test;
use crate::common::repos::{Daemon, GitSpy, Repo};

/// An agent that notes its phase in `calls.log` and writes `out/<phase>.txt`.
const AGENTS: &str = r#"import "templates.kdl"

agent "writer" {
    command "sh" "-c" "mkdir -p out && echo $HELIXFLOW_PHASE >> calls.log && echo $HELIXFLOW_PHASE > out/$HELIXFLOW_PHASE.txt"
}
"#;

/// Two templates: `doc` and `code`.
const TEMPLATES: &str = r#"template "doc" {
    param "name"
    agent "writer"
    prompt "Write the documentation {{ name }}"
    outputs {
        file "out/{{ name }}.txt"
    }
    retries 0
}

template "code" {
    param "name"
    agent "writer"
    prompt "Write the code {{ name }}"
    outputs {
        file "out/{{ name }}.txt"
    }
    retries 0
}
"#;

/// A repository with `agents.kdl`, `templates.kdl` (which it imports) and `extra.kdl`, tagged
/// `v1`.
fn library() -> Repo {
    let repo = Repo::new();
    repo.write("agents.kdl", AGENTS)
        .write("templates.kdl", TEMPLATES)
        .write("extra.kdl", "agent \"extra\" {\n    command \"true\"\n}\n");
    repo.commit("library");
    repo.tag("v1");
    repo
}

/// A pipeline of three phases importing `agents.kdl` of `repo` at `rev`: `docs` from the template
/// `doc`, `code` from `code`, `plain` with the agent only.
fn pipeline(import: &str, rev: &str) -> String {
    format!(
        r#"pipeline "shared"
import "{import}" rev="{rev}"
phase "docs" use="doc" name="docs"
phase "code" use="code" name="code"
phase "plain" {{
    agent "writer"
    prompt "Write plain"
    outputs {{
        file "out/plain.txt"
    }}
    retries 0
}}
"#
    )
}

/// A project with `text` as its pipeline and an import cache of its own.
fn project(text: &str) -> (Test, tempfile::TempDir) {
    let cache = tempfile::tempdir().unwrap();
    let test = Test::new()
        .pipeline(text)
        .env("HELIXFLOW_CACHE", cache.path().to_str().unwrap());
    (test, cache)
}

fn sha256(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn calls(test: &Test) -> Vec<String> {
    std::fs::read_to_string(test.path().join("calls.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn sorted(mut items: Vec<String>) -> Vec<String> {
    items.sort();
    items
}

/// The messages of a `lint --format json` report.
fn messages(outcome: &crate::common::Outcome) -> Vec<String> {
    outcome
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            format!(
                "{} {}",
                d["code"].as_str().unwrap(),
                d["message"].as_str().unwrap()
            )
        })
        .collect()
}

/// The commit folders of a cache, by name.
fn cached(cache: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(cache)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn a_pipeline_runs_offline_from_the_cache_after_its_repository_is_gone() {
    let repo = library();
    let commit = crate::common::repos::git(&repo.bare(), &["rev-parse", "v1^{commit}"]);
    let (test, cache) = project(&pipeline(&repo.url("agents.kdl"), "v1"));

    // First use: fetched, cached, locked (as `cargo` writes Cargo.lock).
    let first = test.with_args(&["run"]).run().code(0);
    assert!(
        first.stderr.contains(&format!(
            "helixflow.lock: added {} rev \"v1\" at {}",
            repo.repository(),
            &commit[..12]
        )),
        "{}",
        first.stderr
    );
    let lock = test.read("helixflow.lock");
    assert!(lock.contains(&format!(
        "repository \"{}\" rev=\"v1\" {{\n    commit \"{commit}\"\n    file \"agents.kdl\" sha256=\"{}\"\n    file \"templates.kdl\" sha256=\"{}\"\n}}",
        repo.repository(),
        sha256(AGENTS),
        sha256(TEMPLATES)
    )), "{lock}");
    assert_eq!(cached(cache.path()), [commit.as_str()]);
    let copy = cache.path().join(&commit).join("agents.kdl");
    assert_eq!(std::fs::read_to_string(&copy).unwrap(), AGENTS);
    assert!(std::fs::metadata(&copy).unwrap().permissions().readonly());
    assert_eq!(calls(&test).len(), 3);

    // The repository disappears: the cache and the lock are enough, offline or not, and git is
    // not even asked.
    std::fs::remove_dir_all(repo.bare()).unwrap();
    test.with_args(&["run", "--offline", "--force"])
        .run()
        .code(0);
    assert_eq!(calls(&test).len(), 6);
    let spy = GitSpy::new("0");
    test.with_args(&["run", "--force"])
        .env("PATH", &spy.path())
        .run()
        .code(0);
    assert_eq!(calls(&test).len(), 9);
    test.with_args(&["status"])
        .env("PATH", &spy.path())
        .run()
        .code(0);
    assert_eq!(spy.calls(), Vec::<String>::new(), "no git call at all");
    assert_eq!(test.read("helixflow.lock"), lock, "the lock did not change");

    // Without the cache, offline cannot answer, and says so.
    std::fs::remove_dir_all(cache.path().join(&commit)).unwrap();
    let offline = test.with_args(&["lint", "--offline"]).run().code(1);
    assert!(offline.stdout.contains("HF513"), "{}", offline.stdout);
    assert!(
        offline.stdout.contains("is not in the import cache"),
        "{}",
        offline.stdout
    );
}

#[test]
fn a_moved_tag_changes_nothing_until_lock_update_which_reruns_exactly_the_affected_phases() {
    let repo = library();
    let old = crate::common::repos::git(&repo.bare(), &["rev-parse", "v1^{commit}"]);
    let (test, _cache) = project(&pipeline(&repo.url("agents.kdl"), "v1"));
    test.with_args(&["run"]).run().code(0);
    assert_eq!(sorted(calls(&test)), ["code", "docs", "plain"]);
    let lock = test.read("helixflow.lock");

    // Upstream, the template `doc` changes and the tag moves to it.
    repo.write(
        "templates.kdl",
        &TEMPLATES.replace("Write the documentation", "Document"),
    );
    let new = repo.commit("doc: a shorter prompt");
    repo.tag("v1");

    // Nothing changes until the lock is updated: the lock pins the commit, not the tag.
    let status = test.with_args(&["status"]).run().code(0);
    assert!(
        status
            .stdout
            .starts_with("pipeline \"shared\": 3 of 3 phases up to date"),
        "{}",
        status.stdout
    );
    test.with_args(&["run"]).run().code(0);
    assert_eq!(calls(&test).len(), 3);
    assert_eq!(test.read("helixflow.lock"), lock);

    // `helixflow lock --update` moves the pin and says what changed.
    let updated = test.with_args(&["lock", "--update"]).run().code(0);
    assert_eq!(
        updated.stdout,
        format!(
            "helixflow.lock: moved {} rev \"v1\": {} → {} (changed: templates.kdl)\n",
            repo.repository(),
            &old[..12],
            &new[..12]
        )
    );
    assert!(test.read("helixflow.lock").contains(&new));
    let again = test.with_args(&["lock"]).run().code(0);
    assert_eq!(
        again.stdout,
        "helixflow.lock: up to date (1 repository pinned)\n"
    );

    // Only the phase made from `doc` is out of date, and `status` says why.
    let status = test.with_args(&["status"]).run().code(0);
    let expected = format!(
        "    - template `doc` changed: its import {} moved (rev \"v1\", commit {} → {})",
        repo.url("templates.kdl"),
        &old[..12],
        &new[..12]
    );
    assert!(status.stdout.contains(&expected), "{}", status.stdout);
    assert!(
        status.stdout.contains("→ docs   will run"),
        "{}",
        status.stdout
    );
    assert!(
        status.stdout.contains("✓ code   up to date"),
        "{}",
        status.stdout
    );
    assert!(
        status.stdout.contains("✓ plain  up to date"),
        "{}",
        status.stdout
    );
    let json = test.with_args(&["status", "--json"]).run().code(0).json();
    let reason = &json["phases"][0]["reasons"][0];
    assert_eq!(reason["reason"], "import-moved");
    assert_eq!(reason["what"], "template `doc`");
    assert_eq!(reason["new-commit"], new.as_str());

    test.with_args(&["run"]).run().code(0);
    assert_eq!(calls(&test).len(), 4);
    assert_eq!(calls(&test)[3], "docs");
}

#[test]
fn locked_fails_when_the_lock_is_missing_or_would_change() {
    let repo = library();
    let (test, _cache) = project(&pipeline(&repo.url("agents.kdl"), "v1"));

    // No lock: `--locked` (CI) fails and writes nothing.
    let missing = test.with_args(&["run", "--locked"]).run().code(2);
    assert!(missing.stderr.contains("HF510"), "{}", missing.stderr);
    let lint = test
        .with_args(&["lint", "--locked", "--format", "json"])
        .run()
        .code(1);
    assert_eq!(
        messages(&lint)[0],
        format!(
            "HF510 {} rev \"v1\" is not in helixflow.lock, and `--locked` forbids changing the lock",
            repo.repository()
        )
    );
    assert!(!test.path().join("helixflow.lock").exists());
    assert_eq!(calls(&test), Vec::<String>::new());

    let locked = test.with_args(&["lock"]).run().code(0);
    assert!(
        locked.stdout.starts_with("helixflow.lock: added "),
        "{}",
        locked.stdout
    );
    test.with_args(&["run", "--locked"]).run().code(0);
    test.with_args(&["check", "--locked"]).run().code(0);

    // A file of the locked commit the lock does not list yet.
    let more = pipeline(&repo.url("agents.kdl"), "v1").replace(
        "phase \"docs\"",
        &format!(
            "import \"{}\" rev=\"v1\"\nphase \"docs\"",
            repo.url("extra.kdl")
        ),
    );
    std::fs::write(test.path().join("pipeline.kdl"), &more).unwrap();
    let stale = test
        .with_args(&["lint", "--locked", "--format", "json"])
        .run()
        .code(1);
    assert!(
        messages(&stale).contains(&format!(
            "HF510 {} is not in helixflow.lock (its commit is, but not this file), and `--locked` forbids changing the lock",
            repo.url("extra.kdl")
        )),
        "{:?}",
        messages(&stale)
    );

    // A pin no import uses any more.
    std::fs::write(
        test.path().join("pipeline.kdl"),
        "pipeline \"shared\"\nphase \"a\" {\n    run \"true\"\n}\n",
    )
    .unwrap();
    test.with_args(&["run", "--locked", "--dry-run"])
        .run()
        .code(2);
    let stale = test
        .with_args(&["lint", "--locked", "--format", "json"])
        .run()
        .code(1);
    assert!(
        messages(&stale)[0].starts_with(
            "HF510 helixflow.lock does not match the pipeline, and `--locked` forbids changing it: removed"
        ),
        "{:?}",
        messages(&stale)
    );
    // Without `--locked`, the lock goes with the last import.
    let pruned = test.with_args(&["lint"]).run().code(0);
    assert!(
        pruned
            .stderr
            .contains("helixflow.lock: removed, no remote import is left"),
        "{}",
        pruned.stderr
    );
    assert!(!test.path().join("helixflow.lock").exists());

    // The exported workflow runs every phase with `--locked`.
    std::fs::write(
        test.path().join("pipeline.kdl"),
        pipeline(&repo.url("agents.kdl"), "v1"),
    )
    .unwrap();
    crate::common::git_repo(test.path());
    let workflow = test
        .with_args(&["export", "github-actions", "pipeline.kdl"])
        .run()
        .code(0);
    assert!(
        workflow
            .stdout
            .contains("helixflow run --only \"$HELIXFLOW_PHASE_NAME\" --force --locked"),
        "{}",
        workflow.stdout
    );
}

#[test]
fn a_tampered_cache_is_refused_naming_the_file() {
    let repo = library();
    let (test, cache) = project(&pipeline(&repo.url("agents.kdl"), "v1"));
    test.with_args(&["run"]).run().code(0);
    let commit = cached(cache.path()).remove(0);
    let copy = cache.path().join(&commit).join("templates.kdl");

    // Edited by hand: refused, naming the file, and nothing runs.
    let mut permissions = std::fs::metadata(&copy).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o644);
    std::fs::set_permissions(&copy, permissions).unwrap();
    std::fs::write(&copy, TEMPLATES.replace("retries 0", "retries 9")).unwrap();
    let refused = test.with_args(&["run", "--force"]).run().code(2);
    assert!(refused.stderr.contains("HF511"), "{}", refused.stderr);
    let lint = test.with_args(&["lint", "--format", "json"]).run().code(1);
    let wanted = format!("HF511 {} was changed after it was fetched", copy.display());
    assert!(
        messages(&lint).iter().any(|m| m.starts_with(&wanted)),
        "{:?}",
        messages(&lint)
    );
    assert_eq!(calls(&test).len(), 3);

    // A locked file gone from the cache is refused too.
    std::fs::remove_file(&copy).unwrap();
    let gone = test.with_args(&["lint", "--format", "json"]).run().code(1);
    let wanted = format!("HF511 {} is gone from the import cache", copy.display());
    assert!(
        messages(&gone).iter().any(|m| m.starts_with(&wanted)),
        "{:?}",
        messages(&gone)
    );

    // Without the commit's folder it is fetched anew, and matches the lock again.
    std::fs::remove_dir_all(cache.path().join(&commit)).unwrap();
    test.with_args(&["run", "--force"]).run().code(0);
    assert_eq!(calls(&test).len(), 6);
}

#[test]
fn a_branch_that_advances_behind_git_daemon_moves_only_with_lock_update() {
    let repo = library();
    let first = crate::common::repos::git(&repo.bare(), &["rev-parse", "main"]);
    let daemon = Daemon::serve(repo.base());
    let repository = format!("git+git://127.0.0.1:{}/lib.git", daemon.port);
    let (test, _cache) = project(&pipeline(&format!("{repository}//agents.kdl"), "main"));
    test.with_args(&["lint"]).run().code(0);
    assert!(test.read("helixflow.lock").contains(&first));

    // The branch advances: the lock keeps the pipeline where it was.
    repo.write(
        "templates.kdl",
        &TEMPLATES.replace("retries 0", "retries 1"),
    );
    let second = repo.commit("retries");
    let compiled = test.with_args(&["compile"]).run().code(0).json();
    assert_eq!(
        compiled["remote"]["agents"]["writer"]["commit"],
        first.as_str()
    );
    assert_eq!(
        compiled["remote"]["templates"]["doc"]["import"],
        format!("{repository}//templates.kdl").as_str()
    );

    // An update of another repository is refused; of this one, it moves the pin.
    let elsewhere = test
        .with_args(&["lock", "--update=git+file:///elsewhere.git"])
        .run()
        .code(2);
    assert!(
        elsewhere
            .stderr
            .contains("no remote import of pipeline.kdl is from this repository"),
        "{}",
        elsewhere.stderr
    );
    let moved = test
        .with_args(&["lock", &format!("--update={repository}")])
        .run()
        .code(0);
    assert_eq!(
        moved.stdout,
        format!(
            "helixflow.lock: moved {repository} rev \"main\": {} → {} (changed: templates.kdl)\n",
            &first[..12],
            &second[..12]
        )
    );
    let compiled = test.with_args(&["compile"]).run().code(0).json();
    assert_eq!(compiled["phases"][0]["retries"], 1);
    drop(daemon);

    // With the daemon gone, a commit the cache lacks cannot be fetched: git's message says why.
    let unreachable = test
        .with_args(&["lint"])
        .env(
            "HELIXFLOW_CACHE",
            test.path().join("empty-cache").to_str().unwrap(),
        )
        .run()
        .code(1);
    assert!(
        unreachable.stdout.contains("HF507"),
        "{}",
        unreachable.stdout
    );
}

#[test]
fn two_processes_fill_the_cache_at_once() {
    let repo = library();
    let cache = tempfile::tempdir().unwrap();
    // Both stop for a second in `git archive`, so that their fetches overlap.
    let spy = GitSpy::new("1");
    let projects: Vec<tempfile::TempDir> = (0..2)
        .map(|_| {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(
                dir.path().join("pipeline.kdl"),
                pipeline(&repo.url("agents.kdl"), "v1"),
            )
            .unwrap();
            dir
        })
        .collect();
    let children: Vec<std::process::Child> = projects
        .iter()
        .map(|dir| {
            Command::new(env!("CARGO_BIN_EXE_helixflow"))
                .arg("lint")
                .current_dir(dir.path())
                .env("HELIXFLOW_CACHE", cache.path())
                .env("PATH", spy.path())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let archives = spy
        .calls()
        .iter()
        .filter(|c| c.starts_with("archive"))
        .count();
    assert_eq!(archives, 2, "both fetched: {:?}", spy.calls());
    // One commit folder, whole, and no staging folder left behind.
    let commit = crate::common::repos::git(&repo.bare(), &["rev-parse", "v1^{commit}"]);
    assert_eq!(cached(cache.path()), [commit.as_str()]);
    let folder = cache.path().join(&commit);
    assert_eq!(
        std::fs::read_to_string(folder.join("templates.kdl")).unwrap(),
        TEMPLATES
    );
    let locks: Vec<String> = projects
        .iter()
        .map(|dir| std::fs::read_to_string(dir.path().join("helixflow.lock")).unwrap())
        .collect();
    assert_eq!(locks[0], locks[1]);
}

#[test]
fn a_remote_file_imports_a_sibling_in_the_same_commit() {
    let repo = Repo::new();
    repo.write(
        "agents.kdl",
        "import \"python/templates.kdl\"\n",
    )
    .write(
        "python/templates.kdl",
        "import \"../common.kdl\"\ntemplate \"module\" {\n    param \"name\"\n    agent \"common\"\n    outputs {\n        file \"{{ name }}.py\"\n    }\n}\n",
    )
    .write("common.kdl", "agent \"common\" {\n    command \"true\"\n}\n");
    let commit = repo.commit("library");
    repo.tag("v2");
    // A local file where the relative import would land if it were read from disk: never read.
    let text = format!(
        "pipeline \"p\"\nimport \"{}\" rev=\"v2\"\nphase \"a\" use=\"module\" name=\"a\"\n",
        repo.url("agents.kdl")
    );
    let (test, _cache) = project(&text);
    let test = test.file("python/templates.kdl", "this is not KDL {");
    let compiled = test.with_args(&["compile"]).run().code(0).json();
    let remote = &compiled["remote"];
    assert_eq!(
        remote["templates"]["module"]["import"],
        repo.url("python/templates.kdl").as_str()
    );
    assert_eq!(
        remote["agents"]["common"]["import"],
        repo.url("common.kdl").as_str()
    );
    assert_eq!(remote["agents"]["common"]["rev"], "v2");
    assert_eq!(remote["agents"]["common"]["commit"], commit.as_str());
    let lock = test.read("helixflow.lock");
    for file in ["agents.kdl", "common.kdl", "python/templates.kdl"] {
        assert!(
            lock.contains(&format!("    file \"{file}\" sha256=")),
            "{lock}"
        );
    }
    let lint = test.with_args(&["lint"]).run().code(0);
    assert!(
        lint.stdout.contains(&format!(
            "pipeline.kdl: template \"module\" from {} rev \"v2\" (commit {})",
            repo.url("python/templates.kdl"),
            &commit[..12]
        )),
        "{}",
        lint.stdout
    );

    // A relative import that leaves the repository is refused.
    repo.write("agents.kdl", "import \"../../outside.kdl\"\n");
    repo.commit("outside");
    repo.tag("v2");
    let escaping = test.with_args(&["lock", "--update"]).run().code(2);
    assert!(escaping.stderr.contains("HF506"), "{}", escaping.stderr);
    assert!(
        escaping.stderr.contains("leaves the repository"),
        "{}",
        escaping.stderr
    );
}

#[test]
fn the_cache_is_under_xdg_cache_home_unless_helixflow_cache_moves_it() {
    let repo = library();
    let home = tempfile::tempdir().unwrap();
    let test = Test::new()
        .pipeline(&pipeline(&repo.url("agents.kdl"), "v1"))
        // Empty is unset (and a later value wins).
        .env("HELIXFLOW_CACHE", "")
        .env("XDG_CACHE_HOME", home.path().join("xdg").to_str().unwrap())
        .env("HOME", home.path().to_str().unwrap());
    test.with_args(&["lint"]).run().code(0);
    let imports: PathBuf = home.path().join("xdg/helixflow/imports");
    assert_eq!(cached(&imports).len(), 1);
    let moved = home.path().join("moved");
    test.with_args(&["lint"])
        .env("HELIXFLOW_CACHE", moved.to_str().unwrap())
        .run()
        .code(0);
    assert_eq!(cached(&moved).len(), 1);

    // A cache that cannot be written is a diagnostic, not a failure of helixflow.
    let file = home.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let unwritable = test
        .with_args(&["lint"])
        .env("HELIXFLOW_CACHE", file.join("imports").to_str().unwrap())
        .run()
        .code(1);
    assert!(unwritable.stdout.contains("HF512"), "{}", unwritable.stdout);
}

#[test]
fn a_pipeline_never_takes_the_lock_of_another_pipeline_of_its_folder() {
    let repo = library();
    let (test, _cache) = project(&pipeline(&repo.url("agents.kdl"), "v1"));
    test.with_args(&["lint"]).run().code(0);
    let lock = test.read("helixflow.lock");
    assert!(lock.contains("pipeline \"pipeline.kdl\""), "{lock}");

    // `helixflow.kdl` beside it maps to the same file: without remote imports it leaves the lock
    // alone; with some, it is told whose lock it is.
    let test = test.file(
        "helixflow.kdl",
        "pipeline \"other\"\nphase \"a\" {\n    run \"true\"\n}\n",
    );
    test.with_args(&["lint", "helixflow.kdl"]).run().code(0);
    assert_eq!(test.read("helixflow.lock"), lock);
    let test = test.file(
        "helixflow.kdl",
        &pipeline(&repo.url("agents.kdl"), "v1").replace("\"shared\"", "\"other\""),
    );
    let taken = test
        .with_args(&["lint", "--format", "json", "helixflow.kdl"])
        .run()
        .code(1);
    assert_eq!(
        messages(&taken)[0],
        "HF510 helixflow.lock cannot be read: it is the lock of pipeline.kdl, not of helixflow.kdl (both use the same lock file: rename one of them)"
    );
    assert_eq!(test.read("helixflow.lock"), lock);
}

/// The compiled pipeline kept in the state folder holds for remote imports only while the lock
/// and the cached files are the same: a hit asks no git, and a moved pin, a deleted or hand-edited
/// lock, or a cached file gone or edited compile again, exactly as without the cache.
#[test]
fn the_compiled_pipeline_cache_follows_the_lock_and_the_import_cache() {
    let repo = library();
    let (test, cache) = project(&pipeline(&repo.url("agents.kdl"), "v1"));
    test.with_args(&["run"]).run().code(0);
    // The run made the state folder after it compiled: the next command keeps the compilation.
    test.with_args(&["status"]).run().code(0);
    let lock = test.read("helixflow.lock");
    let commit = crate::common::repos::git(&repo.bare(), &["rev-parse", "v1^{commit}"]);
    let entries: Vec<PathBuf> = std::fs::read_dir(test.path().join(".helixflow/cache"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let entry = entries[0].clone();
    assert!(
        std::fs::read_to_string(&entry)
            .unwrap()
            .contains(&format!("\"{commit}\"")),
        "the entry holds the remote answers"
    );
    // An entry whose prompt says otherwise shows which compilation a command used.
    let plant = || {
        let text = std::fs::read_to_string(&entry).unwrap();
        std::fs::write(&entry, text.replace("Write plain", "From the cache")).unwrap();
    };
    let prompt = |args: &[&str]| -> String {
        let json = test.with_args(args).run().code(0).json();
        json["phases"][2]["prompt"].to_string()
    };

    plant();
    let spy = GitSpy::new("0");
    let out = test
        .with_args(&["compile"])
        .env("PATH", &spy.path())
        .run()
        .code(0);
    assert!(out.stdout.contains("From the cache"), "a hit");
    assert_eq!(spy.calls(), Vec::<String>::new(), "a hit asks no git");

    // The lock edited by hand (here: a comment) or deleted: compiled again, the lock rewritten.
    plant();
    std::fs::write(
        test.path().join("helixflow.lock"),
        format!("{lock}// edited\n"),
    )
    .unwrap();
    assert!(
        prompt(&["compile"]).contains("Write plain"),
        "an edited lock"
    );
    plant();
    std::fs::remove_file(test.path().join("helixflow.lock")).unwrap();
    let locked = test.with_args(&["compile", "--locked"]).run().code(2);
    assert!(locked.stderr.contains("HF510"), "{}", locked.stderr);
    assert!(prompt(&["compile"]).contains("Write plain"), "no lock");
    assert_eq!(
        test.read("helixflow.lock"),
        lock,
        "the lock is written again"
    );

    // The cached file edited by hand: refused, as without the pipeline cache.
    prompt(&["compile"]);
    plant();
    let copy = cache.path().join(&commit).join("agents.kdl");
    let mut permissions = std::fs::metadata(&copy).unwrap().permissions();
    #[allow(
        clippy::permissions_set_readonly_false,
        reason = "a test edits the cache"
    )]
    permissions.set_readonly(false);
    std::fs::set_permissions(&copy, permissions).unwrap();
    std::fs::write(&copy, AGENTS.replace("writer", "rewriter")).unwrap();
    let tampered = test.with_args(&["compile"]).run().code(2);
    assert!(
        tampered.stderr.contains("agents.kdl"),
        "{}",
        tampered.stderr
    );

    // The cached commit gone and the network forbidden: offline says so, as without the cache.
    std::fs::remove_dir_all(cache.path().join(&commit)).unwrap();
    let offline = test.with_args(&["compile", "--offline"]).run().code(2);
    assert!(offline.stderr.contains("HF513"), "{}", offline.stderr);
}
