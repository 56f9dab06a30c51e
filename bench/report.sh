#!/usr/bin/env bash
# The HTML report of a large run: `helixflow report` for a run of PHASES phases (default 200) that
# each took 3 attempts (two failures with feedback, then a pass; `run` steps, each failure printing
# 40 lines), against `helixflow show` of the same run (the table, read from the same journal), as
# the reference: the two commands alternate, RUNS times each (after one warm-up), and the script
# prints the median wall time and CPU time (user and system) of each, the ratio, and the report's
# size. On a machine busy with other work, the CPU time says more than the wall time.
#
# The run is made once, for real, by the release build. The time measured is the whole command:
# starting helixflow, reading the journal and every attempt's folder, rendering, writing the file
# through a rename.
#
# Usage: bench/report.sh [RUNS] [PHASES]     (defaults: 20, 200)
# Environment: HELIXFLOW (a helixflow binary instead of building target/release/helixflow).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-20}
phases=${2:-200}
if [ -z "${HELIXFLOW:-}" ]; then
    cargo build --release --quiet
    HELIXFLOW=$(pwd)/target/release/helixflow
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/helixflow-report.XXXXXX")
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/work" "$dir/marks"
python3 - "$dir/work/pipeline.kdl" "$phases" <<'PY'
import sys
path, phases = sys.argv[1], int(sys.argv[2])
out = ['pipeline "report-bench" {\n    max-parallel 8\n    retry-budget 1000\n}\n']
for n in range(phases):
    deps = f'\n    depends-on "p{n - 8}"' if n >= 8 else ""
    # Fails on its first two attempts (a marker file outside the workspace counts them).
    out.append(f'''phase "p{n}" {{{deps}
    run "if [ -e ../marks/p{n}.2 ]; then exit 0; fi; if [ -e ../marks/p{n}.1 ]; then touch ../marks/p{n}.2; else touch ../marks/p{n}.1; fi; seq 1 40 | sed 's/^/failing test line /' >&2; exit 1"
    retries 2
}}
''')
open(path, "w").write("".join(out))
PY
(cd "$dir/work" && "$HELIXFLOW" run --no-progress --no-report >/dev/null 2>&1) || { echo "the run failed"; exit 1; }
attempts=$(grep -c '"event":"attempt-finished"' "$dir/work/.helixflow/runs/latest/events.jsonl")
echo "run: $phases phases, $attempts attempts"

python3 - "$runs" "$HELIXFLOW" "$dir/work" <<'PY'
import os, resource, statistics, subprocess, sys, time
runs, helixflow, work = int(sys.argv[1]), sys.argv[2], sys.argv[3]
commands = {
    "helixflow report": [helixflow, "report", "-o", os.path.join(work, "..", "report.html")],
    "helixflow show": [helixflow, "show"],
}
wall = {name: [] for name in commands}
cpu = {name: [] for name in commands}
for cmd in commands.values():
    subprocess.run(cmd, cwd=work, stdout=subprocess.DEVNULL, check=True)
for _ in range(runs):
    for name, cmd in commands.items():
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(cmd, cwd=work, stdout=subprocess.DEVNULL, check=True)
        wall[name].append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu[name].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
# The machine's load counts: a wall time taken beside other work is that work's too.
print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
for name in commands:
    w, c = wall[name], cpu[name]
    print(f"{name:<18} wall median {statistics.median(w) * 1000:6.1f} ms (min {min(w) * 1000:.1f})"
          f"   cpu (user+sys) median {statistics.median(c) * 1000:5.1f} ms")
ratio = statistics.median(wall["helixflow report"]) / statistics.median(wall["helixflow show"])
print(f"report / show (wall): {ratio:.2f}")
size = os.path.getsize(os.path.join(work, "..", "report.html"))
print(f"report.html: {size / 1024:.0f} KiB")
PY
