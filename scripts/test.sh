#!/usr/bin/env bash
# Runs every test of Sluice. On a fresh machine it first installs what the tests
# need (idempotent: a second run skips what is already there):
#   - Debian packages: etcd-server (the real etcd the cluster tests start), etcd-client
#     (etcdctl, which the etcd-auth tests use to create users and enable auth) and libfuse2
#     (the FUSE library fusepy drives: tests/fuse/faulty_fs.py, the WAL's fdatasync-error
#     test; as root it mounts without fusermount) and prometheus (its `promtool check rules`
#     checks deploy/prometheus/alerts.yaml in tests/python/test_dashboards.py) and chromium
#     (the headless browser tests/python/test_status_page.py loads the status page in) and
#     mosquitto-clients (mosquitto_pub, a real MQTT client of tests/python/test_mqtt.py) and
#     kcat (the Kafka CLI producer of tests/python/test_kafka.py);
#   - a Python virtualenv (.venv) with the official Python Zerobus SDK,
#     deltalake, polars, pytest, moto's S3 server and fusepy (tests/python/requirements.txt);
#     the Rust integration tests start their own `moto_server` processes from it
#     (a real S3-compatible server on loopback, one per test, killed after it);
# (no protoc: every protobuf code generator in the build, ours and the official Rust SDK's,
# uses the protoc the protoc-bin-vendored crate ships); then checks formatting and clippy
# (-D warnings, all targets, bench features), proves that the server builds
# with a protoc that always fails (scripts/check-no-protoc.sh), builds and runs the Rust
# tests (unit, property and integration tests, the integration tests drive real `sluice`
# processes with the official Rust SDK), the official Rust SDK 3.0.0 interop tests
# (scripts/interop-sdk3.sh) and the Python SDK tests.
set -euo pipefail
cd "$(dirname "$0")/.."
# A full run from scratch gains nothing from incremental compilation, whose caches took
# 2.7 GB of a clean clone's 8.9 GB target dir; CI's disk once ran out during this build.
export CARGO_INCREMENTAL=0

missing=()
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
command -v etcdctl >/dev/null 2>&1 || missing+=(etcd-client)
ldconfig -p 2>/dev/null | grep 'libfuse\.so\.2 ' >/dev/null || missing+=(libfuse2)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
command -v mosquitto_pub >/dev/null 2>&1 || missing+=(mosquitto-clients)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
# kubectl renders the kustomizations in tests/python/test_deploy.py; Debian does not package
# it (Google's or Kubernetes' apt repository does): installed when an apt source offers it,
# otherwise that test fails naming it.
if ! command -v kubectl >/dev/null 2>&1 && apt-cache show kubectl >/dev/null 2>&1; then
  missing+=(kubectl)
fi
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

venv=.venv
requirements=tests/python/requirements.txt
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
stamp="$venv/.requirements.sha256"
want=$(sha256sum "$requirements" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
  echo "$want" > "$stamp"
fi

# Style is part of the suite: formatting, and clippy with warnings as errors over every
# target, the feature-gated benchmark binaries included (`peers` is left out: it builds
# RocksDB from C++ source, ~10 min on 2 cores, and only adds the message-queue peers).
cargo fmt --all --check
cargo fmt --manifest-path interop/sdk3/Cargo.toml --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo clippy -p sluice-bench --all-targets --locked --features e2e,decoders,sinkbench,walbench,formatbench,otlpbench,sdkbench,kafkabench -- -D warnings

# No import cycles between the modules of any crate (exit 1 and the cycle on one).
for crate in proto zeroparser wal status router server sdk bench; do
  python3 scripts/module-cycles.py "$crate/src" >/dev/null || python3 scripts/module-cycles.py "$crate/src"
done
scripts/check-no-protoc.sh
cargo test --workspace --locked
# WAL fault injection (short writes, EIO, ENOSPC, power cuts): its own feature-gated target.
cargo test --locked -p sluice-wal --features failpoints --test failpoints
# The WAL's integration and fault-injection suites again with segments written O_DIRECT.
SLUICE_WAL_DIRECT_IO=1 cargo test --locked -p sluice-wal --test it
SLUICE_WAL_DIRECT_IO=1 cargo test --locked -p sluice-wal --features failpoints --test failpoints
# The binary with the opt-in `jemalloc` feature (an allocator built with `make`).
cargo test --locked -p sluice-server --features jemalloc --test it allocator

# The official Rust SDK 3.0.0 (persistent streams, `eos`) against the debug server: its own
# crate and lock outside the workspace (interop/sdk3, README there).
scripts/interop-sdk3.sh

# Only a failed test's tmp_path is kept: every test's pod preallocates a 64 MiB WAL segment
# there, and the passed tests' folders were 3.7 GB of disk at the end of a run.
SLUICE_BIN="$PWD/target/debug/sluice" "$venv/bin/python" -m pytest -q \
  -o tmp_path_retention_policy=failed tests/python
