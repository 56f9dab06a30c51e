//! Every diagnostic code has a fixture folder `tests/fixtures/lint/<CODE>/` with `bad.kdl`, which
//! must trigger the code, and `good.kdl`, which must not. The human output of each bad fixture is
//! snapshotted.

use std::path::{Path, PathBuf};
use std::process::Command;

use helixflow::ALL_RULES;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lint")
}

/// Runs lint from `root` (the crate root, or a copy of a fixture folder) on `path`, given
/// relative to it, so that paths in the output are relative and stable; with the repository of
/// the remote fixtures when `remote` is given.
fn lint_in(root: &Path, path: &Path, format: &str, remote: Option<&Remote>) -> (i32, String) {
    let relative = path.strip_prefix(root).unwrap_or(path);
    let mut command = Command::new(env!("CARGO_BIN_EXE_helixflow"));
    command
        .args(["lint", "--format", format])
        .arg(relative)
        .current_dir(root)
        .env("NO_COLOR", "1")
        .env_remove("HELIXFLOW_PATH");
    if let Some(remote) = remote {
        command.args(&remote.args).envs(remote.env.iter().cloned());
    }
    let output = command.output().expect("helixflow runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

fn codes(root: &Path, path: &Path, remote: Option<&Remote>) -> Vec<String> {
    let (_, stdout) = lint_in(root, path, "json", remote);
    let json: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    json.as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap().to_owned())
        .collect()
}

/// A copy of the fixture folder of `code` in a temporary folder, at the same path below it as
/// below the crate root, so that lint's output reads the same; in a git repository of its own
/// when `git` is set, else outside any.
fn fixture_copy(code: &str, git: bool) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let from = fixtures().join(code);
    let to = root.path().join("tests/fixtures/lint").join(code);
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(&from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
    if git {
        let status = Command::new("git")
            .args(["init", "--quiet"])
            .current_dir(root.path())
            .status()
            .expect("git runs");
        assert!(status.success());
    }
    root
}

/// The codes whose fixtures import from a git repository.
const REMOTE: &[&str] = &[
    "HF505", "HF506", "HF507", "HF508", "HF509", "HF510", "HF511", "HF512", "HF513",
];

/// What lint of a remote fixture runs with: `tests/fixtures/remote-repo` as a bare repository of
/// one commit tagged `v1`, made the same on every machine (fixed author, committer and dates, so
/// the commit id is fixed too), which git reaches for `https://fixtures.helixflow.invalid/lib.git`
/// (`url.*.insteadOf`, as a user's own git configuration would say it), and the import cache in
/// `.cache` of the folder lint runs in.
struct Remote {
    _dir: tempfile::TempDir,
    env: Vec<(String, String)>,
    args: Vec<String>,
}

fn git(args: &[&str], env: &[(&str, &str)]) {
    let status = Command::new("git")
        .args(args)
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?}");
}

impl Remote {
    fn new(code: &str) -> Remote {
        let dir = tempfile::tempdir().unwrap();
        let bare = dir.path().join("lib.git");
        let bare_text = bare.to_str().unwrap();
        let work = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/remote-repo");
        let same_everywhere = [
            ("GIT_CONFIG_GLOBAL", "/dev/null"),
            ("GIT_CONFIG_NOSYSTEM", "1"),
            ("GIT_AUTHOR_NAME", "helixflow"),
            ("GIT_AUTHOR_EMAIL", "fixtures@helixflow.invalid"),
            ("GIT_AUTHOR_DATE", "2026-01-01T00:00:00+0000"),
            ("GIT_COMMITTER_NAME", "helixflow"),
            ("GIT_COMMITTER_EMAIL", "fixtures@helixflow.invalid"),
            ("GIT_COMMITTER_DATE", "2026-01-01T00:00:00+0000"),
        ];
        git(&["init", "--quiet", "--bare", bare_text], &same_everywhere);
        let tree = [
            "--git-dir",
            bare_text,
            "--work-tree",
            work.to_str().unwrap(),
        ];
        for args in [
            &["add", "-A"][..],
            &["commit", "--quiet", "-m", "fixtures"],
            &["tag", "v1"],
        ] {
            git(&[&tree[..], args].concat(), &same_everywhere);
        }
        let cache = if code == "HF512" {
            "tests/fixtures/lint/HF512/not-a-folder"
        } else {
            ".cache"
        };
        let env = [
            ("GIT_CONFIG_GLOBAL", "/dev/null".to_owned()),
            ("GIT_CONFIG_NOSYSTEM", "1".to_owned()),
            ("GIT_CONFIG_COUNT", "1".to_owned()),
            (
                "GIT_CONFIG_KEY_0",
                format!("url.file://{bare_text}.insteadOf"),
            ),
            (
                "GIT_CONFIG_VALUE_0",
                "https://fixtures.helixflow.invalid/lib.git".to_owned(),
            ),
            ("HELIXFLOW_CACHE", cache.to_owned()),
        ];
        let args = if code == "HF513" {
            vec!["--offline".to_owned()]
        } else {
            Vec::new()
        };
        Remote {
            _dir: dir,
            env: env.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
            args,
        }
    }
}

