#!/usr/bin/env bash
# Cluster benchmark (issue 6 figures): builds release binaries, then runs etcd, pods and
# routers on loopback with official-SDK producers and prints four tables: router overhead,
# placement balance, drain time and ack stall, commit rate on one table. Needs `etcd` on
# PATH (Debian etcd-server; scripts/test.sh installs it). Extra arguments go to the bench
# binary (e.g. --seconds 20 --only overhead,drain).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p sluice-server -p sluice-bench --features sluice-bench/e2e
exec target/release/cluster-bench --sluice target/release/sluice "$@"
