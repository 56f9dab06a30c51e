#!/usr/bin/env bash
# Wall time and peak memory of `helixflow lint` on hostile pipeline files: a 10 MB single line of
# phases, a 10 MB node name, 100,000 unknown nodes, 20,000 unclosed braces and 10,000 problems on
# one line. Each file must get a bounded answer (no panic); the figures go into BENCHMARKS.md.
#
# Usage: bench/hostile.sh [BINARY]     (default: target/debug/helixflow; build it first)
# Needs bash, python3 and GNU time (/usr/bin/time).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/target/debug/helixflow}
[[ -x $bin ]] || { echo "error: $bin is not an executable; build it first" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

python3 - "$tmp" <<'PY'
import sys
d = sys.argv[1]
def write(name, text):
    with open(f"{d}/{name}", "w") as f:
        f.write(text)
parts, size = [], 0
while size < 10_000_000:
    part = 'phase "p%d" { prompt "x"; bogus 1 }; ' % len(parts)
    parts.append(part)
    size += len(part)
write("line-10mb.kdl", "".join(parts) + "\n")
write("name-10mb.kdl", "a" * 10_000_000 + "\n")
write("nodes-100k.kdl", "".join('node%d "x" 1\n' % i for i in range(100_000)))
write("braces-20k.kdl", 'phase "a" {' * 20_000 + "\n")
write("oneline-10k.kdl", " ".join("bogus%d;" % i for i in range(10_000)) + "\n")
PY

echo "binary: $bin"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-18s %10s %6s %10s %12s %12s\n' file bytes exit "wall s" "peak MiB" "output bytes"
for file in line-10mb name-10mb nodes-100k braces-20k oneline-10k; do
    for format in human json; do
        code=0
        /usr/bin/time -v -o "$tmp/time" "$bin" lint --format "$format" "$tmp/$file.kdl" \
            >"$tmp/out" 2>&1 || code=$?
        wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0;
            for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s }' "$tmp/time")
        rss=$(awk -F': ' '/Maximum resident set size/ { printf "%.0f", $2 / 1024 }' "$tmp/time")
        if grep -q panicked "$tmp/out"; then code="$code (panic)"; fi
        printf '%-18s %10s %6s %10s %12s %12s\n' "$file/$format" "$(wc -c <"$tmp/$file.kdl")" \
            "$code" "$wall" "$rss" "$(wc -c <"$tmp/out")"
    done
done
