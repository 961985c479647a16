#!/usr/bin/env bash
# Crash torture (issue 4): SIGKILLs a real `sluice serve` at random instants under load
# from 8 official-SDK streams, restarts it, repeats; then checks that Delta holds every
# acked id and that only ids unacked at some kill repeat. Prints one summary line.
# Usage: scripts/torture.sh [KILLS]   (default 100)
set -euo pipefail
cd "$(dirname "$0")/.."
export SLUICE_TORTURE_KILLS="${1:-100}"
exec cargo test --release -p sluice-server --test it crash_torture -- --nocapture
