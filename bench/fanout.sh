#!/usr/bin/env bash
# Measures what a `for-each` phase costs against the same phases written out by hand.
#
# Two pipelines of 1,000 `run` steps (`true`) after one `plan` step: `items` is one `for-each`
# phase over a JSON file of 1,000 items (`{{ item.key }}` in its command, so each item's phase is
# made from its item), `hand` is the 1,000 phases written out, each depending on `plan`. Both run
# with the same job count. Timed, alternating (items, hand, items, hand, …), RUNS times each after
# one warm-up run of each:
#
#   forced     `helixflow run --force --no-progress --jobs N`: every phase runs;
#   up to date `helixflow run --no-progress --jobs N` after a run that passed: nothing runs.
#
# It also counts, with strace, the workspace files whose contents an up-to-date re-run of `items`
# reads (`openat` of a path under the workspace, outside the state folder, read only): none are
# expected, since every record's stamps are proved unchanged by their metadata.
#
# Usage: bench/fanout.sh [DIR] [RUNS]
#   DIR   where the pipelines go (default: a temporary folder, removed at the end)
#   RUNS  timed runs of each (default 10)
# Environment: JOBS (default 4), N (items, default 1000), HELIXFLOW (a binary to use instead of
#   building target/release/helixflow).
set -euo pipefail

cd "$(dirname "$0")/.."
dir=${1:-}
runs=${2:-10}
jobs=${JOBS:-4}
n=${N:-1000}
if [ -z "$dir" ]; then
    dir=$(mktemp -d "${TMPDIR:-/tmp}/helixflow-fanout-bench.XXXXXX")
    trap 'rm -rf "$dir"' EXIT
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

bin=${HELIXFLOW:-}
if [ -z "$bin" ]; then
    cargo build --release --quiet
    bin=$(pwd)/target/release/helixflow
fi

python3 - "$dir" "$n" <<'EOF'
import json, os, sys
root, n = sys.argv[1], int(sys.argv[2])
keys = [f"m{i:04d}" for i in range(n)]
items = os.path.join(root, "items")
hand = os.path.join(root, "hand")
for folder in (items, hand):
    os.makedirs(folder, exist_ok=True)
with open(os.path.join(items, "modules.json"), "w") as f:
    json.dump([{"id": k} for k in keys], f)
with open(os.path.join(items, "pipeline.kdl"), "w") as f:
    f.write('pipeline "items"\n'
            'phase "plan" {\n    run "true"\n}\n'
            'phase "migrate" {\n    depends-on "plan"\n'
            '    for-each json="modules.json" key="id"\n'
            f'    max-items {n}\n'
            '    run "true {{ item.key }}"\n}\n')
with open(os.path.join(hand, "pipeline.kdl"), "w") as f:
    f.write('pipeline "hand"\nphase "plan" {\n    run "true"\n}\n')
    for k in keys:
        f.write(f'phase "migrate-{k}" {{\n    depends-on "plan"\n    run "true {k}"\n}}\n')
EOF

ms() { python3 -c 'import sys,time; print(int(time.time()*1000))'; }
run() { # folder, extra args…
    local folder=$1
    shift
    (cd "$dir/$folder" && "$bin" run --no-progress --jobs "$jobs" "$@" pipeline.kdl >/dev/null 2>&1)
}

# Warm-up, and the check that both pass.
run items --force
run hand --force

report() { # label, times of items, times of hand
    python3 - "$@" <<'EOF'
import statistics, sys
label, a, b = sys.argv[1], list(map(int, sys.argv[2].split())), list(map(int, sys.argv[3].split()))
ma, mb = statistics.mean(a), statistics.mean(b)
sa = statistics.stdev(a) if len(a) > 1 else 0
sb = statistics.stdev(b) if len(b) > 1 else 0
print(f"| {label} | {ma:.0f} ± {sa:.0f} ms | {mb:.0f} ± {sb:.0f} ms | **{ma / mb:.2f}** |")
EOF
}

for mode in forced "up to date"; do
    args=()
    [ "$mode" = forced ] && args=(--force)
    if [ "$mode" = "up to date" ]; then
        run items
        run hand
    fi
    times_items=""
    times_hand=""
    for _ in $(seq "$runs"); do
        start=$(ms); run items "${args[@]}"; end=$(ms)
        times_items+=" $((end - start))"
        start=$(ms); run hand "${args[@]}"; end=$(ms)
        times_hand+=" $((end - start))"
    done
    report "$n, $mode, \`-j $jobs\`" "$times_items" "$times_hand"
done

if command -v strace >/dev/null; then
    trace=$(mktemp)
    (cd "$dir/items" && strace -f -qq -e trace=openat -o "$trace" \
        "$bin" run --no-progress --jobs "$jobs" pipeline.kdl >/dev/null 2>&1)
    # Files of the workspace opened for reading, other than the pipeline and its list of items
    # (read by every run) and the state folder.
    echo "workspace files opened for reading by an up-to-date re-run of items, besides pipeline.kdl and modules.json:"
    grep -E 'O_RDONLY' "$trace" | grep -oE '"[^"]*"' | tr -d '"' |
        grep -vE '^/(proc|sys|etc|usr|lib|lib64|dev|tmp/[^/]*\.tmp)|\.helixflow|pipeline\.kdl$|modules\.json$' |
        grep -E "^($dir/items/|[^/])" | sort | uniq -c || echo "  (none)"
    rm -f "$trace"
fi
