//! `sluice serve`: its flags ([`ServeArgs`]), how they become a
//! [`ServeConfig`] (cluster defaults, the bootstrap principal from the
//! environment), and the pod's run until SIGINT/SIGTERM.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use sluice_server::auth::kek::KEK_ENV;
use sluice_server::auth::KekSource;
use sluice_server::config::{
    parse_auth, parse_principal, AuthMode, ClusterConfig, ServeConfig, TlsFiles, DEFAULT_DATA_DIR,
    DEFAULT_LISTEN,
};
use sluice_server::etcd_access::EtcdAccess;
use sluice_server::limits::LimitArgs;
use sluice_server::sink::upkeep::{CopyRule, UpkeepConfig, COPY_RULE};
use sluice_server::warehouse::S3Settings;

/// The flags of `sluice serve`.
#[derive(clap::Args)]
pub struct ServeArgs {
    /// Directory for the WAL and the catalog.
    #[arg(long, default_value = DEFAULT_DATA_DIR)]
    data_dir: PathBuf,
    /// Address for gRPC and HTTP.
    #[arg(long, default_value = DEFAULT_LISTEN)]
    listen: std::net::SocketAddr,
    /// Where Delta tables live (path, file:// or s3://bucket/prefix URL). Default: <data-dir>/warehouse.
    #[arg(long)]
    warehouse: Option<String>,
    #[command(flatten)]
    s3: S3Settings,
    /// Make a table's rows visible in Delta about this long after the first uncommitted one
    /// arrived (e.g. 250ms, 1s): its flush starts that long after it, less what recent
    /// flushes took.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    flush_interval: Duration,
    /// ... or once its memtable holds this many bytes.
    #[arg(long, default_value_t = 64 << 20)]
    flush_bytes: usize,
    /// Each table's committer commits the files handed to it at most this often (a hand-off
    /// after a quiet interval is committed at once).
    #[arg(long, default_value = "250ms", value_parser = humantime::parse_duration)]
    commit_interval: Duration,
    /// Hand-offs a table's committer holds pending before it answers new ones busy (the
    /// pods back off; their producers slow down through HTTP/2 flow control).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    committer_max_pending: u32,
    /// A REST insert retried with the same `Idempotency-Key` within this window is
    /// acknowledged without writing its records again.
    #[arg(long, default_value = "24h", value_parser = humantime::parse_duration)]
    idempotency_window: Duration,
    /// Size each WAL segment file is preallocated to (a record larger than this gets a
    /// segment of its own).
    #[arg(long, default_value_t = 64 << 20)]
    wal_segment_bytes: u64,
    /// Keep a zero-filled WAL segment ready for each rotation (written in the background
    /// while the WAL is idle): fdatasyncs into it skip a journal commit (lower p50), at the
    /// price of writing every segment twice and a higher fdatasync p99 while preparing.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    wal_prepare_segments: bool,
    /// Write WAL segments through `O_DIRECT` (no page-cache copy, no writeback at
    /// fdatasync); buffered where the file system refuses the flag.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    wal_direct_io: bool,
    /// `/healthz` answers 503 once the warehouse has been unreachable (every probe of its
    /// root failed) for longer than this.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    warehouse_unhealthy_after: Duration,
    /// How often each table's background upkeep (checkpoint, compaction, vacuum) runs.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    upkeep_interval: Duration,
    /// Compact a table once it has this many files below half its target file size.
    #[arg(long, default_value_t = 16)]
    compact_min_files: usize,
    /// Compaction copies a file's row groups as they are (no decode, no re-encode) when every
    /// one holds at least this many rows (or 8 MiB before compression); smaller ones are
    /// re-encoded into large row groups.
    #[arg(long, default_value_t = COPY_RULE.min_rows)]
    compact_copy_min_rows: i64,
    /// Vacuum each table this often (removed files older than the table's
    /// delta.deletedFileRetentionDuration, default 7 days).
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    vacuum_interval: Duration,
    /// oauth (default) or none (no authentication; local experiments only).
    #[arg(long, default_value = "oauth", value_parser = parse_auth)]
    auth: AuthMode,
    /// ID:SECRET of the admin principal created on first start.
    #[arg(long, value_parser = parse_principal)]
    bootstrap_principal: Option<(String, String)>,
    /// File holding the key-encryption key of the token-signing keys (base64 of 32 bytes;
    /// or set SLUICE_SECRETS_KEY). Default on a single node: <data-dir>/secrets.key,
    /// generated on the first start. A cluster pod needs one.
    #[arg(long)]
    secrets_key_file: Option<PathBuf>,
    /// Lifetime of issued access tokens (at least 5 s; short ones are for tests of
    /// token refresh).
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    token_ttl: Duration,
    /// Serve TLS with this PEM certificate chain (needs --tls-key); plain text without it.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Join a cluster: etcd://HOST:PORT[,HOST:PORT…] (catalog and membership in etcd;
    /// etcds:// for etcd over TLS).
    #[arg(long, env = "SLUICE_JOIN")]
    join: Option<String>,
    #[command(flatten)]
    etcd: EtcdAccess,
    /// Pod id in the cluster. Default: $HOSTNAME-PORT.
    #[arg(long, requires = "join")]
    pod_id: Option<String>,
    /// URL routers use to reach this pod. Default: http://LISTEN (host name if LISTEN is 0.0.0.0).
    #[arg(long, requires = "join")]
    advertise: Option<String>,
    /// Append every control-plane change to this Delta table (CATALOG.SCHEMA.TABLE, e.g.
    /// main.sluice.audit; created on first use). Without it, changes are only logged.
    #[arg(long, env = "SLUICE_AUDIT_TABLE", value_parser = parse_table_name)]
    audit_table: Option<String>,
    /// Table of OTLP spans sent without the x-databricks-zerobus-table-name header.
    #[arg(long, value_parser = parse_table_name)]
    otlp_traces_table: Option<String>,
    /// Table of OTLP log records sent without the table header.
    #[arg(long, value_parser = parse_table_name)]
    otlp_logs_table: Option<String>,
    /// Table of OTLP metric data points sent without the table header.
    #[arg(long, value_parser = parse_table_name)]
    otlp_metrics_table: Option<String>,
    /// Serve the Kafka producer protocol on this address too (e.g. 127.0.0.1:9092; TLS
    /// with --tls-cert when given: clients use SASL_SSL).
    #[arg(long)]
    kafka_listen: Option<std::net::SocketAddr>,
    /// HOST:PORT Kafka clients are told to connect to (Metadata). Default: the
    /// --kafka-listen address (the host name if it is 0.0.0.0).
    #[arg(long, requires = "kafka_listen")]
    kafka_advertise: Option<String>,
    /// When draining, how long producers get to move their streams away.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    drain_grace: Duration,
    /// Also serve MQTT 3.1.1 and 5.0 on this address (TLS with --tls-cert when given;
    /// 1883 plain / 8883 TLS by convention). Default: off.
    #[arg(long)]
    mqtt_listen: Option<std::net::SocketAddr>,
    /// MQTT sessions kept at most (held by a connection or waiting for its client to come
    /// back): a CONNECT that would keep one more is refused with CONNACK 0x97 Quota
    /// exceeded (3.1.1: return code 3) once expired sessions are swept out.
    #[arg(long, default_value_t = sluice_server::mqtt::sessions::DEFAULT_MAX_SESSIONS)]
    mqtt_max_sessions: usize,
    #[command(flatten)]
    limits: LimitArgs,
}

