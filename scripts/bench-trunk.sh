#!/usr/bin/env bash
# Trunk benchmark (issue 2 figures): builds release binaries, then pushes
# ~200-byte proto records with the official Rust SDK through a real
# `sluice serve`, 1 and 16 streams, and prints records/s, MB/s, ack latency
# and freshness. Extra arguments go to the bench binary (e.g. --seconds 20).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p sluice-server -p sluice-bench --features sluice-bench/e2e
exec target/release/trunk-bench --sluice target/release/sluice "$@"
