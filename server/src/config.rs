//! Configuration of a pod (`sluice serve`): every knob with its default, and
//! the checks that reject nonsense before anything starts.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Result, ServerError};

/// Default listen address: loopback, so a fresh `sluice serve` is not exposed.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:50051";
/// Default data directory (WAL, catalog) relative to the working directory.
pub const DEFAULT_DATA_DIR: &str = "sluice-data";

/// How producers and the CLI must authenticate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthMode {
    /// OAuth2 client credentials → signed bearer tokens (default).
    OAuth,
    /// No authentication at all; for local experiments only.
    None,
}

/// Where the operator's KEK comes from.
#[derive(Clone)]
pub enum KekSource {
    /// `--secrets-key-file PATH`: a file holding base64 of 32 bytes.
    File(PathBuf),
    /// `SLUICE_SECRETS_KEY`: base64 of 32 bytes.
    Base64(String),
}

impl std::fmt::Debug for KekSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KekSource::File(path) => write!(f, "File({})", path.display()),
            KekSource::Base64(_) => f.write_str("Base64(<redacted>)"),
        }
    }
}

/// PEM files of the server's TLS identity.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// Certificate chain, leaf first.
    pub cert: PathBuf,
    /// Private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// Everything `sluice serve` needs to run.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// Directory for the WAL, the catalog and the admin credentials.
    /// Default: `./sluice-data`.
    pub data_dir: PathBuf,
    /// Address for gRPC and HTTP (one port). Default: `127.0.0.1:50051`.
    pub listen: SocketAddr,
    /// Where Delta tables live: a local path, `file://` or `s3://bucket/prefix` URL.
    /// Default: `<data-dir>/warehouse`.
    pub warehouse: Option<String>,
    /// S3 settings for an `s3://` warehouse. Default: none (the `AWS_*` environment).
    pub s3: crate::warehouse::S3Settings,
    /// A table's rows are visible in Delta about this long after the first of them
    /// arrived: its flush starts this long after that record less what recent flushes took
    /// (`sink::flush_lead`). Default: 1 s.
    pub flush_interval: Duration,
    /// ... or as soon as it holds this many bytes of Arrow data. Default: 64 MiB.
    pub flush_bytes: usize,
    /// Each table's committer commits the files handed to it at most once per
    /// this interval (`--commit-interval`); a hand-off after a quiet interval
    /// is committed at once. Default: 250 ms (at 1 s, a flush's rows waited up to a
    /// second for the committer: freshness p99 1.9 s at `--flush-interval 1s`).
    pub commit_interval: Duration,
    /// Hand-offs a table's committer holds pending before it answers new ones busy
    /// (`--committer-max-pending`): the pods then back off and their producers slow down
    /// through their memtable bound. Default: 1024.
    pub committer_max_pending: usize,
    /// How long a REST `Idempotency-Key` is remembered (`--idempotency-window`): a retry
    /// with the same key within it is acknowledged without writing again. Default: 24 h.
    pub idempotency_window: Duration,
    /// Background checkpoints, compaction and vacuum (see `sink::upkeep`).
    pub upkeep: crate::sink::upkeep::UpkeepConfig,
    /// Authentication mode. Default: OAuth.
    pub auth: AuthMode,
    /// `ID:SECRET` of the admin principal to create on first start.
    /// Default: a generated one, printed once and stored in the data dir.
    pub bootstrap_principal: Option<(String, String)>,
    /// Lifetime of issued access tokens. Default: 1 h.
    pub token_ttl: Duration,
    /// Largest gRPC message (request) accepted, `--max-request-bytes`. The
    /// official SDKs send at most 10 MiB - 64 KiB per request. Default: 10 MiB.
    pub max_message_bytes: usize,
    /// Serve TLS with this PEM certificate chain and private key
    /// (`--tls-cert`, `--tls-key`). Default: none (plain text).
    pub tls: Option<TlsFiles>,
    /// Sizes, counts, timeouts and rates enforced on clients.
    pub limits: crate::limits::Limits,
    /// fdatasync the WAL before acking (the only safe choice). Default: true.
    pub wal_fsync: bool,
    /// Size every WAL segment file is preallocated to (`--wal-segment-bytes`).
    /// Default: 64 MiB.
    pub wal_segment_bytes: u64,
    /// Keep a zero-filled WAL segment ready for each rotation
    /// (`--wal-prepare-segments`). Default: false.
    pub wal_prepare_segments: bool,
    /// Write WAL segments through `O_DIRECT` (`--wal-direct-io`), buffered where the file
    /// system refuses the flag. Default: true.
    pub wal_direct_io: bool,
    /// `/healthz` answers 503 once the warehouse has been unreachable for longer than
    /// this (`--warehouse-unhealthy-after`). Default: 60 s.
    pub warehouse_unhealthy_after: Duration,
    /// Cluster membership: everything a pod needs to join one. Default: none
    /// (single node, embedded catalog).
    pub cluster: Option<ClusterConfig>,
    /// The key-encryption key of the token-signing keys (`--secrets-key-file`,
    /// `SLUICE_SECRETS_KEY`). Default: none (single node: `<data-dir>/secrets.key`,
    /// generated on the first start; a cluster pod refuses to start).
    pub secrets_key: Option<KekSource>,
    /// The Delta table control-plane changes are appended to (`--audit-table
    /// CATALOG.SCHEMA.TABLE`), created on first use. Default: none (log lines only).
    pub audit_table: Option<String>,
    /// The table of OTLP requests without the table header, per signal
    /// (`--otlp-traces-table`, `--otlp-logs-table`, `--otlp-metrics-table`). Default: none
    /// (the header is required).
    pub otlp_tables: DefaultTables,
    /// Serve MQTT 3.1.1/5.0 on this address too (`--mqtt-listen`; TLS with `tls` when
    /// set). Default: none.
    pub mqtt_listen: Option<SocketAddr>,
    /// MQTT sessions the pod keeps at most (`--mqtt-max-sessions`); a CONNECT that would
    /// add one more is refused (`mqtt::sessions`). Default: 100 000.
    pub mqtt_max_sessions: usize,
    /// The Kafka producer listener (`--kafka-listen`, `--kafka-advertise`). Default: none.
    pub kafka: Option<KafkaConfig>,
}

