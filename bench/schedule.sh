#!/usr/bin/env bash
# Measures helixflow's scheduling overhead against ninja, `make -j` and just.
#
# The workload is a layered DAG of no-op steps (bench/gen_dag.py): 100 steps in layers of 10 and
# 1,000 steps in layers of 32, each step after the first layer depending on 1-3 steps of the layer
# before. Every tool runs the same DAG with the same command (`true`) and the same job count
# (helixflow --jobs N, ninja -j N, make -j N, just --jobs N), for N = 2 and N = 8. Each tool keeps
# its state between runs as it would in daily use (helixflow adds a run folder under .helixflow,
# ninja keeps .ninja_log): deleting thousands of run files before each timed run would make ext4
# slower at creating the next run's files, a cost that real use does not have.
#
# Before timing, each tool runs a second copy of the DAG twice in a row, with steps that log their
# names; the log must show every step exactly once per run, after its dependencies (so ninja really
# reruns every edge with its log present, and just runs the dependencies it shares only once).
#
# The peers are installed from Debian's packages when missing (root or sudo needed); Debian 12 has
# no `just`, so it is then built with `cargo install just --locked` when that finishes within
# JUST_INSTALL_TIMEOUT seconds (default 300), else reported as not installed. just runs a recipe's
# dependencies one at a time unless the recipe has `[parallel]` (just >= 1.42, with `--jobs N`);
# the script detects which and says so.
#
# Usage: bench/schedule.sh [DIR] [RUNS]
#   DIR   where the DAGs go (default: a temporary folder, removed at the end); the files of a
#         reused DIR are rewritten but the tools' state is kept (nothing is deleted before timing)
#   RUNS  timed runs of each command (default 10, after one warm-up run)
# Environment: JOBS (default "2 8"), SIZES (default "100:10 1000:32", as STEPS:WIDTH),
#   HELIXFLOW (a helixflow binary to use instead of building target/release/helixflow),
#   JUST_INSTALL_TIMEOUT (seconds, default 300).
#
# With --profile before DIR, instead of timing, runs helixflow once per size (at the last job count
# in JOBS) with `--events` and once under `strace -c -f`, and prints where the time goes: the
# engine's own timings per attempt, how long the run waited for its journal and run.json after the
# last phase, and the system calls per phase.
set -euo pipefail

cd "$(dirname "$0")/.."
repo=$(pwd)

profile=false
if [ "${1:-}" = "--profile" ]; then
    profile=true
    shift
fi
dir=${1:-}
runs=${2:-10}
jobs_list=${JOBS:-"2 8"}
sizes=${SIZES:-"100:10 1000:32"}
if [ -z "$dir" ]; then
    dir=$(mktemp -d "${TMPDIR:-/tmp}/helixflow-schedule-bench.XXXXXX")
    trap 'rm -rf "$dir"' EXIT
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

note() { echo "schedule.sh: $*" >&2; }

as_root() {
    if [ "$(id -u)" = 0 ]; then
        "$@"
    elif command -v sudo >/dev/null; then
        sudo "$@"
    else
        return 1
    fi
}

