#!/usr/bin/env bash
# Benchmarks workspace snapshots against `git status --porcelain`.
#
# Generates a tree of 1,000 folders x 100 files of varied sizes (100,000 files that both see) plus
# files a .gitignore hides (a log in every folder, a target/ folder), commits it so that
# `git status` has an index to compare against, then runs benches/snapshot.rs on it.
#
# Usage: bench/snapshot.sh [DIR] [RUNS]
#   DIR   where the tree goes (default: a new temporary folder); an existing tree is reused
#   RUNS  timed runs of each measurement (default 7)
set -euo pipefail

cd "$(dirname "$0")/.."
dir=${1:-}
runs=${2:-7}
if [ -z "$dir" ]; then
    dir=$(mktemp -d "${TMPDIR:-/tmp}/helixflow-snapshot-bench.XXXXXX")
fi

if [ ! -d "$dir/.git" ]; then
    echo "generating the tree in $dir" >&2
    python3 - "$dir" <<'PY'
import os
import random
import sys

root = sys.argv[1]
rng = random.Random(42)
words = [w * rng.randint(1, 3) for w in "fn let mut impl struct self match return pub use mod the a of to in".split()]
text = " ".join(rng.choice(words) for _ in range(300_000)).encode()

def size():
    roll = rng.random()
    if roll < 0.01:
        return rng.randint(8_192, 262_144)
    if roll < 0.15:
        return rng.randint(1_024, 8_192)
    return rng.randint(0, 1_024)

def blob(n):
    start = rng.randint(0, len(text) - n - 1)
    return text[start:start + n]

with open(os.path.join(root, ".gitignore"), "w") as f:
    f.write("*.log\ntarget/\n")
extensions = [".rs", ".py", ".md", ".json", ".txt"]
for d in range(1_000):
    folder = os.path.join(root, "src", f"m{d // 100:02}", f"d{d:04}")
    os.makedirs(folder)
    for j in range(100):
        with open(os.path.join(folder, f"f{j:02}{extensions[j % len(extensions)]}"), "wb") as f:
            f.write(blob(size()))
    with open(os.path.join(folder, "build.log"), "wb") as f:
        f.write(blob(512))
for d in range(10):
    folder = os.path.join(root, "target", f"t{d}")
    os.makedirs(folder)
    for j in range(100):
        with open(os.path.join(folder, f"o{j:02}.o"), "wb") as f:
            f.write(blob(size()))
PY
    git -C "$dir" init -q
    git -C "$dir" add -A
    git -C "$dir" -c user.name=bench -c user.email=bench@localhost commit -q -m "benchmark tree"
fi

echo "tree: $dir ($(git -C "$dir" ls-files | wc -l) tracked files)" >&2
git --version >&2
cargo bench --bench snapshot -- "$dir" "$runs"
