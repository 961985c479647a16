//! `sluice`: start a pod (`serve`) or manage its tables (`table …`),
//! principals (`principal …`), grants (`grant …`, `revoke …`) and signing
//! keys (`keys rotate`).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use sluice_server::config::{
    parse_auth, parse_principal, AuthMode, ServeConfig, DEFAULT_DATA_DIR, DEFAULT_LISTEN,
};

#[derive(Parser)]
#[command(
    name = "sluice",
    version,
    about = "Streaming ingest into Delta Lake over the Zerobus protocol"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a pod: gRPC ingest and HTTP on one port.
    Serve(Box<ServeArgs>),
    /// Manage tables of a running pod.
    Table {
        #[command(flatten)]
        conn: ConnArgs,
        #[command(subcommand)]
        command: TableCommand,
    },
    /// Manage principals (OAuth clients) of a running pod.
    Principal {
        #[command(flatten)]
        conn: ConnArgs,
        #[command(subcommand)]
        command: PrincipalCommand,
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
        command: KeysCommand,
    },
    /// Check that this machine's disks can keep Sluice's promises (WAL fdatasync latency,
    /// bandwidth, free space; warehouse PUT/GET and put-if-absent); exits 1 on a failure.
    Doctor {
        /// Data directory whose `wal` folder to probe.
        #[arg(long, default_value = DEFAULT_DATA_DIR)]
        data_dir: PathBuf,
        /// Warehouse to probe (path, file:// or s3://bucket/prefix URL). Default: <data-dir>/warehouse.
        #[arg(long)]
        warehouse: Option<String>,
        #[command(flatten)]
        s3: sluice_server::warehouse::S3Settings,
        /// Small probes (seconds instead of tens of seconds); noisier figures.
        #[arg(long)]
        quick: bool,
    },
    /// Run a router: the producers' endpoint of a cluster; places each new stream on a pod.
    Router {
        /// Address producers connect to (gRPC and HTTP).
        #[arg(long, default_value = "127.0.0.1:50050")]
        listen: std::net::SocketAddr,
        /// The meta store: etcd://HOST:PORT[,HOST:PORT…].
        #[arg(long, env = "SLUICE_JOIN")]
        join: String,
        /// Placement policy: p2c (default), least-loaded, round-robin, random.
        #[arg(long, default_value = "p2c")]
        placement: sluice_router::Policy,
    },
    /// Operate on one pod of a cluster.
    Pod {
        #[command(subcommand)]
        command: PodCommand,
    },
    /// Look at or start a cluster.
    Cluster {
        #[command(subcommand)]
        command: ClusterCommand,
    },
}

#[derive(Subcommand)]
enum PodCommand {
    /// Drain a pod: it stops taking streams, moves its producers to other pods, commits
    /// and exits with an empty WAL. Waits until it has left the cluster.
    Drain {
        /// Pod id (see `sluice cluster status`).
        pod: String,
        /// The meta store: etcd://HOST:PORT.
        #[arg(long, env = "SLUICE_JOIN")]
        join: String,
        /// Return at once instead of waiting for the pod to leave.
        #[arg(long)]
        no_wait: bool,
        /// Give up waiting after this long.
        #[arg(long, default_value = "120s", value_parser = humantime::parse_duration)]
        timeout: Duration,
    },
}

