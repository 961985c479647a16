//! The `sluice` command tree: one file per command group, each holding its
//! clap arguments beside the code that runs them. `serve` starts a pod,
//! `router` a router; `table`, `principal`, `grant`/`revoke` and `keys` are
//! HTTP clients of a running pod ([`client`]); `doctor` checks this machine;
//! `pod` and `cluster` talk to the meta store, `cluster up` starts a local
//! cluster ([`cluster_up`]); long operations show [`progress`] on stderr; `push` sends a
//! file to a table and `bench produce` generates load, both with `sluice-sdk`; `tail` prints a
//! table's new rows.

mod bench_produce;
mod client;
mod cluster;
mod cluster_up;
mod doctor;
mod keys;
mod pod;
mod principal;
mod progress;
mod push;
mod push_input;
mod router;
mod serve;
mod table;
mod tail;
mod upkeep;

use clap::Subcommand;

use client::ConnArgs;

/// The commands of `sluice`.
#[derive(Subcommand)]
pub enum Command {
    /// Run a pod: gRPC ingest and HTTP on one port.
    Serve(Box<serve::ServeArgs>),
    /// Manage tables of a running pod.
    Table {
        #[command(flatten)]
        conn: ConnArgs,
        #[command(subcommand)]
        command: table::TableCommand,
    },
    /// Manage principals (OAuth clients) of a running pod.
    Principal {
        #[command(flatten)]
        conn: ConnArgs,
        #[command(subcommand)]
        command: principal::PrincipalCommand,
    },
    /// Grant a privilege: `sluice grant MODIFY ON TABLE c.s.t TO NAME`.
    Grant {
        #[command(flatten)]
        conn: ConnArgs,
        /// MODIFY|SELECT[,…] ON TABLE catalog.schema.table TO NAME
        #[arg(required = true, num_args = 1..)]
        words: Vec<String>,
    },
    /// Revoke a privilege: `sluice revoke MODIFY ON TABLE c.s.t FROM NAME`.
    Revoke {
        #[command(flatten)]
        conn: ConnArgs,
        /// MODIFY|SELECT[,…] ON TABLE catalog.schema.table FROM NAME
        #[arg(required = true, num_args = 1..)]
        words: Vec<String>,
    },
    /// Manage token-signing keys.
    Keys {
        #[command(flatten)]
        conn: ConnArgs,
        #[command(subcommand)]
        command: keys::KeysCommand,
    },
    /// Check that this machine's disks can keep Sluice's promises (WAL fdatasync latency,
    /// bandwidth, free space; warehouse PUT/GET and put-if-absent); exits 1 on a failure.
    Doctor(doctor::DoctorArgs),
    /// Run a router: the producers' endpoint of a cluster; places each new stream on a pod.
    Router(router::RouterArgs),
    /// Operate on one pod of a cluster.
    Pod {
        #[command(subcommand)]
        command: pod::PodCommand,
    },
    /// Look at or start a cluster.
    Cluster {
        #[command(subcommand)]
        command: cluster::ClusterCommand,
    },
    /// Send a JSON-lines, CSV or Parquet file (or standard input) to a table with
    /// Sluice's producer SDK; exit 2 names the first bad record.
    Push(Box<push::PushArgs>),
    /// Print a table's rows as JSON lines as they become visible in Delta.
    Tail(Box<tail::TailArgs>),
    /// Load generators built on sluice-sdk (`sluice bench produce TABLE`).
    Bench {
        #[command(subcommand)]
        command: bench_produce::BenchCommand,
    },
}

impl Command {
    /// Runs the command.
    pub async fn run(self) -> anyhow::Result<()> {
        match self {
            Command::Serve(args) => serve::run(*args).await,
            Command::Table { conn, command } => table::run(conn, command).await,
            Command::Principal { conn, command } => principal::run(conn, command).await,
            Command::Grant { conn, words } => principal::change_grants(conn, &words, true).await,
            Command::Revoke { conn, words } => principal::change_grants(conn, &words, false).await,
            Command::Keys { conn, command } => keys::run(conn, command).await,
            Command::Doctor(args) => doctor::run(args).await,
            Command::Router(args) => router::run(args).await,
            Command::Pod { command } => pod::run(command).await,
            Command::Cluster { command } => cluster::run(command).await,
            Command::Push(args) => push::run(*args).await,
            Command::Bench { command } => bench_produce::run(command).await,
            Command::Tail(args) => tail::run(*args).await,
        }
    }
}

/// Who runs this command, as the audit trail names an operator acting without a token:
/// `$USER@host` (and the etcd user, when there is one).
fn operator(etcd_user: Option<&str>) -> String {
    let user = std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    let me = format!("{user}@{}", serve::host_name());
    match etcd_user {
        Some(etcd) => format!("{me} (etcd user {etcd})"),
        None => me,
    }
}

/// How log lines are written (`--log-format`, `SLUICE_LOG_FORMAT`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event.
    #[default]
    Text,
    /// One JSON object per line (`timestamp`, `level`, `fields.message`, the other fields,
    /// `target`, `span`), for log shippers.
    Json,
}

/// The format chosen on the command line, read by [`init_tracing`].
pub static LOG_FORMAT: std::sync::OnceLock<LogFormat> = std::sync::OnceLock::new();

/// Logs to stderr, filtered by `RUST_LOG` (default `info`), as text (colours only on a
/// terminal, so a log file or a collector gets plain text) or JSON lines ([`LOG_FORMAT`]).
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match LOG_FORMAT.get().copied().unwrap_or_default() {
        LogFormat::Json => builder.json().with_current_span(true).init(),
        LogFormat::Text => {
            let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
            builder.with_ansi(ansi).init()
        }
    }
}
