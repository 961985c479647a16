#!/usr/bin/env bash
# Delta sink benchmark (issue 5 figures): builds release binaries, then
# measures freshness (local and S3 via moto), sink throughput, compaction and
# commit rate with concurrent writers, and simulated pods handing off to one
# table committer vs committing themselves. Needs .venv (scripts/test.sh makes it).
# Extra arguments go to the bench binary (e.g. --seconds 20 --compact-seconds 600).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p sluice-server -p sluice-bench --features sluice-bench/sinkbench
exec target/release/sink-bench --sluice target/release/sluice "$@"