#[derive(Subcommand)]
enum ClusterCommand {
    /// Pods, their state and load.
    Status {
        /// The meta store: etcd://HOST:PORT.
        #[arg(long, env = "SLUICE_JOIN")]
        join: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Start etcd, N pods and a router as local processes on loopback (development and
    /// tests; Ctrl-C stops them all, pods drained first).
    Up(sluice_server::cli::cluster_up::UpArgs),
}

#[derive(Subcommand)]
enum PrincipalCommand {
    /// Create a principal; prints its client id and secret once.
    Create {
        /// Name, also the OAuth client id.
        name: String,
        /// Let it manage the catalog.
        #[arg(long)]
        admin: bool,
    },
    /// List principals and their grants.
    List,
    /// Delete a principal and its grants.
    Delete {
        /// Client id.
        name: String,
    },
}

#[derive(Subcommand)]
enum KeysCommand {
    /// Add a new signing key; tokens signed by older keys verify until they expire.
    Rotate,
}

#[derive(clap::Args)]
struct ServeArgs {
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
    s3: sluice_server::warehouse::S3Settings,
    /// Commit a table at most this long after its first uncommitted record (e.g. 250ms, 1s).
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    flush_interval: Duration,
    /// ... or once its memtable holds this many bytes.
    #[arg(long, default_value_t = 64 << 20)]
    flush_bytes: usize,
    /// Size each WAL segment file is preallocated to (a record larger than this gets a
    /// segment of its own).
    #[arg(long, default_value_t = 64 << 20)]
    wal_segment_bytes: u64,
    /// Keep a zero-filled WAL segment ready for each rotation (written in the background
    /// while the WAL is idle): fdatasyncs into it skip a journal commit (lower p50), at the
    /// price of writing every segment twice and a higher fdatasync p99 while preparing.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    wal_prepare_segments: bool,
    /// How often each table's background upkeep (checkpoint, compaction, vacuum) runs.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    upkeep_interval: Duration,
    /// Compact a table once it has this many files below half its target file size.
    #[arg(long, default_value_t = 16)]
    compact_min_files: usize,
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
    /// Lifetime of issued access tokens.
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    token_ttl: Duration,
    /// Serve TLS with this PEM certificate chain (needs --tls-key); plain text without it.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Join a cluster: etcd://HOST:PORT[,HOST:PORT…] (catalog and membership in etcd).
    #[arg(long, env = "SLUICE_JOIN")]
    join: Option<String>,
    /// Pod id in the cluster. Default: $HOSTNAME-PORT.
    #[arg(long, requires = "join")]
    pod_id: Option<String>,
    /// URL routers use to reach this pod. Default: http://LISTEN (host name if LISTEN is 0.0.0.0).
    #[arg(long, requires = "join")]
    advertise: Option<String>,
    /// When draining, how long producers get to move their streams away.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    drain_grace: Duration,
    #[command(flatten)]
    limits: sluice_server::limits::LimitArgs,
}

fn host_name() -> String {
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

fn cluster_config(args: &ServeArgs) -> Option<sluice_server::config::ClusterConfig> {
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
    Some(sluice_server::config::ClusterConfig {
        join,
        pod_id,
        advertise,
        drain_grace: args.drain_grace,
    })
}

#[derive(clap::Args)]
struct ConnArgs {
    /// URL of the server.
    #[arg(
        long,
        global = true,
        env = "SLUICE_SERVER",
        default_value = "http://127.0.0.1:50051"
    )]
    server: String,
    /// Local data directory whose admin credentials to use when
    /// SLUICE_CLIENT_ID / SLUICE_CLIENT_SECRET are unset.
    #[arg(long, global = true, default_value = DEFAULT_DATA_DIR)]
    data_dir: PathBuf,
}

#[derive(Subcommand)]
enum TableCommand {
    /// Create catalog.schema.table with the given columns.
    Create {
        /// catalog.schema.table
        name: String,
        /// e.g. "id BIGINT NOT NULL, device STRING, tags ARRAY<STRING>"
        #[arg(long)]
        columns: String,
        /// Where the Delta table lives (default: under the warehouse); a Delta
        /// table already there with the same columns is attached, not created.
        #[arg(long)]
        location: Option<String>,
        /// Delta table property KEY=VALUE (repeatable), e.g. delta.checkpointInterval=10.
        #[arg(long = "property", value_parser = parse_property)]
        properties: Vec<(String, String)>,
        /// Add the system columns _sluice_stream_id, _sluice_offset, _sluice_ingested_at.
        #[arg(long)]
        system_columns: bool,
        /// Add the _rescued_data column: record fields that do not fit the columns are kept
        /// there as JSON text instead of failing the record.
        #[arg(long)]
        rescued_data: bool,
    },
    /// List tables.
    List,
    /// Show a table's columns and location.
    Describe {
        /// catalog.schema.table
        name: String,
        /// Print the Unity Catalog JSON.
        #[arg(long)]
        json: bool,
    },
    /// Drop a table and delete its data.
    Drop {
        /// catalog.schema.table
        name: String,
    },
    /// Compact the table's small files now (runs beside ingest).
    Optimize {
        /// catalog.schema.table
        name: String,
    },
    /// Delete files the table removed more than the retention period ago.
    Vacuum {
        /// catalog.schema.table
        name: String,
        /// e.g. 168h; default the table's delta.deletedFileRetentionDuration (7 days).
        #[arg(long, value_parser = humantime::parse_duration)]
        retention: Option<Duration>,
    },
}

fn parse_property(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
        _ => Err("expected KEY=VALUE".into()),
    }
}