/// The tables a request without the table header goes to, per signal
/// (`--otlp-traces-table`, `--otlp-logs-table`, `--otlp-metrics-table`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DefaultTables {
    /// Spans.
    pub traces: Option<String>,
    /// Log records.
    pub logs: Option<String>,
    /// Metric data points.
    pub metrics: Option<String>,
}

/// Where the Kafka listener binds and what its Metadata advertises (`crate::kafka`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KafkaConfig {
    /// `--kafka-listen`.
    pub listen: SocketAddr,
    /// `--kafka-advertise HOST:PORT`. Default: the listen address (the host name when
    /// it is 0.0.0.0 or ::).
    pub advertise: Option<String>,
}

/// How a pod takes part in a cluster (`sluice serve --join etcd://…`).
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// The meta store, `etcd://HOST:PORT[,HOST:PORT…]` (`etcds://` for TLS).
    pub join: String,
    /// TLS material and credentials for etcd (`--etcd-*`). Default: none.
    pub etcd: crate::etcd_access::EtcdAccess,
    /// The pod's id in the meta store. Default: `<host name>-<port>`.
    pub pod_id: String,
    /// The URL routers use to reach this pod. Default: `http://<listen>`.
    pub advertise: String,
    /// How long streams get to move away when the pod drains: the duration sent in
    /// `CloseStreamSignal`, after which the pod ends the streams that are left.
    /// Default: 10 s.
    pub drain_grace: Duration,
}

impl ServeConfig {
    /// The defaults of an embedded single-node pod rooted at `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        ServeConfig {
            data_dir: data_dir.into(),
            listen: DEFAULT_LISTEN
                .parse()
                .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 50051))),
            warehouse: None,
            s3: crate::warehouse::S3Settings::default(),
            flush_interval: Duration::from_secs(1),
            flush_bytes: 64 << 20,
            commit_interval: crate::commit::CommitterConfig::default().interval,
            committer_max_pending: crate::commit::CommitterConfig::default().max_pending,
            idempotency_window: Duration::from_secs(24 * 3600),
            upkeep: crate::sink::upkeep::UpkeepConfig::default(),
            auth: AuthMode::OAuth,
            bootstrap_principal: None,
            token_ttl: Duration::from_secs(3600),
            max_message_bytes: 10 << 20,
            tls: None,
            audit_table: None,
            otlp_tables: DefaultTables::default(),
            kafka: None,
            limits: crate::limits::Limits::default(),
            wal_fsync: true,
            wal_segment_bytes: 64 << 20,
            wal_prepare_segments: false,
            wal_direct_io: true,
            warehouse_unhealthy_after: Duration::from_secs(60),
            cluster: None,
            secrets_key: None,
            mqtt_listen: None,
            mqtt_max_sessions: crate::mqtt::sessions::DEFAULT_MAX_SESSIONS,
        }
    }

    /// The per-table committer settings (`--commit-interval`, `--committer-max-pending`).
    pub fn committer(&self) -> crate::commit::CommitterConfig {
        crate::commit::CommitterConfig {
            interval: self.commit_interval,
            max_pending: self.committer_max_pending,
            ..crate::commit::CommitterConfig::default()
        }
    }

    /// Rejects settings that cannot work.
    pub fn sanitize(&self) -> Result<()> {
        if self.flush_interval.is_zero() {
            return Err(ServerError::Config("--flush-interval must be > 0".into()));
        }
        if self.commit_interval.is_zero() {
            return Err(ServerError::Config("--commit-interval must be > 0".into()));
        }
        if self.flush_bytes < 1024 {
            return Err(ServerError::Config("--flush-bytes must be >= 1 KiB".into()));
        }
        if self.upkeep.interval.is_zero() || self.upkeep.vacuum_interval.is_zero() {
            return Err(ServerError::Config(
                "--upkeep-interval and --vacuum-interval must be > 0".into(),
            ));
        }
        if self.upkeep.compact_min_files < 2 {
            return Err(ServerError::Config(
                "--compact-min-files must be >= 2".into(),
            ));
        }
        if self.upkeep.copy.min_rows < 1 {
            return Err(ServerError::Config(
                "--compact-copy-min-rows must be >= 1".into(),
            ));
        }
        // Short lifetimes exist for tests of token refresh (`sdk_token.rs`); below 5 s a
        // token could expire between its fetch and its first use.
        if self.token_ttl < Duration::from_secs(5) {
            return Err(ServerError::Config("token lifetime must be >= 5 s".into()));
        }
        if self.wal_segment_bytes < 64 << 10 {
            return Err(ServerError::Config(
                "--wal-segment-bytes must be >= 64 KiB".into(),
            ));
        }
        self.limits.sanitize(self.max_message_bytes)?;
        if let Some((id, secret)) = &self.bootstrap_principal {
            check_bootstrap_principal(id, secret)?;
        }
        Ok(())
    }
}

