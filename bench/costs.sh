#!/usr/bin/env bash
# What helixflow itself costs on a real repository, against the tools a user would compare with,
# each pair measured in the same run, alternating (one of each, then again), medians reported:
#
#   1. one `isolation "worktree"` attempt of a one-line `run` step (the phase shares the ignored
#      `.venv` read only) against `git worktree add --detach` + `git worktree remove` of the same
#      repository: ~11,500 tracked files (bench/gen_isolation_repo.sh builds it from the crate
#      sources and Python on this machine) and a 687 MB virtualenv in an ignored `.venv/`;
#      target: at most 1.5x;
#   2. the disk a live attempt's worktree takes (`du`, from outside the attempt), against the
#      tracked files; target: no more than the tracked files (nothing is included);
#   3. one shared-workspace attempt of the same step with `scope`, against `git status`;
#      target: at most 2x;
#   4. the bundle of a passing phase whose agent prints 50 MB, and helixflow's peak resident
#      memory (the kernel's account of the process, `wait4`) with bundles on and off; targets: the
#      bundle at most its changed files plus 1 MiB, the peak under 45 MB;
#   5. 1,000 no-op `run --force` steps (`-j2`, layers of 32, bench/gen_dag.py) against ninja
#      running the same DAG (`-j2`); target: at most 1.5x. Timed with them: the file operations
#      of the steps' journal and records alone (bench/journal_floor.c, built with gcc);
#   6. a no-op re-run and `status` of an up-to-date 1,000-phase DAG (bench/gen_uptodate.py)
#      against ninja's no-op build; target: at most 2x each. As a user meets it: the files the
#      first run wrote are more than 2 s old (a file stamped within the racy margin of being
#      written is read again by the next run, which records its stamp anew), so the plan is
#      remembered (`cache/plan`); a `status` that finds no memo (the full check: every record
#      read, every definition worked out) is timed too, and a no-op run without its HTML report
#      (`--no-report`: what the report every run writes costs).
#
# ninja comes from Debian's package (ninja-build), installed when missing (root or sudo).
#
# Usage: bench/costs.sh [DIR] [RUNS]
#   DIR   where the repositories and DAGs go (default: a temporary folder, removed at the end); a
#         reused DIR keeps its isolation repository (building it copies 900 MB)
#   RUNS  timed runs of each command, alternating (default 5, after one warm-up each)
# Environment: HELIXFLOW (a helixflow binary instead of building target/release/helixflow),
#   BASELINE (another helixflow binary, e.g. an older build, timed alongside as a third column),
#   ONLY (a space-separated list of the sections to run, e.g. "1 4"; default all).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
dir=${1:-}
runs=${2:-5}
only=${ONLY:-"1 2 3 4 5 6"}
if [ -z "$dir" ]; then
    dir=$(mktemp -d "${TMPDIR:-/tmp}/helixflow-costs.XXXXXX")
    trap 'rm -rf "$dir"' EXIT
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
note() { echo "costs.sh: $*" >&2; }

if ! command -v ninja >/dev/null; then
    note "installing ninja-build"
    if [ "$(id -u)" = 0 ]; then apt-get install -y ninja-build >&2; else sudo apt-get install -y ninja-build >&2; fi
fi
if [ -n "${HELIXFLOW:-}" ]; then
    helixflow=$HELIXFLOW
else
    note "building target/release/helixflow"
    cargo build --release --quiet >&2
    # A private copy: another build into the shared target folder must not swap the binary
    # between timed runs.
    cp "$repo/target/release/helixflow" "$dir/helixflow"
    helixflow="$dir/helixflow"
fi
baseline=${BASELINE:-}

echo "machine: $(nproc) cores, $(uname -sr); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "helixflow: $($helixflow --version) ($helixflow, built from $(git -C "$repo" describe --always --dirty 2>/dev/null || echo '?'))"
[ -n "$baseline" ] && echo "baseline: $($baseline --version) ($baseline)"
echo "git: $(git --version); ninja: $(ninja --version); ${runs} runs of each, alternating"