async fn change_grants(conn: ConnArgs, words: &[String], add: bool) -> anyhow::Result<()> {
    let args = sluice_server::cli::parse_grant(words)?;
    let client = sluice_server::cli::Client::connect(&conn.server, &conn.data_dir).await?;
    client.change_grants(&args, add).await?;
    let privs: Vec<&str> = args.privileges.iter().map(|p| p.as_str()).collect();
    let (verb, prep) = if add {
        ("granted", "to")
    } else {
        ("revoked", "from")
    };
    println!(
        "{verb} {} on table {} {prep} {}",
        privs.join(","),
        args.table,
        args.principal
    );
    Ok(())
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colours only on a terminal: a log file or a collector gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .init();
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => {
            init_tracing();
            let cluster = cluster_config(&args);
            let bootstrap = args.bootstrap_principal.or_else(|| {
                match (
                    std::env::var("SLUICE_BOOTSTRAP_CLIENT_ID"),
                    std::env::var("SLUICE_BOOTSTRAP_CLIENT_SECRET"),
                ) {
                    (Ok(id), Ok(secret)) if !id.is_empty() && !secret.is_empty() => {
                        Some((id, secret))
                    }
                    _ => None,
                }
            });
            let mut config = ServeConfig::new(args.data_dir);
            config.cluster = cluster;
            config.listen = args.listen;
            config.warehouse = args.warehouse;
            config.s3 = args.s3;
            config.flush_interval = args.flush_interval;
            config.flush_bytes = args.flush_bytes;
            config.wal_segment_bytes = args.wal_segment_bytes;
            config.wal_prepare_segments = args.wal_prepare_segments;
            config.upkeep = sluice_server::sink::upkeep::UpkeepConfig {
                interval: args.upkeep_interval,
                compact_min_files: args.compact_min_files,
                vacuum_interval: args.vacuum_interval,
            };
            config.auth = args.auth;
            config.bootstrap_principal = bootstrap;
            config.token_ttl = args.token_ttl;
            config.max_message_bytes = args.limits.max_request_bytes;
            config.limits = args.limits.limits();
            if let (Some(cert), Some(key)) = (args.tls_cert, args.tls_key) {
                config.tls = Some(sluice_server::config::TlsFiles { cert, key });
            }
            let shutdown = sluice_server::shutdown_signal();
            let listener = tokio::net::TcpListener::bind(config.listen)
                .await
                .with_context(|| format!("binding {}", config.listen))?;
            sluice_server::run(config, listener, shutdown).await?;
            Ok(())
        }
        Command::Table { conn, command } => {
            let client = sluice_server::cli::Client::connect(&conn.server, &conn.data_dir).await?;
            match command {
                TableCommand::Create {
                    name,
                    columns,
                    location,
                    mut properties,
                    system_columns,
                    rescued_data,
                } => {
                    use sluice_server::sink::{rescued_data as rescue, system_columns as system};
                    for (on, property) in [
                        (system_columns, system::PROPERTY),
                        (rescued_data, rescue::PROPERTY),
                    ] {
                        if on {
                            properties.push((property.to_string(), "true".to_string()));
                        }
                    }
                    let info = client
                        .create_table(&name, &columns, location.as_deref(), &properties)
                        .await?;
                    println!("created {}", info.full_name);
                    print!("{}", sluice_server::cli::describe_text(&info));
                }
                TableCommand::List => {
                    for t in client.list_tables().await? {
                        println!("{}", t.full_name);
                    }
                }
                TableCommand::Describe { name, json } => {
                    let info = client.describe_table(&name).await?;
                    if json {
                        println!("{}", serde_json::to_string_pretty(&info)?);
                    } else {
                        print!("{}", sluice_server::cli::describe_text(&info));
                    }
                }
                TableCommand::Drop { name } => {
                    client.drop_table(&name).await?;
                    println!("dropped {name}");
                }
                TableCommand::Optimize { name } => {
                    let report = client.optimize_table(&name).await?;
                    println!("{}", serde_json::to_string_pretty(&report)?);
                }
                TableCommand::Vacuum { name, retention } => {
                    let report = client.vacuum_table(&name, retention).await?;
                    println!("{}", serde_json::to_string_pretty(&report)?);
                }
            }
            Ok(())
        }
        Command::Principal { conn, command } => {
            let client = sluice_server::cli::Client::connect(&conn.server, &conn.data_dir).await?;
            match command {
                PrincipalCommand::Create { name, admin } => {
                    let p = client.create_principal(&name, admin).await?;
                    println!(
                        "Created principal {} (the secret is shown only once):",
                        p.client_id
                    );
                    println!("  SLUICE_CLIENT_ID={}", p.client_id);
                    println!("  SLUICE_CLIENT_SECRET={}", p.client_secret);
                }
                PrincipalCommand::List => {
                    for p in client.list_principals().await? {
                        let role = if p.admin { " (admin)" } else { "" };
                        println!("{}{role}", p.client_id);
                        for g in p.grants {
                            println!("  {g}");
                        }
                    }
                }
                PrincipalCommand::Delete { name } => {
                    client.delete_principal(&name).await?;
                    println!("deleted principal {name}");
                }
            }
            Ok(())
        }
        Command::Grant { conn, words } => change_grants(conn, &words, true).await,
        Command::Revoke { conn, words } => change_grants(conn, &words, false).await,
        Command::Keys { conn, command } => {
            let client = sluice_server::cli::Client::connect(&conn.server, &conn.data_dir).await?;
            match command {
                KeysCommand::Rotate => {
                    let kid = client.rotate_keys().await?;
                    println!("new signing key {kid}; tokens signed by older keys verify until they expire");
                }
            }
            Ok(())
        }
        Command::Doctor {
            data_dir,
            warehouse,
            s3,
            quick,
        } => {
            let mut opts = sluice_server::doctor::DoctorOptions::new(data_dir, warehouse);
            opts.s3 = s3;
            if quick {
                opts = opts.quick();
            }
            let report = sluice_server::doctor::run(&opts).await;
            print!("{}", report.render());
            if report.failed() {
                anyhow::bail!("sluice doctor: at least one check failed");
            }
            Ok(())
        }
        Command::Router {
            listen,
            join,
            placement,
        } => {
            init_tracing();
            let shutdown = sluice_server::shutdown_signal();
            let listener = sluice_router::proxy::bind(listen).await?;
            let meta = sluice_router::Meta::connect(&join).await?;
            sluice_router::proxy::run(listener, meta, placement, shutdown).await?;
            Ok(())
        }
        Command::Pod {
            command:
                PodCommand::Drain {
                    pod,
                    join,
                    no_wait,
                    timeout,
                },
        } => {
            let wait = (!no_wait).then_some(timeout);
            let left = sluice_server::cli::cluster::drain(&join, &pod, wait).await?;
            if no_wait {
                println!("drain of {pod} requested");
            } else if left {
                println!("{pod} drained and left the cluster");
            } else {
                anyhow::bail!("{pod} is still registered after {timeout:?}");
            }
            Ok(())
        }
        Command::Cluster { command } => match command {
            ClusterCommand::Status { join, json } => {
                let pods = sluice_server::cli::cluster::pods(&join).await?;
                if json {
                    println!("{}", serde_json::to_string_pretty(&pods)?);
                } else {
                    print!("{}", sluice_server::cli::cluster::render_status(&pods));
                }
                Ok(())
            }
            ClusterCommand::Up(args) => {
                init_tracing();
                sluice_server::cli::cluster_up::run(args).await
            }
        },
    }
}