/// The fewest characters a user-chosen bootstrap secret may have. Client secrets are
/// stored as salted SHA-256 (fast to compute), so a short secret taken from a copy of the
/// catalog could be guessed offline; 32 random characters cannot.
pub const MIN_BOOTSTRAP_SECRET_CHARS: usize = 32;

/// Refuses a bootstrap principal with an empty id or a secret shorter than
/// [`MIN_BOOTSTRAP_SECRET_CHARS`] (the message never shows the secret).
pub fn check_bootstrap_principal(id: &str, secret: &str) -> Result<()> {
    if id.is_empty() {
        return Err(ServerError::Config(
            "the bootstrap principal needs a non-empty id".into(),
        ));
    }
    let chars = secret.chars().count();
    if chars < MIN_BOOTSTRAP_SECRET_CHARS {
        return Err(ServerError::Config(format!(
            "the bootstrap secret of {id} (--bootstrap-principal or \
             SLUICE_BOOTSTRAP_CLIENT_SECRET) has {chars} characters; at least \
             {MIN_BOOTSTRAP_SECRET_CHARS} are required (make one with \
             `head -c 24 /dev/urandom | base64`), or leave it out and one is generated"
        )));
    }
    Ok(())
}

/// Parses `ID:SECRET`.
pub fn parse_principal(text: &str) -> std::result::Result<(String, String), String> {
    match text.split_once(':') {
        Some((id, secret)) if !id.is_empty() && !secret.is_empty() => {
            Ok((id.to_string(), secret.to_string()))
        }
        _ => Err("expected ID:SECRET".into()),
    }
}

/// Parses `oauth` or `none`.
pub fn parse_auth(text: &str) -> std::result::Result<AuthMode, String> {
    match text.to_ascii_lowercase().as_str() {
        "oauth" => Ok(AuthMode::OAuth),
        "none" => Ok(AuthMode::None),
        other => Err(format!(
            "unknown auth mode `{other}` (expected oauth or none)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bootstrap_secret_needs_32_characters_and_the_refusal_hides_it() {
        let short = "x".repeat(MIN_BOOTSTRAP_SECRET_CHARS - 1);
        let message = check_bootstrap_principal("ops", &short)
            .expect_err("31 characters are refused")
            .to_string();
        assert!(
            message.contains("has 31 characters; at least 32"),
            "{message}"
        );
        assert!(!message.contains(&short), "{message}");
        assert!(check_bootstrap_principal("ops", &"x".repeat(32)).is_ok());
        // Characters, not bytes: 31 two-byte characters are still too few.
        assert!(check_bootstrap_principal("ops", &"é".repeat(31)).is_err());
        assert!(check_bootstrap_principal("", &"x".repeat(40)).is_err());
    }

    #[test]
    fn validate_checks_the_bootstrap_principal() {
        let mut config = ServeConfig::new("d");
        config.bootstrap_principal = Some(("ops".into(), "ops-secret-1".into()));
        assert!(config.sanitize().is_err());
        config.bootstrap_principal = Some(("ops".into(), "o".repeat(32)));
        assert!(config.sanitize().is_ok());
    }

    #[test]
    fn a_token_lifetime_below_5_s_is_refused() {
        let mut config = ServeConfig::new("d");
        config.token_ttl = Duration::from_secs(5);
        assert!(config.sanitize().is_ok());
        config.token_ttl = Duration::from_millis(4_999);
        let message = config.sanitize().expect_err("refused").to_string();
        assert!(
            message.contains("token lifetime must be >= 5 s"),
            "{message}"
        );
    }
}
