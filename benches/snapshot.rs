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

    let git = if dir.join(".git").exists() {
        // One run first, so that git's own caches (the index, the untracked cache if enabled) are
        // as warm as they are for a user who runs it twice.
        git_status(dir)?;
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            times.push(git_status(dir)?);
        }
        Some(Stats::of(times))
    } else {
        None
    };

    let mut cold_times = Vec::with_capacity(runs);
    let mut cold = Snapshot::default();
    for _ in 0..runs {
        let start = Instant::now();
        cold = Snapshot::take(dir, &plain, None)?;
        cold_times.push(start.elapsed());
    }
    let cold_stats = Stats::of(cold_times);

    let (warm_stats, warm_hashed) = warm(dir, &plain, cold.clone(), runs)?;

    let start = Instant::now();
    let kept = Snapshot::take(dir, &keeping, None)?;
    let kept_cold = start.elapsed();
    let (kept_warm_stats, kept_warm_hashed) = warm(dir, &keeping, kept, runs)?;

    let walk_stats = Stats::of((0..runs).map(|_| walk_only(dir)).collect());

    println!(
        "tree: {} ({} files in the snapshot)",
        dir.display(),
        cold.len()
    );
    if let Some(git) = &git {
        println!("git status --porcelain           {git}");
    }
    println!(
        "snapshot cold (no previous)      {cold_stats}   hashed {}",
        cold.files_hashed()
    );
    println!("snapshot warm (the shortcut)     {warm_stats}   hashed {warm_hashed}");
    println!("snapshot cold, keeping contents  {}", ms(kept_cold));
    println!("snapshot warm, keeping contents  {kept_warm_stats}   hashed {kept_warm_hashed}");
    println!("walk only (ignore crate, 0 stat) {walk_stats}");
    if let Some(git) = &git {
        let ratio = warm_stats.median.as_secs_f64() / git.median.as_secs_f64();
        println!("ratio helixflow/git (warm, median): {ratio:.2}");
    }
    Ok(())
}

/// Warm snapshots, each with the one before as `previous`, as the engine chains them.
fn warm(
    dir: &Path,
    options: &SnapshotOptions,
    mut previous: Snapshot,
    runs: usize,
) -> std::io::Result<(Stats, usize)> {
    let mut times = Vec::with_capacity(runs);
    let mut hashed = 0;
    for _ in 0..runs {
        let start = Instant::now();
        let snapshot = Snapshot::take(dir, options, Some(&previous))?;
        times.push(start.elapsed());
        hashed = snapshot.files_hashed();
        previous = snapshot;
    }
    Ok((Stats::of(times), hashed))
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
