#!/usr/bin/env bash
# Runs zeroparser-bench (bench/src/bin/zeroparser_bench): prost, prost-reflect, the official
# Zerobus zeroparser and Sluice's zeroparser on the same bytes; prints Markdown tables.
# Extra arguments go to the benchmark, e.g. --trials 3 --filter NEOWISE.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo run --release -p sluice-bench --features decoders --bin zeroparser-bench -- "$@"
