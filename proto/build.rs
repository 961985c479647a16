//! Generates the crate's tonic/prost code with the protoc binary that
//! `protoc-bin-vendored` ships, so a fresh machine needs no system protoc:
//! the Zerobus v1 service (server and client), the internal pod-to-pod
//! services (`sluice.cluster.v1`, server and client) and the part of etcd's v3 API
//! Sluice's own etcd client uses (client only).

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: build scripts are single-threaded; nothing else reads the environment concurrently.
    unsafe { std::env::set_var("PROTOC", protoc) };
    let include = protoc_bin_vendored::include_path()?;
    println!("cargo:rerun-if-changed=proto");
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .bytes(".")
        .compile_protos(
            &[PathBuf::from("proto/zerobus.proto")],
            &[PathBuf::from("proto"), include.clone()],
        )?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_protos(
            &[
                PathBuf::from("proto/cluster.proto"),
                PathBuf::from("proto/pstreams.proto"),
            ],
            &[PathBuf::from("proto"), include.clone()],
        )?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(false)
        .compile_protos(
            &[
                PathBuf::from("proto/etcd/kv.proto"),
                PathBuf::from("proto/etcd/rpc.proto"),
            ],
            &[PathBuf::from("proto"), include],
        )?;
    Ok(())
}
