#!/usr/bin/env bash
# Proves that `cargo run --release -- serve` needs no system protoc (a fresh machine has only
# the Rust toolchain and a C compiler): builds `sluice-server` with a `protoc` that always
# fails first on PATH and in PROTOC, in the normal target dir.
#
# It builds the server's test targets (`cargo test --no-run`, the binary among them), not a
# bare `cargo build -p sluice-server`: the dev-dependencies change how features unify, so a
# bare build compiles tokio, arrow, parquet, deltalake and ~450 more crates a second time
# (their rlib hashes differ), which `cargo test --workspace` then cannot reuse: about 1.5 GB
# of a clean clone's target dir by difference (8.9 GB before, 4.66 GB after, less 2.7 GB of
# incremental caches that scripts/test.sh now turns off). With the
# test targets, the workspace test right after finds every one of these artifacts fresh.
#
# A build script that generates protobuf code does not rerun on its own when PATH or PROTOC
# change (prost-build tracks neither), so a dependency built earlier with a system protoc
# would pass unseen. The dependencies (outside this workspace) that generate protobuf code at
# build time, those with a build dependency on a protobuf code generator, are therefore
# cleaned first and rebuild under the failing protoc. This workspace's own build scripts
# (proto/build.rs) rerun whenever they change, and run under the stub on a clean clone.
set -euo pipefail
cd "$(dirname "$0")/.."

stub=$(mktemp -d)
trap 'rm -rf "$stub"' EXIT
cat > "$stub/protoc" <<'STUB'
#!/bin/sh
echo "check-no-protoc: a build script ran the system protoc ($0 $*)" >&2
exit 1
STUB
chmod +x "$stub/protoc"

# Dependencies of the server's build (normal and build edges, outside the workspace) whose
# build script generates protobuf code.
generators=$(cargo metadata --format-version 1 --locked --filter-platform "$(rustc -vV | sed -n "s/^host: //p")" | python3 -c '
import json, sys
GENERATORS = {"prost-build", "tonic-build", "tonic-prost-build", "protobuf-codegen",
              "protoc-rust", "protobuf-build", "pbjson-build", "protoc-bin-vendored"}
meta = json.load(sys.stdin)
nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
names = {p["id"]: p["name"] for p in meta["packages"]}
members = set(meta["workspace_members"])
root = next(p["id"] for p in meta["packages"] if p["name"] == "sluice-server")
seen, todo, found = {root}, [root], set()
while todo:
    node = nodes[todo.pop()]
    for dep in node["deps"]:
        kinds = {k["kind"] for k in dep["dep_kinds"]}
        if "build" in kinds and names[dep["pkg"]] in GENERATORS and node["id"] not in members:
            found.add(names[node["id"]])
        if kinds & {None, "build"} and dep["pkg"] not in seen:
            seen.add(dep["pkg"])
            todo.append(dep["pkg"])
print(" ".join(sorted(found)))
')
echo "check-no-protoc: dependencies that generate protobuf code at build time: ${generators:-none}"
for package in $generators; do
  cargo clean --locked --quiet -p "$package"
done

if ! PATH="$stub:$PATH" PROTOC="$stub/protoc" cargo test --locked -p sluice-server --no-run; then
  echo "check-no-protoc: FAILED: building sluice-server needs a system protoc" >&2
  exit 1
fi
echo "check-no-protoc: ok, sluice-server builds without a system protoc"
