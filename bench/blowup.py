#!/usr/bin/env python3
"""Blows up the bundled examples as the engine suite's property test does and times helixflow on
each result, printing those slower than a limit (and keeping them for a look).

A blow-up is a slice of an example repeated 100-3,000 times, or a run of 60,000-90,000 of one of
`x9{}"; \\n/-#`, one to three of them per file (tests/engine/proptest_lint.rs,
`blown_up_pipelines_get_a_bounded_lint_report`). This found the quadratic paths listed in
BENCHMARKS.md ("Hostile input": scopes deeper than a path, a run of `{`, `fmt` reporting every
error).

Usage: bench/blowup.py BINARY CASES SEED [COMMAND...]
  COMMAND   the helixflow arguments before the file, one per run, each as one string
            (default: "lint --format human" "lint --format json")
Environment: SLOW (seconds, default 1.0): a run slower than this is printed and its input kept in
  the output folder (OUT, default: a folder in /tmp).
"""
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def examples():
    found = []
    for folder, _, files in os.walk(os.path.join(ROOT, "examples")):
        if "pipeline.kdl" in files:
            with open(os.path.join(folder, "pipeline.kdl")) as f:
                found.append(f.read())
    return found


def blow_up(rnd, text):
    for _ in range(rnd.randint(1, 3)):
        at = rnd.randint(0, len(text))
        if rnd.random() < 0.5:
            end = min(at + rnd.randint(1, 39), len(text))
            text = text[:end] + text[at:end] * rnd.randint(100, 2_999) + text[end:]
        else:
            run = rnd.choice('x9{}"; \n/-#') * rnd.randint(60_000, 89_999)
            text = text[:at] + run + text[at:]
    return text


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    binary, cases, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    # Run from the case's folder: a path to the binary is taken from here.
    if os.sep in binary:
        binary = os.path.abspath(binary)
    commands = [shlex.split(c) for c in sys.argv[4:]] or [
        ["lint", "--format", "human"], ["lint", "--format", "json"]]
    slow = float(os.environ.get("SLOW", "1.0"))
    out = os.environ.get("OUT") or tempfile.mkdtemp(prefix="helixflow-blowup-")
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="helixflow-blowup-case-")
    rnd = random.Random(seed)
    bases = examples()
    worst = 0.0
    for case in range(cases):
        text = blow_up(rnd, rnd.choice(bases))
        with open(os.path.join(work, "pipeline.kdl"), "w") as f:
            f.write(text)
        for command in commands:
            start = time.monotonic()
            try:
                subprocess.run([binary, *command, "pipeline.kdl"], cwd=work,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={**os.environ, "NO_COLOR": "1"}, timeout=60)
                took = time.monotonic() - start
            except subprocess.TimeoutExpired:
                took = 60.0
            worst = max(worst, took)
            if took > slow:
                kept = os.path.join(out, f"slow-{seed}-{case}.kdl")
                with open(kept, "w") as f:
                    f.write(text)
                print(f"{took:5.1f} s  case {case}  {' '.join(command)}  {len(text)} bytes  {kept}",
                      flush=True)
    print(f"{cases} cases, seed {seed}: slowest run {worst:.2f} s")


if __name__ == "__main__":
    main()
