//! Integration tests of the `sluice` binary, compiled as one test binary to
//! keep link times down. Every test drives real `sluice serve` processes on
//! loopback; producers are the official Zerobus Rust SDK (`=2.12.0`) or a raw
//! tonic client for protocol errors; Delta tables are read back with the
//! `deltalake` crate.

mod allocator;
mod audit;
mod auth;
mod auth_gate;
mod avro;
mod bad_input;
mod bench_produce;
mod catalog_etcd;
mod cli_progress;
mod cli_tables;
mod cluster;
mod cluster_harness;
mod cluster_up;
mod committer_cluster;
mod committer_raw;
mod crash_torture;
mod disk_full;
mod doctor;
mod elect_harness;
mod etcd_secure;
mod evolve;
mod exactly_once;
mod file_modes;
mod flight;
mod harness;
mod health;
mod id_v;
mod kafka_raw;
mod ledger;
mod limits;
mod log_format;
mod log_retention;
mod lost_answer_proxy;
mod moto;
mod mounts;
mod persistent;
mod persistent_cluster;
mod persistent_raw;
mod proto_runs;
mod protocol_errors;
mod push_cli;
mod raw;
mod rescued_data;
mod rest_cluster;
mod restart;
mod router_ops;
mod rows;
mod sdk_arrow;
mod sdk_client;
mod sdk_end_to_end;
mod sdk_token;
mod secrets;
mod slo_metrics;
mod statuses;
mod system_columns;
mod tail_cli;
mod tcp_proxy;
mod tls;
mod upkeep;
mod wal_eio;
mod warehouse_power_cut;
