#!/usr/bin/env bash
# Interop tests of the official Rust Zerobus SDK 3.0.0 (features eos + testing) against a
# real `sluice serve` (interop/sdk3, see its README.md). Outside the workspace: its own
# Cargo.lock and a [patch.crates-io] shim for webpki-roots 1.0.11, which SDK 3.0.0 asks for.
# Builds into target/interop-sdk3 (beside the workspace's own target dirs, nothing else to
# cache) and tests the debug `sluice` binary, building it first if it is missing.
# Environment: SLUICE_BIN (default target/debug/sluice), SLUICE_PYTHON (default
# .venv/bin/python, needs polars + deltalake: scripts/test.sh installs them).
# Usage: scripts/interop-sdk3.sh [TEST FILTER and cargo test args]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export SLUICE_BIN="${SLUICE_BIN:-$root/target/debug/sluice}"
export SLUICE_PYTHON="${SLUICE_PYTHON:-$root/.venv/bin/python}"
if [ ! -x "$SLUICE_BIN" ]; then
  cargo build --locked -p sluice-server --bin sluice
fi
export CARGO_TARGET_DIR="$root/target/interop-sdk3"
cd interop/sdk3
cargo test --locked "$@"
