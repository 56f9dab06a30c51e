#!/usr/bin/env python3
"""Compare helixflow's `syntax` gate with CPython on the CPython standard library.

Lists every .py file under CPython's stdlib (site-packages excluded), times `ast.parse` on each in
this one process, runs helixflow's checker on the same files (`cargo bench --bench syntax`, two
threads), then prints both throughputs, their ratio, and every file on which the verdicts differ
from `compile(source, path, "exec")`'s (untimed: the gate's verdict is compile()'s).
Then compares the TOML verdicts with `tomllib` on the stdlib's own TOML test data (valid and
invalid documents), when that folder exists.

Usage: bench/syntax_bench.py [--repeat N] [--threads N] [--json OUT] [--keep DIR] [--root DIR]
"""

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
import time
import warnings

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def python_files(root):
    files = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "site-packages")
        files.extend(os.path.join(folder, n) for n in sorted(names) if n.endswith(".py"))
    return files


def cpython_pass(files):
    """One timed pass: the verdict per file (None when it parses, else the error) and seconds."""
    verdicts = {}
    started, cpu_started = time.perf_counter(), time.process_time()
    for path in files:
        try:
            with open(path, "rb") as f:
                source = f.read()
            ast.parse(source, filename=path)
            verdicts[path] = None
        except SyntaxError as e:  # IndentationError and TabError included
            verdicts[path] = f"{e.lineno}:{e.offset}: {type(e).__name__}: {e.msg}"
        except (ValueError, UnicodeDecodeError, RecursionError, MemoryError) as e:
            verdicts[path] = f"{type(e).__name__}: {e}"
    return verdicts, time.perf_counter() - started, time.process_time() - cpu_started


def compile_verdicts(files):
    """The gate's reference verdict, untimed: `compile(source, path, "exec")`, which also rejects
    what CPython's compiler finds after the parse (`return` outside a function, …)."""
    verdicts = {}
    for path in files:
        try:
            with open(path, "rb") as f:
                source = f.read()
            compile(source, path, "exec", dont_inherit=True)
            verdicts[path] = None
        except SyntaxError as e:
            verdicts[path] = f"{e.lineno}:{e.offset}: {type(e).__name__}: {e.msg}"
        except (ValueError, UnicodeDecodeError, RecursionError, MemoryError) as e:
            verdicts[path] = f"{type(e).__name__}: {e}"
    return verdicts


def helixflow_pass(list_path, invalid_path, threads):
    env = dict(os.environ, HELIXFLOW_SYNTAX_THREADS=str(threads))
    run = subprocess.run(
        ["cargo", "bench", "--quiet", "--bench", "syntax", "--", list_path, invalid_path],
        cwd=REPO, env=env, capture_output=True, text=True,
    )
    if run.returncode != 0:
        sys.exit(f"cargo bench --bench syntax failed:\n{run.stdout}\n{run.stderr}")
    match = re.search(r"syntax-result .* seconds=([0-9.]+) cpu_seconds=([0-9.]+)", run.stdout)
    if not match:
        sys.exit(f"no result line in the benchmark's output:\n{run.stdout}")
    verdicts = {}
    with open(invalid_path, encoding="utf-8") as f:
        for line in f:
            path, _, message = line.rstrip("\n").partition("\t")
            verdicts[path] = message
    return verdicts, float(match.group(1)), float(match.group(2))


