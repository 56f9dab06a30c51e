//! Times `Snapshot::take` against `git status --porcelain` on a prepared tree (`bench/snapshot.sh`
//! makes one and runs this).
//!
//! Usage: `cargo bench --bench snapshot -- DIR [RUNS]`, or `HELIXFLOW_BENCH_DIR=DIR`. DIR should be
//! a git repository with everything committed, so that `git status` compares against its index.
//! "Cold" means without a previous snapshot (every file read); the operating system's page cache
//! is warm in every case, as it is for `git status`. Wall time is what a user waits; CPU time
//! (user + system, all threads) is the work done, and is steadier on a busy machine.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use helixflow::{Snapshot, SnapshotOptions};

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

#[allow(
    clippy::too_many_lines,
    reason = "not yet cut into named steps; a known exception to remove"
)]
fn bench(dir: &Path, runs: usize) -> std::io::Result<()> {
    let plain = SnapshotOptions {
        exclude: vec![PathBuf::from(".helixflow")],
        ..SnapshotOptions::default()
    };
    let keeping = SnapshotOptions {
        keep_contents_under: Some(1 << 20),
        ..plain.clone()
    };
    let git = dir.join(".git").exists();

    let mut cold_samples = Vec::with_capacity(runs);
    let mut cold = Snapshot::default();
    for _ in 0..runs {
        let (snapshot, sample) = measure(Who::Me, || Snapshot::take(dir, &plain, None))?;
        cold_samples.push(sample);
        cold = snapshot;
    }

    // git and the warm snapshot take turns, so that both meet the same load on the machine; one
    // untimed turn first warms git's index and the shortcut's previous snapshot.
    if git {
        git_status(dir)?;
    }
    let mut previous = Snapshot::take(dir, &plain, Some(&cold))?;
    let (mut git_samples, mut warm_samples, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let mut warm_hashed = 0;
    for _ in 0..runs {
        let (snapshot, warm) = measure(Who::Me, || Snapshot::take(dir, &plain, Some(&previous)))?;
        warm_samples.push(warm);
        warm_hashed = snapshot.files_hashed();
        previous = snapshot;
        if git {
            let ((), git) = measure(Who::Children, || git_status(dir))?;
            git_samples.push(git);
            ratios.push(warm.wall.as_secs_f64() / git.wall.as_secs_f64());
        }
    }

    let (mut kept_previous, kept_cold) = measure(Who::Me, || Snapshot::take(dir, &keeping, None))?;
    let mut kept_samples = Vec::with_capacity(runs);
    let mut kept_hashed = 0;
    for _ in 0..runs {
        let (snapshot, sample) = measure(Who::Me, || {
            Snapshot::take(dir, &keeping, Some(&kept_previous))
        })?;
        kept_samples.push(sample);
        kept_hashed = snapshot.files_hashed();
        kept_previous = snapshot;
    }

    let mut walk_samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        walk_samples.push(
            measure(Who::Me, || {
                walk_only(dir);
                Ok(())
            })?
            .1,
        );
    }

    println!(
        "tree: {} ({} files in the snapshot)",
        dir.display(),
        cold.len()
    );
    let git_stats = git.then(|| Stats::of(git_samples));
    if let Some(git) = &git_stats {
        println!("git status --porcelain           {git}");
    }
    let warm = Stats::of(warm_samples);
    println!(
        "snapshot cold (no previous)      {}   hashed {}",
        Stats::of(cold_samples),
        cold.files_hashed()
    );
    println!("snapshot warm (the shortcut)     {warm}   hashed {warm_hashed}");
    println!(
        "snapshot cold, keeping contents  {}",
        Stats::of(vec![kept_cold])
    );
    println!(
        "snapshot warm, keeping contents  {}   hashed {kept_hashed}",
        Stats::of(kept_samples)
    );
    println!(
        "walk only (ignore crate, 0 stat) {}",
        Stats::of(walk_samples)
    );
    if let Some(git) = &git_stats {
        ratios.sort_by(f64::total_cmp);
        let ratio = |ours: Duration, theirs: Duration| ours.as_secs_f64() / theirs.as_secs_f64();
        println!(
            "ratio helixflow/git, warm: wall {:.2} (median of {} alternating turns), {:.2} (least); \
             CPU {:.2} (medians), {:.2} (least)",
            ratios[ratios.len() / 2],
            ratios.len(),
            ratio(warm.min, git.min),
            ratio(warm.cpu, git.cpu),
            ratio(warm.cpu_min, git.cpu_min),
        );
    }
    Ok(())
}

fn git_status(dir: &Path) -> std::io::Result<()> {
    let status = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["status", "--porcelain"])
        .stdout(Stdio::null())
        .status()?;
    if !status.success() {
        return Err(std::io::Error::other(format!(
            "git status failed: {status}"
        )));
    }
    Ok(())
}

/// The `ignore` crate's parallel walk with the same ignore rules, doing nothing per entry: what the
/// walker snapshots use on other systems than Linux costs by itself, for comparison.
fn walk_only(dir: &Path) {
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
}

/// Whose CPU time a measurement counts.
#[derive(Clone, Copy)]
enum Who {
    /// This process, all its threads.
    Me,
    /// Child processes waited for.
    Children,
}

/// Wall and CPU time of one run.
#[derive(Clone, Copy)]
struct Sample {
    wall: Duration,
    cpu: Duration,
}

fn measure<T>(who: Who, run: impl FnOnce() -> std::io::Result<T>) -> std::io::Result<(T, Sample)> {
    let (cpu_before, start) = (cpu_time(who), Instant::now());
    let value = run()?;
    let wall = start.elapsed();
    let cpu = cpu_time(who).saturating_sub(cpu_before);
    Ok((value, Sample { wall, cpu }))
}

/// User plus system time so far.
fn cpu_time(who: Who) -> Duration {
    let target = match who {
        Who::Me => libc::RUSAGE_SELF,
        Who::Children => libc::RUSAGE_CHILDREN,
    };
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: `usage` is writable memory for one rusage, which getrusage fills when it returns 0.
    if unsafe { libc::getrusage(target, usage.as_mut_ptr()) } != 0 {
        return Duration::ZERO;
    }
    // SAFETY: getrusage returned 0.
    let usage = unsafe { usage.assume_init() };
    let time = |t: libc::timeval| {
        Duration::new(
            u64::try_from(t.tv_sec).unwrap_or(0),
            u32::try_from(t.tv_usec).unwrap_or(0) * 1000,
        )
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// Median and least wall and CPU time of several runs. On a busy machine the least is the best
/// estimate of the work itself: interference only ever adds time.
struct Stats {
    median: Duration,
    min: Duration,
    cpu: Duration,
    cpu_min: Duration,
    runs: usize,
}

impl Stats {
    fn of(samples: Vec<Sample>) -> Stats {
        let mut wall: Vec<Duration> = samples.iter().map(|s| s.wall).collect();
        let mut cpu: Vec<Duration> = samples.iter().map(|s| s.cpu).collect();
        wall.sort_unstable();
        cpu.sort_unstable();
        Stats {
            median: wall[wall.len() / 2],
            min: wall[0],
            cpu: cpu[cpu.len() / 2],
            cpu_min: cpu[0],
            runs: samples.len(),
        }
    }
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "wall median {} min {}  CPU median {} min {} ({} runs)",
            ms(self.median),
            ms(self.min),
            ms(self.cpu),
            ms(self.cpu_min),
            self.runs
        )
    }
}

fn ms(duration: Duration) -> String {
    format!("{:7.1} ms", duration.as_secs_f64() * 1000.0)
}
