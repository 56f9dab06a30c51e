//! Throughput of the `syntax` gate's checker over a list of files.
//!
//! `cargo bench --bench syntax -- FILE_LIST [INVALID_OUT]` (or `HELIXFLOW_SYNTAX_FILES` and
//! `HELIXFLOW_SYNTAX_INVALID`): checks every file named in `FILE_LIST` (one path a line) with
//! `check_file` on `HELIXFLOW_SYNTAX_THREADS` threads (default 2), prints the throughput, and writes
//! each file it finds invalid to `INVALID_OUT` as `path<TAB>line:column: message` (its first error).
//! `bench/syntax.sh` compares those verdicts with `CPython`'s.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use helixflow::syntax::check_file;

/// What one thread found: bytes read, and the first error of every invalid file by list index.
struct Share {
    bytes: u64,
    invalid: Vec<(usize, String)>,
}

#[allow(
    clippy::too_many_lines,
    reason = "not yet cut into named steps; a known exception to remove"
)]
fn main() -> ExitCode {
    // cargo passes `--bench` to a harness-less bench; flags are not ours.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let Some(list) = args
        .first()
        .cloned()
        .or_else(|| std::env::var("HELIXFLOW_SYNTAX_FILES").ok())
    else {
        eprintln!("usage: cargo bench --bench syntax -- FILE_LIST [INVALID_OUT]");
        return ExitCode::from(2);
    };
    let invalid_out = args
        .get(1)
        .cloned()
        .or_else(|| std::env::var("HELIXFLOW_SYNTAX_INVALID").ok());
    let threads = std::env::var("HELIXFLOW_SYNTAX_THREADS")
        .ok()
        .and_then(|t| t.parse::<usize>().ok())
        .filter(|t| *t > 0)
        .unwrap_or(2);
    let files: Vec<PathBuf> = match std::fs::read_to_string(&list) {
        Ok(text) => text
            .lines()
            .filter(|l| !l.is_empty())
            .map(PathBuf::from)
            .collect(),
        Err(error) => {
            eprintln!("cannot read {list}: {error}");
            return ExitCode::from(2);
        }
    };

    let next = AtomicUsize::new(0);
    let cpu_before = cpu_seconds();
    let started = Instant::now();
    // Threads take the next file from a shared counter, so one slow folder does not idle the other.
    let shares: Vec<Share> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut share = Share {
                        bytes: 0,
                        invalid: Vec::new(),
                    };
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(path) = files.get(i) else {
                            return share;
                        };
                        share.bytes += std::fs::metadata(path).map_or(0, |m| m.len());
                        if let Some(errors) = check_file(path)
                            && let Some(first) = errors.first()
                        {
                            let message = format!(
                                "{}:{}: {}",
                                first.line,
                                first.column,
                                first.message.replace(['\n', '\t'], " ")
                            );
                            share.invalid.push((i, message));
                        }
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a checker thread panicked"))
            .collect()
    });
    let seconds = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_before;

    let bytes: u64 = shares.iter().map(|s| s.bytes).sum();
    let mut invalid: Vec<(usize, String)> = shares.into_iter().flat_map(|s| s.invalid).collect();
    invalid.sort();
    let megabytes = bytes as f64 / 1_000_000.0;
    // Whoever reads the figures may stop reading early (`| head`); that is not a failure.
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(
        stdout,
        "syntax: {} files, {megabytes:.1} MB, {threads} threads, {seconds:.3} s ({cpu:.3} s CPU): \
         {:.1} MB/s, {:.0} files/s, {} invalid",
        files.len(),
        megabytes / seconds,
        files.len() as f64 / seconds,
        invalid.len()
    );
    let _ = writeln!(
        stdout,
        "syntax-result files={} bytes={bytes} threads={threads} seconds={seconds:.6} \
         cpu_seconds={cpu:.6} invalid={}",
        files.len(),
        invalid.len()
    );
    if let Some(out) = invalid_out {
        let written = std::fs::File::create(&out).and_then(|mut file| {
            for (i, message) in &invalid {
                writeln!(file, "{}\t{message}", files[*i].display())?;
            }
            Ok(())
        });
        if let Err(error) = written {
            eprintln!("cannot write {out}: {error}");
            return ExitCode::from(3);
        }
    }
    ExitCode::SUCCESS
}

/// User plus system CPU time of this process so far: on a loaded machine the wall time says how
/// busy the neighbours were, the CPU time what the checker cost.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct it is given, which is zeroed and ours.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &raw mut usage) != 0 {
            return 0.0;
        }
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}