# Times commands given as separate shell strings, alternating: one warm-up of each, then RUNS
# rounds of each in turn; prints "label median min" per command (seconds). Labels come first:
# alternate LABEL1 CMD1 LABEL2 CMD2 ...
alternate() {
    python3 - "$runs" "$@" <<'PY'
import statistics, subprocess, sys, time
runs, rest = int(sys.argv[1]), sys.argv[2:]
pairs = list(zip(rest[0::2], rest[1::2]))
def once(cmd):
    start = time.perf_counter()
    subprocess.run(cmd, shell=True, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start
for _, cmd in pairs:
    once(cmd)
times = {label: [] for label, _ in pairs}
for _ in range(runs):
    for label, cmd in pairs:
        times[label].append(once(cmd))
for label, _ in pairs:
    t = times[label]
    print(f"{label}\t{statistics.median(t):.4f}\t{min(t):.4f}")
PY
}

# Prints a table of the `alternate` output on standard input with each row's ratio to the row
# named $1, and a verdict for the rows named in $3 (comma-separated) against the target $2.
ratios() {
    local table
    table=$(cat)
    python3 - "$@" "$table" <<'PY'
import sys
peer, target, mine, rows = sys.argv[1], sys.argv[2], sys.argv[3].split(","), sys.argv[4].split("\n")
data = {}
for row in rows:
    if row.strip():
        label, median, least = row.split("\t")
        data[label] = (float(median), float(least))
print("| what | median | least | / " + peer + " (median) |")
print("|---|---:|---:|---:|")
for label, (median, least) in data.items():
    ratio = "" if label == peer else f"{median / data[peer][0]:.2f}x"
    print(f"| {label} | {median * 1e3:.0f} ms | {least * 1e3:.0f} ms | {ratio} |")
if target != "-":
    for label in mine:
        if label in data:
            r = data[label][0] / data[peer][0]
            verdict = "met" if r <= float(target) else "MISSED"
            print(f"- {label} / {peer}: {r:.2f} (target <= {target}: {verdict})")
PY
}

# Whether section $1 is among those to run.
wants() {
    case " $only " in *" $1 "*) return 0 ;; *) return 1 ;; esac
}

binaries() {
    echo "helixflow $helixflow"
    if [ -n "$baseline" ]; then echo "baseline $baseline"; fi
}

# The isolation pipeline each binary runs.
file_for() {
    if [ "$1" = baseline ]; then echo baseline.kdl; else echo pipeline.kdl; fi
}

section_isolation() {
    local iso="$dir/iso"
    bench/gen_isolation_repo.sh "$iso" >&2
    cat >"$iso/pipeline.kdl" <<'EOF'
pipeline "costs" {}
phase "step" {
    isolation "worktree"
    worktree-share ".venv"
    run "echo done > step.txt; if [ -n \"$HOLD\" ]; then touch \"$HOLD\"; sleep 3; fi"
}
EOF
    # For a baseline that predates `worktree-share` (it copies every ignored file instead).
    grep -v worktree-share "$iso/pipeline.kdl" >"$iso/baseline.kdl"
    # Committed, so that the shared attempt below starts from a clean workspace.
    git -C "$iso" add pipeline.kdl baseline.kdl
    git -C "$iso" -c user.name=bench -c user.email=bench@example.invalid commit -q -m pipeline ||
        true
    if wants 1; then
    echo
    echo "## 1. One isolated attempt vs git worktree add + remove"
    echo "repository: $(git -C "$iso" ls-files | wc -l) tracked files, $(du -sh --exclude=.git --exclude=.venv --exclude=.helixflow "$iso" | cut -f1); .venv $(du -sh "$iso/.venv" | cut -f1) (ignored)"
    local args=() name bin
    while read -r name bin; do
        args+=("$name (isolated attempt)" "cd $iso && $bin run --no-progress --force $(file_for "$name")")
    done < <(binaries)
    args+=("git worktree add + remove" "cd $iso && git worktree add -q --detach $dir/wt HEAD && git worktree remove --force $dir/wt")
    alternate "${args[@]}" | ratios "git worktree add + remove" 1.5 "helixflow (isolated attempt)"
    fi

    if wants 2; then
    echo
    echo "## 2. Disk per live attempt"
    local hold="$dir/hold"
    while read -r name bin; do
        rm -f "$hold"
        (cd "$iso" && HOLD="$hold" $bin run --no-progress --force "$(file_for "$name")" >/dev/null 2>&1) &
        local pid=$!
        while [ ! -e "$hold" ] && kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
        local used
        used=$(du -sk "$iso/.helixflow/worktrees" | cut -f1)
        wait "$pid" || true
        echo "- $name: a live attempt's worktree takes $((used / 1024)) MiB"
    done < <(binaries)
    local tracked
    tracked=$(cd "$iso" && git ls-files -z | du -sk --files0-from=- -c | tail -1 | cut -f1)
    echo "- the tracked files: $((tracked / 1024)) MiB (target: a worktree no larger, give or take folders and git's index)"
    fi

    if wants 3; then
    echo
    echo "## 3. One shared-workspace attempt with scope vs git status"
    cat >"$iso/shared.kdl" <<'EOF'
pipeline "shared" {}
phase "step" {
    run "echo done > step.txt"
    scope "step.txt"
}
EOF
    args=()
    while read -r name bin; do
        args+=("$name (shared attempt, scope)" "cd $iso && $bin run --no-progress --force shared.kdl")
    done < <(binaries)
    args+=("git status" "cd $iso && git status --porcelain")
    alternate "${args[@]}" | ratios "git status" 2 "helixflow (shared attempt, scope)"
    fi
}