#[test]
fn every_code_has_a_triggering_and_a_clean_fixture() {
    let generated = tempfile::tempdir().unwrap();
    let crate_root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // `isolation "worktree"` is judged by where the workspace is: the bad fixture is read
    // outside any git repository, the good one inside one, wherever this crate is.
    let outside_git = fixture_copy("HF404", false);
    let inside_git = fixture_copy("HF404", true);
    for rule in ALL_RULES {
        // The fixtures of remote imports are read in copies of their own (each writes its lock
        // beside itself), in a fresh cache.
        let remote = REMOTE.contains(&rule.code).then(|| Remote::new(rule.code));
        let copy = remote.as_ref().map(|_| fixture_copy(rule.code, false));
        let (bad_root, good_root) = if rule.code == "HF404" {
            (outside_git.path(), inside_git.path())
        } else if let Some(copy) = &copy {
            (copy.path(), copy.path())
        } else {
            (crate_root, crate_root)
        };
        let dir = fixtures().join(rule.code);
        let (bad, good) = if rule.code == "HF005" {
            // A file over the limits is generated rather than kept in the repository: 50,001
            // nodes, and a pipeline that fits.
            let bad = generated.path().join("bad.kdl");
            let good = generated.path().join("good.kdl");
            let nodes: String = (0..50_001).map(|i| format!("note{i} \"x\"\n")).collect();
            std::fs::write(&bad, format!("pipeline \"p\"\n{nodes}")).unwrap();
            std::fs::write(&good, "pipeline \"p\"\nphase \"a\" { run \"true\"; }\n").unwrap();
            (bad, good)
        } else if rule.code == "HF003" {
            // Files over 32 KiB are generated rather than kept in the repository: past that size
            // only plain well-formed KDL is read, so the bad one has a syntax error at its end.
            let bad = generated.path().join("bad.kdl");
            let good = generated.path().join("good.kdl");
            let base = "pipeline \"p\"\nphase \"a\" {\n    run \"true\"\n}\n";
            let large = format!("{base}// {}\n", "x".repeat(1 << 20));
            std::fs::write(
                &bad,
                format!("{large}phase \"b\" {{ run \"x\"; retries 1.; }}\n"),
            )
            .unwrap();
            std::fs::write(&good, &large).unwrap();
            (bad, good)
        } else {
            (
                bad_root
                    .join(dir.strip_prefix(crate_root).unwrap())
                    .join("bad.kdl"),
                good_root
                    .join(dir.strip_prefix(crate_root).unwrap())
                    .join("good.kdl"),
            )
        };
        assert!(
            bad.is_file() && good.is_file(),
            "{} needs bad.kdl and good.kdl in {}",
            rule.code,
            dir.display()
        );
        let bad_root = if rule.code == "HF005" {
            generated.path()
        } else {
            bad_root
        };
        let found = codes(bad_root, &bad, remote.as_ref());
        assert!(
            found.iter().any(|c| c == rule.code),
            "{}: bad.kdl did not trigger it; found {found:?}",
            rule.code
        );
        let found = codes(good_root, &good, remote.as_ref());
        assert!(
            !found.iter().any(|c| c == rule.code),
            "{}: good.kdl triggered it",
            rule.code
        );

        if rule.code != "HF003" {
            let (code, human) = lint_in(bad_root, &bad, "human", remote.as_ref());
            let expected = i32::from(rule.severity == helixflow::Severity::Error);
            assert_eq!(code, expected, "{}: exit code", rule.code);
            insta::assert_snapshot!(format!("lint-{}", rule.code), human);
        }
    }
}