/// Binds the listen address and runs the pod until SIGINT/SIGTERM.
pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    super::init_tracing();
    let config = ServeConfig::from(args);
    let shutdown = sluice_server::shutdown_signal();
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    sluice_server::run(config, listener, shutdown).await?;
    Ok(())
}

impl From<ServeArgs> for ServeConfig {
    /// The flags over [`ServeConfig::new`]'s defaults; without
    /// `--bootstrap-principal`, `SLUICE_BOOTSTRAP_CLIENT_ID` and
    /// `SLUICE_BOOTSTRAP_CLIENT_SECRET` name the first admin.
    fn from(args: ServeArgs) -> ServeConfig {
        ServeConfig {
            cluster: cluster_config(&args),
            listen: args.listen,
            warehouse: args.warehouse,
            s3: args.s3,
            flush_interval: args.flush_interval,
            flush_bytes: args.flush_bytes,
            commit_interval: args.commit_interval,
            committer_max_pending: args.committer_max_pending as usize,
            idempotency_window: args.idempotency_window,
            wal_segment_bytes: args.wal_segment_bytes,
            wal_prepare_segments: args.wal_prepare_segments,
            wal_direct_io: args.wal_direct_io,
            warehouse_unhealthy_after: args.warehouse_unhealthy_after,
            upkeep: UpkeepConfig {
                interval: args.upkeep_interval,
                compact_min_files: args.compact_min_files,
                copy: CopyRule {
                    min_rows: args.compact_copy_min_rows,
                    ..COPY_RULE
                },
                vacuum_interval: args.vacuum_interval,
            },
            auth: args.auth,
            bootstrap_principal: args.bootstrap_principal.or_else(bootstrap_from_env),
            token_ttl: args.token_ttl,
            max_message_bytes: args.limits.max_request_bytes,
            limits: args.limits.limits(),
            tls: match (args.tls_cert, args.tls_key) {
                (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
                _ => None,
            },
            secrets_key: kek_source(args.secrets_key_file),
            audit_table: args.audit_table,
            otlp_tables: sluice_server::otlp::DefaultTables {
                traces: args.otlp_traces_table,
                logs: args.otlp_logs_table,
                metrics: args.otlp_metrics_table,
            },
            mqtt_listen: args.mqtt_listen,
            mqtt_max_sessions: args.mqtt_max_sessions,
            kafka: args
                .kafka_listen
                .map(|listen| sluice_server::kafka::KafkaConfig {
                    listen,
                    advertise: args.kafka_advertise,
                }),
            ..ServeConfig::new(args.data_dir)
        }
    }
}

/// `--secrets-key-file`, else `SLUICE_SECRETS_KEY` (non-empty).
pub(super) fn kek_source(file: Option<PathBuf>) -> Option<KekSource> {
    file.map(KekSource::File).or_else(|| {
        std::env::var(KEK_ENV)
            .ok()
            .filter(|k| !k.trim().is_empty())
            .map(KekSource::Base64)
    })
}

/// A `catalog.schema.table` name, lower-cased.
fn parse_table_name(text: &str) -> Result<String, String> {
    let (catalog, schema, table) =
        sluice_server::tables::split_name(text).map_err(|e| e.to_string())?;
    Ok(format!("{catalog}.{schema}.{table}"))
}

/// `SLUICE_BOOTSTRAP_CLIENT_ID` / `SLUICE_BOOTSTRAP_CLIENT_SECRET`, both non-empty.
fn bootstrap_from_env() -> Option<(String, String)> {
    match (
        std::env::var("SLUICE_BOOTSTRAP_CLIENT_ID"),
        std::env::var("SLUICE_BOOTSTRAP_CLIENT_SECRET"),
    ) {
        (Ok(id), Ok(secret)) if !id.is_empty() && !secret.is_empty() => Some((id, secret)),
        _ => None,
    }
}

pub(super) fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .unwrap_or_else(|| "pod".to_string())
}