# Installs the Debian packages for the peers that are missing; failures are reported, not fatal:
# a missing peer is left out of the comparison.
install_peers() {
    local missing=()
    command -v ninja >/dev/null || missing+=(ninja-build)
    command -v make >/dev/null || missing+=(make)
    command -v hyperfine >/dev/null || missing+=(hyperfine)
    if ! command -v just >/dev/null && apt-cache show just >/dev/null 2>&1; then
        missing+=(just)
    fi
    if [ ${#missing[@]} -gt 0 ]; then
        note "installing ${missing[*]}"
        as_root apt-get install -y "${missing[@]}" >&2 || note "apt-get install failed"
    fi
    if ! command -v just >/dev/null && command -v cargo >/dev/null; then
        local limit=${JUST_INSTALL_TIMEOUT:-300}
        note "just is not packaged here: trying cargo install just --locked (at most ${limit}s)"
        timeout "$limit" cargo install just --locked >&2 || note "cargo install just did not finish"
    fi
}

# The version of a tool, or "not installed".
version_of() {
    if ! command -v "$1" >/dev/null; then
        echo "not installed"
        return
    fi
    # sed reads to the end, so the tool never dies of a closed pipe (pipefail would see it).
    "$1" --version 2>&1 | sed -n 1p
}

# Whether this just runs dependencies at once with `[parallel]` and `--jobs`.
just_parallel() {
    command -v just >/dev/null || return 1
    local probe
    probe=$(mktemp -d "${TMPDIR:-/tmp}/just-probe.XXXXXX")
    printf '[parallel]\nall: a b\na:\n    @true\nb:\n    @true\n' >"$probe/justfile"
    local ok=1
    just --justfile "$probe/justfile" --jobs 2 all >/dev/null 2>&1 && ok=0
    rm -rf "$probe"
    return $ok
}

# The command line that runs the DAG in $1 with tool $2 and $3 jobs.
command_for() {
    local dag=$1 tool=$2 jobs=$3
    case $tool in
    helixflow) echo "$helixflow run $dag/helixflow/pipeline.kdl --jobs $jobs --no-progress" ;;
    ninja) echo "ninja -C $dag/ninja -j $jobs" ;;
    make) echo "make -C $dag/make -j $jobs" ;;
    just)
        if [ "$just_parallel" = yes ]; then
            echo "just --justfile $dag/just/justfile --jobs $jobs"
        else
            echo "just --justfile $dag/just/justfile"
        fi
        ;;
    esac
}

# Runs each tool twice on a DAG whose steps log their names, and checks the log.
validate() {
    local steps=$1 width=$2 jobs=$3
    local check="$dir/check-$steps"
    python3 bench/gen_dag.py "$steps" "$check" --width "$width" $just_flag \
        --command "echo {name} >> $check/ran.log" 2>/dev/null
    local tool
    for tool in "${tools[@]}"; do
        rm -f "$check/ran.log"
        local run
        for run in 1 2; do
            # shellcheck disable=SC2046 # the command line is meant to be split into words
            $(command_for "$check" "$tool" "$jobs") >/dev/null 2>&1 || {
                note "$tool failed on the check DAG of $steps steps"
                exit 1
            }
        done
        python3 bench/gen_dag.py --check "$check/ran.log" "$check" --runs 2 || {
            note "$tool did not run every step once per run in dependency order"
            exit 1
        }
    done
    note "checked: every tool ran all $steps steps once per run, in dependency order"
}

# Times each tool on one DAG with $2 jobs; writes hyperfine's JSON to $3.
measure() {
    local dag=$1 jobs=$2 json=$3
    local commands=() tool
    for tool in "${tools[@]}"; do
        commands+=("$(command_for "$dag" "$tool" "$jobs")")
    done
    if command -v hyperfine >/dev/null; then
        hyperfine --shell=none --warmup 1 --runs "$runs" --export-json "$json" --style basic \
            "${commands[@]}" >&2
    else
        # The same statistics hyperfine reports, from a plain loop.
        local cmd i start end
        : >"$json.times"
        for cmd in "${commands[@]}"; do
            for ((i = 0; i <= runs; i++)); do
                start=$(date +%s%N)
                # shellcheck disable=SC2086 # the command line is meant to be split into words
                $cmd >/dev/null 2>&1
                end=$(date +%s%N)
                # Run 0 is the warm-up.
                if [ "$i" -gt 0 ]; then
                    printf '%s\t%s\n' "$cmd" "$(((end - start) / 1000))" >>"$json.times"
                fi
            done
        done
        python3 - "$json.times" "$json" <<'PY'
import json, statistics, sys
times = {}
for line in open(sys.argv[1]):
    cmd, micros = line.rstrip("\n").split("\t")
    times.setdefault(cmd, []).append(int(micros) / 1e6)
results = [
    {
        "command": c,
        "mean": statistics.mean(t),
        "stddev": statistics.stdev(t) if len(t) > 1 else 0.0,
        "min": min(t),
        "max": max(t),
        "times": t,
    }
    for c, t in times.items()
]
json.dump({"results": results}, open(sys.argv[2], "w"), indent=1)
PY
    fi
}

