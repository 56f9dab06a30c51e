#!/usr/bin/env python3
"""Writes one layered DAG three ways, for the no-op benchmark of bench/uptodate.sh.

Usage: gen_uptodate.py DIR [PHASES] [WIDTH]

Each phase (default 1,000, in layers of WIDTH=50) reads 3 input files of its own and the outputs
of 1-3 phases of the layer before, and writes 2 output files. The same graph is written as
pipeline.kdl (helixflow: `inputs`, `outputs`, `depends-on`, a `run` step), build.ninja (ninja:
explicit inputs and outputs) and Taskfile.yml (Task: `sources`, `generates`, `deps`). Every step
writes its outputs with the same command.
"""
import os
import random
import sys

out_dir = sys.argv[1]
phases = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
width = int(sys.argv[3]) if len(sys.argv) > 3 else 50
rng = random.Random(7)
os.makedirs(os.path.join(out_dir, "in"), exist_ok=True)
os.makedirs(os.path.join(out_dir, "out"), exist_ok=True)

deps = []
for i in range(phases):
    layer = i // width
    if layer == 0:
        deps.append([])
    else:
        before = list(range((layer - 1) * width, layer * width))
        deps.append(sorted(rng.sample(before, rng.randint(1, 3))))


def inputs(i):
    return [f"in/p{i}_{k}.txt" for k in range(3)]


def outputs(i):
    return [f"out/p{i}_{k}.txt" for k in range(2)]


for i in range(phases):
    for path in inputs(i):
        with open(os.path.join(out_dir, path), "w") as f:
            f.write(f"input {path}\n")

kdl = ['pipeline "uptodate" {', '    max-parallel 2', '}']
for i in range(phases):
    kdl.append(f'phase "p{i}" {{')
    command = " && ".join(f"echo {i} > {o}" for o in outputs(i))
    kdl.append(f'    run "{command}"')
    if deps[i]:
        kdl.append("    depends-on " + " ".join(f'"p{d}"' for d in deps[i]))
    ins = inputs(i) + [o for d in deps[i] for o in outputs(d)]
    kdl.append("    inputs { " + "; ".join(f'file "{p}"' for p in ins) + " }")
    kdl.append("    outputs { " + "; ".join(f'file "{p}"' for p in outputs(i)) + " }")
    kdl.append("}")
with open(os.path.join(out_dir, "pipeline.kdl"), "w") as f:
    f.write("\n".join(kdl) + "\n")

ninja = ["rule step", "  command = sh -c '$cmd'", ""]
for i in range(phases):
    ins = inputs(i) + [o for d in deps[i] for o in outputs(d)]
    command = " && ".join(f"echo {i} > {o}" for o in outputs(i))
    ninja.append(f"build {' '.join(outputs(i))}: step {' '.join(ins)}")
    ninja.append(f"  cmd = {command}")
with open(os.path.join(out_dir, "build.ninja"), "w") as f:
    f.write("\n".join(ninja) + "\n")

# `run: once`: a task several others depend on runs once per invocation, as in a DAG.
task = ["version: '3'", "run: once", "tasks:"]
for i in range(phases):
    task.append(f"  p{i}:")
    if deps[i]:
        task.append("    deps: [" + ", ".join(f"p{d}" for d in deps[i]) + "]")
    task.append("    sources: [" + ", ".join(inputs(i) + [o for d in deps[i] for o in outputs(d)]) + "]")
    task.append("    generates: [" + ", ".join(outputs(i)) + "]")
    command = " && ".join(f"echo {i} > {o}" for o in outputs(i))
    task.append(f"    cmds: ['{command}']")
leaves = set(range(phases)) - {d for ds in deps for d in ds}
task.append("  default:")
task.append("    deps: [" + ", ".join(f"p{i}" for i in sorted(leaves)) + "]")
with open(os.path.join(out_dir, "Taskfile.yml"), "w") as f:
    f.write("\n".join(task) + "\n")