/// With `--join`: the pod id (default `<host name>-<port>`) and the URL routers
/// use (default `http://<listen>`, the host name if listening on all addresses).
fn cluster_config(args: &ServeArgs) -> Option<ClusterConfig> {
    let join = args.join.clone()?;
    let port = args.listen.port();
    let pod_id = args
        .pod_id
        .clone()
        .unwrap_or_else(|| format!("{}-{port}", host_name()));
    let advertise = args.advertise.clone().unwrap_or_else(|| {
        if args.listen.ip().is_unspecified() {
            format!("http://{}:{port}", host_name())
        } else {
            format!("http://{}", args.listen)
        }
    });
    Some(ClusterConfig {
        join,
        etcd: args.etcd.clone(),
        pod_id,
        advertise,
        drain_grace: args.drain_grace,
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Serve {
        #[command(flatten)]
        args: ServeArgs,
    }

    fn config(flags: &[&str]) -> ServeConfig {
        let argv = std::iter::once("serve").chain(flags.iter().copied());
        ServeConfig::from(Serve::try_parse_from(argv).expect("flags parse").args)
    }

    #[test]
    fn flags_land_in_the_config_and_the_rest_keeps_its_defaults() {
        let c = config(&[
            "--data-dir=d",
            "--listen=127.0.0.1:7000",
            "--flush-bytes=2048",
            "--commit-interval=2s",
            "--upkeep-interval=5s",
            "--compact-min-files=3",
            "--compact-copy-min-rows=500",
            "--tls-cert=c.pem",
            "--tls-key=k.pem",
            "--join=etcd://127.0.0.1:2379",
            "--drain-grace=3s",
            "--audit-table=Main.Sluice.Audit",
            "--warehouse-unhealthy-after=5s",
        ]);
        assert_eq!(c.data_dir, PathBuf::from("d"));
        assert_eq!(c.listen.port(), 7000);
        assert_eq!(c.flush_bytes, 2048);
        assert_eq!(c.commit_interval, Duration::from_secs(2));
        assert_eq!(c.upkeep.interval, Duration::from_secs(5));
        assert_eq!(c.upkeep.compact_min_files, 3);
        assert_eq!(c.upkeep.copy.min_rows, 500);
        assert_eq!(c.upkeep.copy.min_bytes, COPY_RULE.min_bytes);
        let mut zero = ServeConfig::new("d");
        assert!(zero.sanitize().is_ok());
        zero.upkeep.copy.min_rows = 0;
        let refused = zero.sanitize().expect_err("refused").to_string();
        assert!(
            refused.contains("--compact-copy-min-rows must be >= 1"),
            "{refused}"
        );
        assert_eq!(
            c.tls.map(|t| (t.cert, t.key)),
            Some((PathBuf::from("c.pem"), PathBuf::from("k.pem")))
        );
        let cluster = c.cluster.expect("--join makes a cluster config");
        assert!(cluster.pod_id.ends_with("-7000"));
        assert_eq!(cluster.advertise, "http://127.0.0.1:7000");
        assert_eq!(cluster.drain_grace, Duration::from_secs(3));
        assert_eq!(c.audit_table.as_deref(), Some("main.sluice.audit"));
        assert_eq!(c.warehouse_unhealthy_after, Duration::from_secs(5));
        assert!(c.wal_fsync, "no flag turns fsync off");
        assert_eq!(c.flush_interval, Duration::from_secs(1));
    }

    #[test]
    fn without_join_a_pod_is_single_node() {
        if std::env::var_os("SLUICE_JOIN").is_some() {
            return; // the flag's environment variable would make it a cluster pod
        }
        let c = config(&[]);
        assert!(c.cluster.is_none());
        assert!(c.tls.is_none());
        assert_eq!(c.data_dir, PathBuf::from(DEFAULT_DATA_DIR));
        // The flag's default is the committer's.
        assert_eq!(c.commit_interval, Duration::from_millis(250));
        assert_eq!(
            c.committer(),
            sluice_server::commit::CommitterConfig::default()
        );
    }
}
