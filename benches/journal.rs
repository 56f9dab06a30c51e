//! The cost of one attempt's place in the journal, without the attempt: the folders and files that
//! `helixflow run` creates for a `run` step with no gates (`phases/<phase>/attempt-1/` with
//! `stdout.log`, `stderr.log` and `gates.json`), made through the same `RunDir` code, one attempt
//! after another on one thread. `bench/schedule.sh --profile` runs this beside its per-step CPU
//! figures for helixflow, ninja and make: it is the part of helixflow's overhead that a tool
//! without a per-attempt record does not have.
//!
//! Usage: `cargo bench --bench journal -- DIR [ATTEMPTS] [ROUNDS]` (default 1000 attempts, 5
//! rounds). Each round makes a new run folder under `DIR/runs`; nothing is deleted, as in daily use.
//! Prints the CPU time (user + system) per attempt of each round and their median.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use helixflow::RunDir;

fn main() -> ExitCode {
    // `cargo bench` passes `--bench`; everything else that starts with `--` is not ours either.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with("--"))
        .collect();
    let Some(dir) = args.first().map(PathBuf::from) else {
        eprintln!("usage: cargo bench --bench journal -- DIR [ATTEMPTS] [ROUNDS]");
        return ExitCode::from(2);
    };
    let number = |index: usize, default: usize| {
        args.get(index)
            .and_then(|value| value.parse().ok())
            .unwrap_or(default)
            .max(1)
    };
    let (attempts, rounds) = (number(1, 1000), number(2, 5));
    match bench(&dir, attempts, rounds) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

fn bench(dir: &Path, attempts: usize, rounds: usize) -> io::Result<()> {
    let runs = dir.join("runs");
    let mut per_attempt = Vec::with_capacity(rounds);
    for round in 1..=rounds {
        let run = RunDir::create(&runs)?;
        let before = cpu_time()?;
        for index in 0..attempts {
            let folder = run.attempt_dir(&format!("p{index:05}"), 1)?;
            // As the engine does: the logs are the child's stdout and stderr, created empty, and
            // `gates.json` is written when the attempt is judged.
            drop(File::create(folder.join("stdout.log"))?);
            drop(File::create(folder.join("stderr.log"))?);
            std::fs::write(folder.join("gates.json"), b"[]")?;
        }
        let spent = cpu_time()?.checked_sub(before).unwrap();
        let micros = spent.as_secs_f64() * 1e6 / attempts as f64;
        println!("round {round}: {micros:.1} µs CPU per attempt ({attempts} attempts)");
        per_attempt.push(micros);
    }
    per_attempt.sort_by(f64::total_cmp);
    println!(
        "journal floor: {:.1} µs CPU per attempt (median of {rounds} rounds; 2 folders, 3 files)",
        per_attempt[per_attempt.len() / 2]
    );
    Ok(())
}

/// User plus system time of this process so far.
fn cpu_time() -> io::Result<Duration> {
    // SAFETY: `getrusage` only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &raw mut usage) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    Ok(time(usage.ru_utime) + time(usage.ru_stime))
}
