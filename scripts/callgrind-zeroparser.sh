#!/usr/bin/env bash
# Callgrind instruction counts of zeroparser's append paths at a git revision (default: the
# working tree): 20 000 records each of a flat protobuf table (one unknown field per record),
# the same plus a repeated string column (value-tree path), and JSON records; with
# `_rescued_data` too where the revision has it. Counts only the append loops; deterministic,
# so a quiet machine is not needed. Needs valgrind. Usage: callgrind-zeroparser.sh [REV]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
rev="${1:-}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [ -n "$rev" ]; then
  git -C "$root" archive "$rev" zeroparser | tar -x -C "$work"
else
  cp -r "$root/zeroparser" "$work/"
fi
rm -rf "$work/zeroparser/fuzz"
# A workspace of zeroparser and the workload, inheriting the repository's workspace settings.
sed -e 's/^members = .*/members = ["zeroparser", "measure"]/' -e '/^exclude = /d' \
  -e '/^default-members = /d' "$root/Cargo.toml" > "$work/Cargo.toml"
cp "$root/Cargo.lock" "$work/"
mkdir -p "$work/measure/src"
cp "$root/scripts/callgrind-zeroparser/main.rs" "$work/measure/src/main.rs"
cat > "$work/measure/Cargo.toml" <<'TOML'
[package]
name = "zp-measure"
version = "0.0.0"
edition = "2021"
publish = false

[features]
rescue = []

[dependencies]
sluice-zeroparser = { path = "../zeroparser" }
prost.workspace = true
prost-types.workspace = true
TOML
features=()
modes=(plain)
if grep -rq "fn with_rescued_data" "$work/zeroparser/src"; then
  features=(--features rescue)
  modes=(plain rescue)
fi
target="$root/target/callgrind-zeroparser"
(cd "$work" && CARGO_TARGET_DIR="$target" cargo build --release -p zp-measure "${features[@]}")
for workload in flat nested json; do
  for mode in "${modes[@]}"; do
    count=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null \
      --toggle-collect='*run_proto*' --toggle-collect='*run_json*' \
      "$target/release/zp-measure" "$workload" "$mode" 2>&1 | sed -n 's/.*Collected : //p')
    echo "$workload $mode $count"
  done
done
