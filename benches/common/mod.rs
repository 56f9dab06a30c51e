//! What the benchmarks share.

use std::path::Path;
use std::process::Command;

/// A pipeline of `phases` phases from `bench/gen_pipeline.py` in `style` (`mixed` or `templated`).
pub(crate) fn generate(style: &str, phases: usize) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/gen_pipeline.py");
    let output = Command::new("python3")
        .arg(&script)
        .arg(phases.to_string())
        .args(["--style", style])
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 {}: {e}", script.display()));
    assert!(
        output.status.success(),
        "gen_pipeline.py failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("the generator writes UTF-8")
}
