#!/bin/sh
# Syntax gate throughput and agreement with CPython on CPython's standard library.
# Builds the benchmark binary first so that compiling is not timed; arguments go to
# bench/syntax_bench.py (--repeat N, --threads N, --json OUT, --keep DIR, --root DIR).
set -eu
cd "$(dirname "$0")/.."
cargo bench --quiet --bench syntax --no-run
exec python3 bench/syntax_bench.py "$@"
