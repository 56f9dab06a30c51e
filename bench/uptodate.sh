#!/usr/bin/env bash
# The cost of doing nothing: a no-op `helixflow run` and `helixflow status` on a fully up-to-date
# 1,000-phase layered DAG (3 input and 2 output files per phase; bench/gen_uptodate.py), against
# ninja's no-op build and Task's up-to-date check (`sources`/`generates`, checksums) on the same
# graph and files.
#
# Each tool builds the DAG once, then the no-op command is timed RUNS times (after one warm-up);
# the script prints the median wall time of each and the ratios helixflow / peer. ninja and Task
# come from PyPI (`ninja`, `go-task-bin`) into a virtual environment cached in
# ${HELIXFLOW_BENCH_CACHE:-~/.cache/helixflow-bench}.
#
# Usage: bench/uptodate.sh [RUNS] [PHASES]     (defaults: 10, 1000)
# Environment: HELIXFLOW (a helixflow binary instead of building target/release/helixflow).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10}
phases=${2:-1000}
cache=${HELIXFLOW_BENCH_CACHE:-$HOME/.cache/helixflow-bench}
if [ ! -x "$cache/venv/bin/task" ] || [ ! -x "$cache/venv/bin/ninja" ]; then
    python3 -m venv "$cache/venv"
    "$cache/venv/bin/pip" install --quiet ninja go-task-bin
fi
export PATH="$cache/venv/bin:$PATH"
if [ -z "${HELIXFLOW:-}" ]; then
    cargo build --release --quiet
    HELIXFLOW=$(pwd)/target/release/helixflow
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/helixflow-uptodate.XXXXXX")
trap 'rm -rf "$dir"' EXIT
# Each tool gets its own copy of the same DAG and files: they write the same outputs, and each
# judges "up to date" against its own record of them.
for tool in helixflow ninja task; do
    python3 bench/gen_uptodate.py "$dir/$tool" "$phases"
done
(cd "$dir/helixflow" && "$HELIXFLOW" run --no-progress >/dev/null 2>&1) || { echo "helixflow's first run failed"; exit 1; }
(cd "$dir/ninja" && ninja >/dev/null)
(cd "$dir/task" && task --silent >/dev/null 2>&1)
# Each must now do nothing: helixflow reports every phase up to date, ninja has no work.
(cd "$dir/helixflow" && "$HELIXFLOW" status --json) | python3 -c 'import json,sys; d=json.load(sys.stdin); bad=[p["phase"] for p in d["phases"] if p["status"]!="up-to-date"]; sys.exit(f"not up to date: {bad[:5]}" if bad else 0)'
case "$(cd "$dir/ninja" && ninja -n)" in *"no work to do"*) ;; *) echo "ninja has work left"; exit 1 ;; esac

python3 - "$runs" "$HELIXFLOW" "$dir" <<'PY'
import os, statistics, subprocess, sys, time
runs, helixflow, root = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def median(cmd):
    cwd = os.path.join(root, {"task": "task", "ninja": "ninja"}.get(cmd[0], "helixflow"))
    subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)
results = {
    "helixflow run (no-op)": median([helixflow, "run", "--no-progress"]),
    "helixflow status": median([helixflow, "status"]),
    "ninja (no-op)": median(["ninja"]),
    "task (up to date)": median(["task", "--silent"]),
}
for name, t in results.items():
    print(f"{name:24} {t * 1000:8.1f} ms")
for mine in ("helixflow run (no-op)", "helixflow status"):
    for peer in ("ninja (no-op)", "task (up to date)"):
        print(f"{mine} / {peer}: {results[mine] / results[peer]:.2f}x")
PY
