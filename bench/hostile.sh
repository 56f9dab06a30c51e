#!/usr/bin/env bash
# Wall time and peak memory of helixflow on hostile input, the figures in BENCHMARKS.md ("Hostile
# input"). Three inputs must each get a bounded, clear answer from every command that reads them:
# a 10 MB pipeline file on one line, a file of 100,000 nodes, and an 8 KiB bundle whose journal
# entry claims a gibibyte. Then the worst cases that fit inside the front end's limits
# (src/language/kdl/limits.rs), and the files that once hurt lint (a 10 MB node name, 20,000 unclosed
# braces, 10,000 problems on one line, scopes deeper than a path can be, a run of `{`), through
# `lint`; and a file of 100,000 errors through `fmt --check`.
#
# Usage: bench/hostile.sh [BINARY]     (default: target/release/helixflow; build it first)
# Needs bash, python3 and GNU time (/usr/bin/time).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/target/release/helixflow}
[[ -x $bin ]] || { echo "error: $bin is not an executable; build it first" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ROOT=$root python3 - "$tmp" <<'PY'
import io, json, os, sys, tarfile
d = sys.argv[1]
def write(name, text):
    with open(f"{d}/{name}", "w") as f:
        f.write(text)
head = 'pipeline "p"\n'
# The three inputs of the target.
parts, size = [], 0
while size < 10_000_000:
    part = 'phase "p%d" { prompt "x"; bogus 1 }; ' % len(parts)
    parts.append(part)
    size += len(part)
write("line-10mb.kdl", "".join(parts) + "\n")
write("nodes-100k.kdl", "".join('node%d "x" 1\n' % i for i in range(100_000)))
manifest = json.dumps({"format": "helixflow-bundle", "version": 1, "pipeline": "p",
                       "phase": "code", "run-id": "r1", "attempt": 1, "files": []}).encode()
with open(f"{d}/claims-1gib.hxb", "wb") as f:
    info = tarfile.TarInfo("manifest.json")
    info.size = len(manifest)
    f.write(info.tobuf(tarfile.GNU_FORMAT) + manifest + b"\0" * (-len(manifest) % 512))
    info = tarfile.TarInfo("journal/events.jsonl")
    info.size = 1 << 30
    f.write(info.tobuf(tarfile.GNU_FORMAT) + b"{" * 8192)
# The worst cases inside the limits (50,000 nodes, 100,000 entries, 2 MiB; the KDL parser's
# 32 KiB), each a different way to make the front end work.
write("phases-50k.kdl", head + "".join('phase "p%d"\n' % i for i in range(49_990)))
write("unknown-50k.kdl", head + "".join('node%d "x" 1\n' % i for i in range(49_990)))
write("entries-100k.kdl", head + 'phase "a" { run "true"; depends-on '
      + " ".join('"a"' for _ in range(99_990)) + " }\n")
write("string-2mib.kdl", head + 'phase "a" { run "' + "x" * (2 * 1024 * 1024 - 100) + '" }\n')
write("same-scope-16k.kdl", head + "".join(
    'phase "p%d" { run "true"; scope "s/**" }\n' % i for i in range(16_600)))
write("scope-chain-12k.kdl", head + 'phase "p0" { run "true"; scope "s/**" }\n' + "".join(
    'phase "p%d" { run "true"; scope "s/**"; depends-on "p%d" }\n' % (i, i - 1)
    for i in range(1, 12_490)))
write("protect-12k.kdl", head + "".join(
    'phase "p%d" { run "true"; scope "s/p%d/**"; protect "s/**" }\n' % (i, i)
    for i in range(12_400)))
write("template-x20k.kdl", head + 'template "t" {\n  param "n"\n  run "echo {{ n }}"\n'
      + '  description "' + "x" * 100_000 + '"\n}\n'
      + "".join('phase "p%d" use="t" n="p%d"\n' % (i, i) for i in range(20_000)))
with open(f"{d}/prompt.md", "w") as f:
    f.write("y" * (1024 * 1024))
write("prompt-file-x13k.kdl", head + "".join(
    'phase "p%d" { run "true"; prompt file="prompt.md" }\n' % i for i in range(13_000)))
write("malformed-32k.kdl", head + "a " + "a=" * 16_000 + " x=\n")
# Files that hurt lint before.
write("name-10mb.kdl", "a" * 10_000_000 + "\n")
write("braces-20k.kdl", 'phase "a" {' * 20_000 + "\n")
write("oneline-10k.kdl", " ".join("bogus%d;" % i for i in range(10_000)) + "\n")
# A scope deeper than any path (a run of 73,000 slashes), and 400 phases with scopes 4 KB deep
# whose names meet: the overlap check hashed every folder above a glob's folder whole.
write("deep-scope-73k.kdl", head + 'phase "a" { run "true"; scope "' + "/" * 73_000
      + 'tests/**" }\nphase "b" { run "true"; scope "tests/**" }\n')
# The fan-out example with 80,000 `{` in a gate's command before its `}}` (item placeholders were
# looked for again after each brace).
fan_out = open(os.path.join(os.environ["ROOT"], "examples/fan-out/pipeline.kdl")).read()
write("brace-run-80k.kdl", fan_out.replace('command "python3 {{', 'command "' + "{" * 80_000, 1))
# 100,000 stray `}`, a finding each: `fmt` reported every one (lint shows a hundred).
write("stray-braces-100k.kdl", head + "}\n" * 100_000)
write("deep-scopes-400.kdl", head + "".join(
    'phase "p%d" { run "true"; scope "%sx%d*" }\n' % (i, "a/" * 2040, i) for i in range(400)))
PY

# Runs helixflow with the given arguments in $tmp and prints one row of the table.
measure() {
    local label=$1 code=0; shift
    (cd "$tmp" && /usr/bin/time -v -o "$tmp/time" "$bin" "$@" >"$tmp/out" 2>&1) || code=$?
    local wall rss
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0;
        for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s }' "$tmp/time")
    rss=$(awk -F': ' '/Maximum resident set size/ { printf "%.0f", $2 / 1024 }' "$tmp/time")
    if grep -q panicked "$tmp/out"; then code="$code (panic)"; fi
    local said
    said=$({ grep -o 'HF[0-9][0-9][0-9]\|the archive ends inside it' "$tmp/out" || true; } |
        sort -u | head -3 | tr '\n' ' ')
    printf '%-34s %6s %8s %10s %12s  %s\n' "$label" "$code" "$wall" "$rss" \
        "$(wc -c <"$tmp/out")" "$said"
}

echo "binary: $bin"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-34s %6s %8s %10s %12s  %s\n' "input / command" exit "wall s" "peak MiB" \
    "answer bytes" "said"
for file in line-10mb nodes-100k; do
    measure "$file: lint" lint "$file.kdl"
    measure "$file: lint --format json" lint --format json "$file.kdl"
    measure "$file: fmt --check" fmt --check "$file.kdl"
    measure "$file: compile" compile "$file.kdl"
    measure "$file: run --dry-run" run --dry-run "$file.kdl"
    measure "$file: status" status "$file.kdl"
done
mkdir -p "$tmp/ws"
measure "claims-1gib: bundle show" bundle show claims-1gib.hxb
measure "claims-1gib: bundle apply --check" bundle apply --check -C ws claims-1gib.hxb
for file in phases-50k unknown-50k entries-100k string-2mib same-scope-16k scope-chain-12k \
    protect-12k template-x20k prompt-file-x13k malformed-32k name-10mb braces-20k oneline-10k \
    deep-scope-73k deep-scopes-400 brace-run-80k stray-braces-100k; do
    measure "$file: lint" lint "$file.kdl"
done
measure "stray-braces-100k: fmt --check" fmt --check stray-braces-100k.kdl