section_bundle() {
    local loud="$dir/loud"
    rm -rf "$loud"
    mkdir -p "$loud"
    cat >"$loud/pipeline.kdl" <<'EOF'
pipeline "loud" {}
agent "loud" {
    command "sh" "-c" "yes 'a line of agent output, over and over' | head -c 50000000; echo 'the change itself' > change.txt"
    cost 0
}
phase "talk" {
    agent "loud"
    prompt "talk"
}
EOF
    echo
    echo "## 4. Bundle and peak memory of a phase whose agent prints 50 MB"
    echo "| binary | bundles | peak RSS | bundle | changed files |"
    echo "|---|---|---:|---:|---:|"
    local name bin flag
    while read -r name bin; do
        for flag in --bundles --no-bundles; do
            rm -rf "$loud/.helixflow" "$loud/change.txt"
            python3 - "$bin" "$flag" "$loud" "$name" <<'PY'
import glob, os, subprocess, sys
binary, flag, folder, name = sys.argv[1:]
child = subprocess.Popen([binary, "run", "--no-progress", flag], cwd=folder,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, "the run failed"
peak = usage.ru_maxrss / 1024
bundles = glob.glob(os.path.join(folder, ".helixflow/runs/*/phases/talk/bundle.hxb"))
size = os.path.getsize(bundles[0]) if bundles else 0
changed = os.path.getsize(os.path.join(folder, "change.txt"))
bundle = f"{size:,} bytes" if bundles else "none"
verdicts = []
if flag == "--bundles":
    verdicts.append("peak " + ("met" if peak < 45 else "MISSED"))
    verdicts.append("bundle " + ("met" if size <= changed + (1 << 20) else "MISSED"))
print(f"| {name} | {flag} | {peak:.1f} MiB | {bundle} | {changed} bytes | " + ", ".join(verdicts))
PY
        done
    done < <(binaries)
    echo "(targets: peak under 45 MB with bundles; bundle at most the changed files + 1 MiB)"
}

section_steps() {
    local dag="$dir/dag"
    python3 bench/gen_dag.py 1000 "$dag" --width 32 >/dev/null 2>&1
    echo
    echo "## 5. 1,000 no-op run --force steps (-j2) vs ninja"
    local args=() name bin
    while read -r name bin; do
        (cd "$dag/helixflow" && $bin run --no-progress -j2 >/dev/null 2>&1) || true
        args+=("$name (run --force)" "$bin run $dag/helixflow/pipeline.kdl --force --jobs 2 --no-progress")
    done < <(binaries)
    args+=("ninja" "ninja -C $dag/ninja -j 2")
    # What the steps' journal costs at the least here: its file operations, one thread.
    gcc -O2 -o "$dir/journal_floor" bench/journal_floor.c
    rm -rf "$dir/floor" && mkdir -p "$dir/floor"
    args+=("journal file operations alone (one thread)" "$dir/journal_floor $dir/floor 1000")
    alternate "${args[@]}" | ratios ninja 1.5 "helixflow (run --force)"
}

section_noop() {
    local up="$dir/up"
    rm -rf "$up-helixflow" "$up-ninja"
    python3 bench/gen_uptodate.py "$up-helixflow" 1000 >/dev/null
    python3 bench/gen_uptodate.py "$up-ninja" 1000 >/dev/null
    (cd "$up-ninja" && ninja >/dev/null)
    case "$(cd "$up-ninja" && ninja -n)" in *"no work to do"*) ;; *) note "ninja has work left"; exit 1 ;; esac
    echo
    echo "## 6. No-op re-run and status of an up-to-date 1,000-phase DAG vs ninja's no-op"
    local args=() name bin
    while read -r name bin; do
        (cd "$up-helixflow" && $bin run --no-progress >/dev/null 2>&1)
        # Past the racy margin: the next run records the stamps of the files the first one wrote
        # anew; past it again, the plan is remembered.
        sleep 2.5
        (cd "$up-helixflow" && $bin run --no-progress >/dev/null 2>&1)
        sleep 2.5
        (cd "$up-helixflow" && $bin status --json) | python3 -c 'import json,sys; d=json.load(sys.stdin); bad=[p["phase"] for p in d["phases"] if p["status"]!="up-to-date"]; sys.exit(f"not up to date: {bad[:5]}" if bad else 0)'
        args+=("$name run (no-op)" "cd $up-helixflow && $bin run --no-progress")
        args+=("$name run (no-op, --no-report)" "cd $up-helixflow && $bin run --no-progress --no-report")
        args+=("$name status" "cd $up-helixflow && $bin status")
        args+=("$name status (full check)" "cd $up-helixflow && rm -f .helixflow/cache/plan && $bin status")
    done < <(binaries)
    args+=("ninja (no-op)" "cd $up-ninja && ninja")
    alternate "${args[@]}" | ratios "ninja (no-op)" 2 "helixflow run (no-op),helixflow status"
}

for section in $only; do
    case $section in
    1 | 2 | 3) [ "${done_isolation:-}" ] || { section_isolation; done_isolation=1; } ;;
    4) section_bundle ;;
    5) section_steps ;;
    6) section_noop ;;
    esac
done
