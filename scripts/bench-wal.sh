#!/usr/bin/env bash
# WAL benchmark (issue 4 figures): the seed recipe (2300-byte records, one writer, fdatasync
# per record) through Sluice's WAL beside `fio --rw=write --ioengine=sync --fdatasync=1
# --size=22m --bs=2300` on the same directory, then group-commit scaling (1/16/256
# appenders, 200 B and 2300 B records). Prints tables.
# Usage: scripts/bench-wal.sh [--dir DIR] [--seconds N]   (dir default: target/wal-bench)
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v fio >/dev/null 2>&1; then
    apt-get update
    apt-get install -y fio
fi
cargo build --release -p sluice-bench --features walbench --bin wal-bench
exec target/release/wal-bench "$@"
