#!/usr/bin/env bash
# Builds the repository bench/costs.sh measures isolation on, from what this machine already has:
# about 11,500 tracked files (the Rust crate sources under ~/.cargo/registry/src, topped up with
# Python's standard library), committed, and a Python virtual environment in an ignored `.venv/`.
#
# The virtual environment is a copy of one that pip installed here before (the e2e suite's Aider,
# $HELIXFLOW_E2E_CACHE/aider-0.86.2: 687 MB, 18,000 files) when there is one; else pip installs
# aider-chat into it from PyPI, as that suite does.
#
# Usage: bench/gen_isolation_repo.sh DIR [FILES]     (FILES: tracked files, default 11500)
set -euo pipefail
dir=$1
files=${2:-11500}
cache=${HELIXFLOW_E2E_CACHE:-$HOME/.cache/helixflow-e2e}
registry=${CARGO_HOME:-$HOME/.cargo}/registry/src
note() { echo "gen_isolation_repo.sh: $*" >&2; }

if [ -e "$dir/.git" ]; then
    note "$dir is already a repository: kept as it is"
    exit 0
fi
mkdir -p "$dir/src"
# The crate sources, as many as fit; then the standard library of the Python that runs this.
stdlib=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
python3 - "$dir/src" "$files" "$registry" "$stdlib" <<'PY'
import os, shutil, sys
out, wanted, sources = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
copied = 0
for root_dir in sources:
    for root, dirs, names in os.walk(root_dir):
        dirs.sort()
        # Nothing a .gitignore inside would hide, and no nested repositories.
        dirs[:] = [d for d in dirs if d not in (".git", "__pycache__", "target", "site-packages")]
        for name in sorted(names):
            if copied >= wanted:
                sys.exit(0)
            if name in (".gitignore", ".gitattributes", ".cargo-ok", ".cargo_vcs_info.json"):
                continue
            source = os.path.join(root, name)
            if not os.path.isfile(source) or os.path.islink(source):
                continue
            label = os.path.basename(root_dir.rstrip("/"))
            target = os.path.join(out, label, os.path.relpath(source, root_dir))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(source, target)
            copied += 1
sys.exit(0 if copied >= wanted else f"only {copied} files found, {wanted} wanted")
PY
printf '.venv/\n__pycache__/\n' >"$dir/.gitignore"
git -C "$dir" init -q
git -C "$dir" add -A
git -C "$dir" -c user.name=bench -c user.email=bench@example.invalid commit -q -m "the tree"
if [ -d "$cache/aider-0.86.2" ]; then
    note "copying the virtual environment pip made in $cache/aider-0.86.2"
    cp -a "$cache/aider-0.86.2" "$dir/.venv"
else
    note "installing aider-chat==0.86.2 from PyPI into $dir/.venv"
    python3 -m venv "$dir/.venv"
    "$dir/.venv/bin/pip" install --quiet aider-chat==0.86.2
fi
note "$(git -C "$dir" ls-files | wc -l) tracked files ($(du -sh --exclude=.git --exclude=.venv "$dir" | cut -f1)), .venv $(du -sh "$dir/.venv" | cut -f1) in $(find "$dir/.venv" -type f | wc -l) files"
