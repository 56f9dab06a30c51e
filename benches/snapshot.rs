//! Times `Snapshot::take` against `git status --porcelain` on a prepared tree (`bench/snapshot.sh`
//! makes one and runs this).
//!
//! Usage: `cargo bench --bench snapshot -- DIR [RUNS]`, or `HELIXFLOW_BENCH_DIR=DIR`. DIR should be
//! a git repository with everything committed, so that `git status` compares against its index.
//! "Cold" means without a previous snapshot (every file read); the operating system's page cache
//! is warm in every case, as it is for `git status`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use helixflow::verify::snapshot::{Snapshot, SnapshotOptions};

fn main() -> ExitCode {
    // `cargo bench` passes `--bench`; everything else that starts with `--` is not ours either.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with("--"))
        .collect();
    let dir = args
        .first()
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HELIXFLOW_BENCH_DIR").map(PathBuf::from));
    let Some(dir) = dir else {
        eprintln!(
            "usage: cargo bench --bench snapshot -- DIR [RUNS]   (or HELIXFLOW_BENCH_DIR=DIR)"
        );
        return ExitCode::from(2);
    };
    let runs = args
        .get(1)
        .and_then(|runs| runs.parse().ok())
        .unwrap_or(7_usize)
        .max(1);
    match bench(&dir, runs) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

fn bench(dir: &Path, runs: usize) -> std::io::Result<()> {
    let plain = SnapshotOptions {
        exclude: vec![PathBuf::from(".helixflow")],
        keep_contents_under: None,
    };
    let keeping = SnapshotOptions {
        keep_contents_under: Some(1 << 20),
        ..plain.clone()
    };
    let git = dir.join(".git").exists();

    let mut cold_times = Vec::with_capacity(runs);
    let mut cold = Snapshot::default();
    for _ in 0..runs {
        let start = Instant::now();
        cold = Snapshot::take(dir, &plain, None)?;
        cold_times.push(start.elapsed());
    }

    // git and the warm snapshot take turns, so that both meet the same load on the machine; one
    // untimed turn first warms git's index and the shortcut's previous snapshot.
    if git {
        git_status(dir)?;
    }
    let mut previous = Snapshot::take(dir, &plain, Some(&cold))?;
    let (mut git_times, mut warm_times, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let mut warm_hashed = 0;
    for _ in 0..runs {
        let start = Instant::now();
        let snapshot = Snapshot::take(dir, &plain, Some(&previous))?;
        let warm = start.elapsed();
        warm_times.push(warm);
        warm_hashed = snapshot.files_hashed();
        previous = snapshot;
        if git {
            let git = git_status(dir)?;
            git_times.push(git);
            ratios.push(warm.as_secs_f64() / git.as_secs_f64());
        }
    }

    let start = Instant::now();
    let mut kept_previous = Snapshot::take(dir, &keeping, None)?;
    let kept_cold = start.elapsed();
    let mut kept_times = Vec::with_capacity(runs);
    let mut kept_hashed = 0;
    for _ in 0..runs {
        let start = Instant::now();
        let snapshot = Snapshot::take(dir, &keeping, Some(&kept_previous))?;
        kept_times.push(start.elapsed());
        kept_hashed = snapshot.files_hashed();
        kept_previous = snapshot;
    }

    let walk = Stats::of((0..runs).map(|_| walk_only(dir)).collect());
    let warm = Stats::of(warm_times);

    println!(
        "tree: {} ({} files in the snapshot)",
        dir.display(),
        cold.len()
    );
    if git {
        println!("git status --porcelain           {}", Stats::of(git_times));
    }
    println!(
        "snapshot cold (no previous)      {}   hashed {}",
        Stats::of(cold_times),
        cold.files_hashed()
    );
    println!("snapshot warm (the shortcut)     {warm}   hashed {warm_hashed}");
    println!("snapshot cold, keeping contents  {}", ms(kept_cold));
    println!(
        "snapshot warm, keeping contents  {}   hashed {kept_hashed}",
        Stats::of(kept_times)
    );
    println!("walk only (ignore crate, 0 stat) {walk}");
    if git {
        ratios.sort_by(f64::total_cmp);
        println!(
            "ratio helixflow/git (warm, median of {} alternating turns): {:.2}",
            ratios.len(),
            ratios[ratios.len() / 2]
        );
    }
    Ok(())
}

fn git_status(dir: &Path) -> std::io::Result<Duration> {
    let start = Instant::now();
    let status = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["status", "--porcelain"])
        .stdout(Stdio::null())
        .status()?;
    let elapsed = start.elapsed();
    if !status.success() {
        return Err(std::io::Error::other(format!(
            "git status failed: {status}"
        )));
    }
    Ok(elapsed)
}

/// The same parallel walk with the same ignore rules, doing nothing per entry: the floor the
/// snapshot's own work (stat, lookup, hashing) adds to.
fn walk_only(dir: &Path) -> Duration {
    let start = Instant::now();
    let mut builder = ignore::WalkBuilder::new(dir);
    builder
        .hidden(false)
        .ignore(false)
        .require_git(false)
        .add_custom_ignore_filename(".helixflowignore")
        .filter_entry(|entry| entry.file_name() != ".git");
    builder
        .build_parallel()
        .run(|| Box::new(|_| ignore::WalkState::Continue));
    start.elapsed()
}

/// Median and fastest of several runs.
struct Stats {
    median: Duration,
    min: Duration,
    runs: usize,
}

impl Stats {
    fn of(mut times: Vec<Duration>) -> Stats {
        times.sort_unstable();
        Stats {
            median: times[times.len() / 2],
            min: times[0],
            runs: times.len(),
        }
    }
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "median {} min {} ({} runs)",
            ms(self.median),
            ms(self.min),
            self.runs
        )
    }
}

fn ms(duration: Duration) -> String {
    format!("{:8.1} ms", duration.as_secs_f64() * 1000.0)
}