def compare_toml(root, work):
    """helixflow's TOML verdicts against tomllib's on test/test_tomllib/data; the disagreements."""
    data = os.path.join(root, "test", "test_tomllib", "data")
    if not os.path.isdir(data):
        print("no tomllib test data in this stdlib; TOML comparison skipped")
        return None
    import tomllib

    files = []
    for folder, dirs, names in os.walk(data):
        dirs.sort()
        files.extend(os.path.join(folder, n) for n in sorted(names) if n.endswith(".toml"))
    theirs = {}
    for path in files:
        try:
            with open(path, "rb") as f:
                tomllib.load(f)
            theirs[path] = None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            theirs[path] = str(e)
    list_path = os.path.join(work, "toml-files.txt")
    with open(list_path, "w", encoding="utf-8") as f:
        f.write("".join(p + "\n" for p in files))
    ours, _, _ = helixflow_pass(list_path, os.path.join(work, "toml-invalid.txt"), 2)
    disagreements = [
        {"file": os.path.relpath(p, data), "tomllib": theirs[p] or "parses", "helixflow": ours.get(p, "parses")}
        for p in files
        if (theirs[p] is None) != (p not in ours)
    ]
    rejected = sum(1 for v in theirs.values() if v is not None)
    print(f"TOML: {len(files)} files of tomllib's test data, tomllib rejects {rejected}, "
          f"helixflow rejects {len(ours)}; disagreements: {len(disagreements)}")
    for d in disagreements:
        print(f"  {d['file']}\n    tomllib:   {d['tomllib']}\n    helixflow: {d['helixflow']}")
    return disagreements


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed passes per side; the best counts")
    parser.add_argument("--threads", type=int, default=2, help="helixflow's checker threads")
    parser.add_argument("--json", help="also write the figures and disagreements here")
    parser.add_argument("--keep", help="keep the file list and verdicts in this folder")
    parser.add_argument("--root", help="compare on the .py files under this folder instead of the stdlib")
    args = parser.parse_args()

    root = os.path.abspath(args.root) if args.root else sysconfig.get_paths()["stdlib"]
    files = python_files(root)
    total_bytes = sum(os.path.getsize(p) for p in files)
    work = args.keep or tempfile.mkdtemp(prefix="helixflow-syntax-bench-")
    os.makedirs(work, exist_ok=True)
    list_path = os.path.join(work, "files.txt")
    with open(list_path, "w", encoding="utf-8") as f:
        f.write("".join(p + "\n" for p in files))
    mb = total_bytes / 1e6
    print(f"{sys.implementation.name} {sys.version.split()[0]}, files under: {root}")
    print(f"{len(files)} files, {mb:.1f} MB (site-packages excluded)")

    # Read every file once so neither side pays for a cold page cache.
    for path in files:
        with open(path, "rb") as f:
            f.read()

    warnings.simplefilter("ignore")  # invalid escape sequences and the like are warnings, not errors
    invalid_path = os.path.join(work, "helixflow-invalid.txt")
    load_before = os.getloadavg()
    # Alternate the two sides so that a neighbour's load hits both alike.
    cpython_runs, helix_runs = [], []
    for _ in range(args.repeat):
        cpython, seconds, cpu = cpython_pass(files)
        cpython_runs.append((seconds, cpu))
        helixflow, seconds, cpu = helixflow_pass(list_path, invalid_path, args.threads)
        helix_runs.append((seconds, cpu))

    best_cpython, best_helix = min(cpython_runs), min(helix_runs)
    cpython_rate, helix_rate = mb / best_cpython[0], mb / best_helix[0]
    cpython_cpu_rate, helix_cpu_rate = mb / best_cpython[1], mb / best_helix[1]
    print(f"load average before: {' '.join(f'{x:.2f}' for x in load_before)} on {os.cpu_count()} CPUs")
    print(f"CPython ast.parse, 1 process: {best_cpython[0]:.3f} s ({best_cpython[1]:.3f} s CPU), "
          f"{cpython_rate:.1f} MB/s, {len(files) / best_cpython[0]:.0f} files/s (best of {args.repeat})")
    print(f"helixflow check_file, {args.threads} threads: {best_helix[0]:.3f} s ({best_helix[1]:.3f} s CPU), "
          f"{helix_rate:.1f} MB/s, {len(files) / best_helix[0]:.0f} files/s (best of {args.repeat})")
    print(f"ratio (wall): {helix_rate / cpython_rate:.2f}x CPython")
    print(f"ratio (per CPU second): {helix_cpu_rate / cpython_cpu_rate:.2f}x CPython")

    # The throughput is ast.parse's; the verdicts to agree with are compile()'s.
    cpython = compile_verdicts(files)
    cpython_invalid = sorted(p for p, v in cpython.items() if v is not None)
    print(f"CPython compile() rejects {len(cpython_invalid)} files; helixflow rejects {len(helixflow)}")
    disagreements = []
    for path in files:
        theirs, ours = cpython[path], helixflow.get(path)
        if (theirs is None) != (ours is None):
            disagreements.append({
                "file": os.path.relpath(path, root),
                "cpython": theirs or "parses",
                "helixflow": ours or "parses",
            })
    print(f"disagreements: {len(disagreements)}")
    for d in disagreements:
        print(f"  {d['file']}\n    CPython:   {d['cpython']}\n    helixflow: {d['helixflow']}")
    agreed_invalid = [p for p in cpython_invalid if p in helixflow]
    print(f"both reject ({len(agreed_invalid)}):")
    for path in agreed_invalid:
        print(f"  {os.path.relpath(path, root)}\n    CPython:   {cpython[path]}\n    helixflow: {helixflow[path]}")

    toml_disagreements = compare_toml(root, work)

    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({
                "python": sys.version.split()[0],
                "stdlib": root,
                "files": len(files),
                "bytes": total_bytes,
                "cpython_runs_wall_cpu": cpython_runs,
                "helixflow_runs_wall_cpu": helix_runs,
                "helixflow_threads": args.threads,
                "ratio_wall": helix_rate / cpython_rate,
                "ratio_cpu": helix_cpu_rate / cpython_cpu_rate,
                "load_average_before": load_before,
                "cpython_invalid": len(cpython_invalid),
                "helixflow_invalid": len(helixflow),
                "disagreements": disagreements,
                "toml_disagreements": toml_disagreements,
            }, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
