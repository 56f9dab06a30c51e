//! In-process cost of `helixflow::compile` on generated pipelines of growing size.
//!
//! The pipelines come from `bench/gen_pipeline.py`, so this benchmark and `bench/lint.sh` (which
//! times the whole `helixflow lint` process) measure the same files. For each size it prints the
//! median and fastest compile, the median per phase, and how much of the compile is the parse
//! (screening and the KDL parser) rather than decoding and checking.
//!
//! Run with `cargo bench --bench lint`; `cargo bench --bench lint -- 1000` runs only the cases
//! whose label contains `1000`.

mod common;

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use helixflow::FileId;
use helixflow::kdl::parse;
use helixflow::{Loader, Options};

/// The generated files use no imports or prompt files, so nothing needs to exist; the bench
/// measures the compiler, not the disk.
struct NoFiles;

impl Loader for NoFiles {
    fn read(&self, _path: &Path) -> io::Result<String> {
        Err(io::Error::from(io::ErrorKind::NotFound))
    }

    fn is_file(&self, _path: &Path) -> bool {
        false
    }

    fn search_path(&self) -> Vec<PathBuf> {
        Vec::new()
    }
}

/// The cases: generator style and phase count. The `mixed` style is about 350 bytes a phase and
/// passes the 1 MiB file limit near 3,000 phases, so 10,000 phases are measured in the `templated`
/// style (every phase body from a template) — with 1,000 of the same style to compare against.
const CASES: &[(&str, usize)] = &[
    ("mixed", 10),
    ("mixed", 20),
    ("mixed", 100),
    ("mixed", 1_000),
    ("templated", 1_000),
    ("templated", 10_000),
];

/// How long each measurement may take. The 10,000-phase case takes about 2 s per compile, so it
/// stops at the minimum number of runs; the whole benchmark stays under a minute on an idle
/// two-core machine, and under two on a busy one.
const TIME_PER_CASE: Duration = Duration::from_secs(2);
const MIN_RUNS: usize = 3;
const MAX_RUNS: usize = 200;

/// Large enough that the benchmark measures the parser instead of timing out.
const PARSE_BUDGET: Duration = Duration::from_mins(2);

/// Runs `f` until the time or run limit, after one warm-up run; returns the sorted durations.
fn measure(mut f: impl FnMut()) -> Vec<Duration> {
    f();
    let mut times = Vec::new();
    let start = Instant::now();
    while times.len() < MIN_RUNS || (times.len() < MAX_RUNS && start.elapsed() < TIME_PER_CASE) {
        let run = Instant::now();
        f();
        times.push(run.elapsed());
    }
    times.sort();
    times
}

fn median(times: &[Duration]) -> Duration {
    times[times.len() / 2]
}

fn millis(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

fn main() {
    // `cargo bench` passes `--bench`; any other argument filters the cases by label.
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let options = Options {
        parse_budget: PARSE_BUDGET,
        // As `helixflow lint` reads files.
        accept_library: true,
    };
    println!(
        "{:<18} {:>9} {:>6} {:>12} {:>12} {:>10} {:>12} {:>7}",
        "case", "bytes", "runs", "median ms", "min ms", "ns/phase", "parse ms", "parse %"
    );
    for &(style, phases) in CASES {
        let label = format!("{style}-{phases}");
        if !filters.is_empty() && !filters.iter().any(|f| label.contains(f.as_str())) {
            continue;
        }
        let text = common::generate(style, phases);
        let path = PathBuf::from(format!("{label}.kdl"));

        let compilation = helixflow::compile(&path, &text, &NoFiles, options);
        // A benchmark of a file with findings would measure the error paths, not the compiler.
        assert!(
            compilation.diagnostics.is_empty() && compilation.pipeline.is_some(),
            "{label} does not compile cleanly: {:?}",
            compilation
                .diagnostics
                .iter()
                .map(|d| format!("{} {}", d.code(), d.message))
                .collect::<Vec<_>>()
        );
        drop(compilation);

        let compile = measure(|| {
            std::hint::black_box(helixflow::compile(&path, &text, &NoFiles, options));
        });
        let parse = measure(|| {
            let parsed = parse::parse(&text, FileId(0), PARSE_BUDGET);
            assert!(parsed.is_ok(), "{label} does not parse");
            std::hint::black_box(parsed.ok());
        });
        let compile_median = median(&compile);
        let parse_median = median(&parse);
        let per_phase = compile_median.as_nanos() / phases as u128;
        println!(
            "{:<18} {:>9} {:>6} {:>12} {:>12} {:>10} {:>12} {:>6.0}%",
            label,
            text.len(),
            compile.len(),
            millis(compile_median),
            millis(compile[0]),
            per_phase,
            millis(parse_median),
            100.0 * parse_median.as_secs_f64() / compile_median.as_secs_f64()
        );
    }
}
