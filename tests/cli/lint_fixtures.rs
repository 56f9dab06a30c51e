//! Every diagnostic code has a fixture folder `tests/fixtures/lint/<CODE>/` with `bad.kdl`, which
//! must trigger the code, and `good.kdl`, which must not. The human output of each bad fixture is
//! snapshotted.

use std::path::{Path, PathBuf};
use std::process::Command;

use helixflow::ALL_RULES;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lint")
}

/// Runs lint with JSON output from the crate root, so paths in the output are relative and stable.
fn lint(path: &Path, format: &str) -> (i32, String) {
    let relative = path
        .strip_prefix(env!("CARGO_MANIFEST_DIR"))
        .unwrap_or(path);
    let output = Command::new(env!("CARGO_BIN_EXE_helixflow"))
        .args(["lint", "--format", format])
        .arg(relative)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("NO_COLOR", "1")
        .env_remove("HELIXFLOW_PATH")
        .output()
        .expect("helixflow runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

fn codes(path: &Path) -> Vec<String> {
    let (_, stdout) = lint(path, "json");
    let json: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    json.as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn every_code_has_a_triggering_and_a_clean_fixture() {
    let generated = tempfile::tempdir().unwrap();
    for rule in ALL_RULES {
        let dir = fixtures().join(rule.code);
        let (bad, good) = if rule.code == "HF003" {
            // Files over 1 MiB are generated rather than kept in the repository: past that size
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
            (dir.join("bad.kdl"), dir.join("good.kdl"))
        };
        assert!(
            bad.is_file() && good.is_file(),
            "{} needs bad.kdl and good.kdl in {}",
            rule.code,
            dir.display()
        );
        let found = codes(&bad);
        assert!(
            found.iter().any(|c| c == rule.code),
            "{}: bad.kdl did not trigger it; found {found:?}",
            rule.code
        );
        let found = codes(&good);
        assert!(
            !found.iter().any(|c| c == rule.code),
            "{}: good.kdl triggered it",
            rule.code
        );

        if rule.code != "HF003" {
            let (code, human) = lint(&bad, "human");
            let expected = i32::from(rule.severity == helixflow::Severity::Error);
            assert_eq!(code, expected, "{}: exit code", rule.code);
            insta::assert_snapshot!(format!("lint-{}", rule.code), human);
        }
    }
}