# Prints one Markdown table and the verdicts from a hyperfine JSON file.
report() {
    local steps=$1 width=$2 jobs=$3 json=$4
    python3 - "$steps" "$width" "$jobs" "$json" "${tools[@]}" <<'PY'
import json, sys
steps, width, jobs, path, *tools = sys.argv[1:]
steps = int(steps)
results = json.load(open(path))["results"]
by_tool = dict(zip(tools, results))
hf = by_tool["helixflow"]["mean"]
print(f"\n{steps} steps in layers of {width}, {jobs} jobs")
print("| tool | mean | ± σ | min | helixflow / tool |")
print("|---|---:|---:|---:|---:|")
for tool in tools:
    r = by_tool[tool]
    ratio = "" if tool == "helixflow" else f"{hf / r['mean']:.2f}×"
    print(f"| {tool} | {r['mean'] * 1e3:.0f} ms | {r['stddev'] * 1e3:.0f} ms"
          f" | {r['min'] * 1e3:.0f} ms | {ratio} |")
verdicts = []
if "ninja" in by_tool:
    ninja = by_tool["ninja"]["mean"]
    ok = hf <= 1.5 * ninja
    verdict = "met" if ok else "MISSED"
    verdicts.append(f"helixflow/ninja {hf / ninja:.2f} (target ≤ 1.5: {verdict})")
    extra = (hf - ninja) / steps * 1e3
    verdicts.append(f"helixflow costs {extra:.2f} ms more per step than ninja")
for peer in ("make", "just"):
    if peer in by_tool:
        other = by_tool[peer]["mean"]
        ok = hf < other
        verdict = "met" if ok else "MISSED"
        verdicts.append(f"helixflow/{peer} {hf / other:.2f} (target < 1: {verdict})")
for v in verdicts:
    print(f"- {v}")
PY
}

# Where the time of a helixflow run goes: the engine's own timings from the event stream, the wait
# for the dispatcher (journal, run.json, reporters) after the last phase, and syscalls per phase.
profile_helixflow() {
    local dag=$1 steps=$2 jobs=$3
    local out="$dir/profile-$steps-j$jobs"
    mkdir -p "$out"
    # shellcheck disable=SC2046 # the command line is meant to be split into words
    $(command_for "$dag" helixflow "$jobs") --events "$out/events.ndjson" >/dev/null 2>&1
    python3 - "$out/events.ndjson" "$steps" "$jobs" <<'PY'
import json, statistics, sys
path, steps, jobs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
events = [json.loads(line) for line in open(path)]
child = [e["exit"]["duration_ms"] for e in events if e["event"] == "child-exited"]
attempt = [e["duration_ms"] for e in events if e["event"] == "attempt-finished"]
end = next(e for e in events if e["event"] == "run-finished")
started = next(e for e in events if e["event"] == "run-started")
engine = end["duration_ms"]
print(f"\nhelixflow, {steps} phases, {jobs} jobs (events from --events; times in ms)")
wait = max(0, end["elapsed_ms"] - started["elapsed_ms"] - engine)
print(f"  engine: first phase started to last phase finished   {engine:7d} ms")
print(f"  the run waited for the event dispatcher after that     {wait:7d} ms"
      "  (journal, run.json rewrites, reporters)")
def line(label, xs):
    print(f"  {label:<53}{statistics.mean(xs):7.2f} ms per phase (sum {sum(xs)} ms)")
line("child: spawn, `true`, reaped", child)
line("attempt: snapshots, attempt folder, child, artifacts", attempt)
line("attempt minus child", [a - c for a, c in zip(attempt, child)])
ideal = sum(attempt) / jobs
print(f"  ideal engine time at {jobs} jobs from the attempts alone   {ideal:7.0f} ms")
PY
    cpu_per_step "$dag" "$steps" "$jobs"
    if command -v strace >/dev/null; then
        # shellcheck disable=SC2046 # the command line is meant to be split into words
        strace -f -qq -c -o "$out/strace.txt" $(command_for "$dag" helixflow "$jobs") \
            >/dev/null 2>&1 || true
        echo "  system calls per phase (strace -c -f, helixflow and its children):"
        local wanted="total|clone3|clone|execve|fdatasync|fsync|rename|mkdir|openat|statx|write"
        wanted="$wanted|clock_nanosleep|sched_getaffinity"
        awk -v n="$steps" -v wanted="^($wanted)\$" '$4 ~ /^[0-9]+$/ && $NF ~ wanted {
                errors = NF == 6 ? $5 : 0
                printf "    %-18s %8.2f calls %8.2f failed\n", $NF, $4 / n, errors / n
            }' "$out/strace.txt"
    fi
}

# CPU time (user + system) per step of each tool together with its children, median of 5 runs.
# Every tool starts the same `true` per step, so the differences between the tools are their own
# work per step. On a machine with as many cores as jobs, a run is bound by this total, not by
# waiting. The journal floor (benches/journal.rs) is what creating one attempt's folders and files
# costs by itself: work that a tool without a per-attempt record does not do.
cpu_per_step() {
    local dag=$1 steps=$2 jobs=$3 tool
    echo "  CPU per step, the tool and its children (user + system, median of 5 runs):"
    for tool in "${tools[@]}"; do
        # shellcheck disable=SC2046 # the command line is meant to be split into words
        python3 - "$steps" $(command_for "$dag" "$tool" "$jobs") <<'PY'
import resource, statistics, subprocess, sys
steps, argv = int(sys.argv[1]), sys.argv[2:]
def cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
spent = []
for _ in range(5):
    before = cpu()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    spent.append(cpu() - before)
name = argv[0].rsplit("/", 1)[-1]
print(f"    {name:<10} {statistics.median(spent) * 1000 / steps:6.3f} ms")
PY
    done
    python3 - "$steps" <<'PY'
import resource, subprocess, sys
steps = int(sys.argv[1])
before = resource.getrusage(resource.RUSAGE_CHILDREN)
for _ in range(steps):
    subprocess.run(["true"], check=True)
after = resource.getrusage(resource.RUSAGE_CHILDREN)
spent = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
print(f"    {'true':<10} {spent * 1000 / steps:6.3f} ms  (started alone: a tool's own work per step is"
      " its figure minus this)")
PY
    local floor="$dir/journal-floor"
    rm -rf "$floor"
    (cd "$repo" && cargo bench --quiet --bench journal -- "$floor" "$steps" 5 2>/dev/null) |
        sed -n 's/^journal floor: /  journal floor (benches\/journal.rs): /p'
}

install_peers
if [ -n "${HELIXFLOW:-}" ]; then
    helixflow=$HELIXFLOW
else
    note "building target/release/helixflow"
    cargo build --release --quiet >&2
    # A private copy: another build into the shared target folder must not swap the binary
    # between timed runs.
    cp "$repo/target/release/helixflow" "$dir/helixflow"
    helixflow="$dir/helixflow"
    "$helixflow" run --help >/dev/null || {
        note "$repo/target/release/helixflow has no run command"
        exit 1
    }
fi

tools=(helixflow)
command -v ninja >/dev/null && tools+=(ninja)
command -v make >/dev/null && tools+=(make)
command -v just >/dev/null && tools+=(just)
if just_parallel; then
    just_parallel=yes
    just_flag=--just-parallel
else
    just_parallel=no
    just_flag=
fi

echo "machine: $(nproc) cores, $(uname -sr); load average $(cut -d' ' -f1-3 /proc/loadavg)"
commit=$(git -C "$repo" describe --always --dirty 2>/dev/null || echo "unknown commit")
echo "helixflow: $($helixflow --version) ($helixflow, built from $commit)"
for tool in ninja make just hyperfine; do
    echo "$tool: $(version_of "$tool")"
done
case $just_parallel in
yes) echo "just: recipes marked [parallel], run with --jobs N" ;;
no)
    if command -v just >/dev/null; then
        echo "just: no [parallel] support: dependencies run one at a time"
    fi
    ;;
esac
if $profile; then
    echo "DAGs in $dir; profiling helixflow at ${jobs_list##* } jobs"
else
    echo "DAGs in $dir; $runs timed runs each after one warm-up"
fi

for size in $sizes; do
    steps=${size%%:*}
    width=${size##*:}
    dag="$dir/dag-$steps"
    python3 bench/gen_dag.py "$steps" "$dag" --width "$width" $just_flag 2>/dev/null
    if $profile; then
        profile_helixflow "$dag" "$steps" "${jobs_list##* }"
        continue
    fi
    validate "$steps" "$width" "${jobs_list%% *}"
    for jobs in $jobs_list; do
        json="$dir/result-$steps-j$jobs.json"
        measure "$dag" "$jobs" "$json"
        report "$steps" "$width" "$jobs" "$json"
    done
done
