//! `sluice`: start a pod (`serve`) or manage its tables (`table …`).

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
    Serve(ServeArgs),
    /// Manage tables of a running pod.
    Table {
        #[command(flatten)]
        conn: ConnArgs,
        #[command(subcommand)]
        command: TableCommand,
    },
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Directory for the WAL and the catalog.
    #[arg(long, default_value = DEFAULT_DATA_DIR)]
    data_dir: PathBuf,
    /// Address for gRPC and HTTP.
    #[arg(long, default_value = DEFAULT_LISTEN)]
    listen: std::net::SocketAddr,
    /// Where Delta tables live (path or file:// URL). Default: <data-dir>/warehouse.
    #[arg(long)]
    warehouse: Option<String>,
    /// Commit a table at most this long after its first uncommitted record (e.g. 250ms, 1s).
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    flush_interval: Duration,
    /// ... or once its memtable holds this many bytes.
    #[arg(long, default_value_t = 64 << 20)]
    flush_bytes: usize,
    /// oauth (default) or none (no authentication; local experiments only).
    #[arg(long, default_value = "oauth", value_parser = parse_auth)]
    auth: AuthMode,
    /// ID:SECRET of the admin principal created on first start.
    #[arg(long, value_parser = parse_principal)]
    bootstrap_principal: Option<(String, String)>,
    /// Lifetime of issued access tokens.
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    token_ttl: Duration,
}

#[derive(clap::Args)]
struct ConnArgs {
    /// URL of the server.
    #[arg(long, env = "SLUICE_SERVER", default_value = "http://127.0.0.1:50051")]
    server: String,
    /// Local data directory whose admin credentials to use when
    /// SLUICE_CLIENT_ID / SLUICE_CLIENT_SECRET are unset.
    #[arg(long, default_value = DEFAULT_DATA_DIR)]
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
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => {
            init_tracing();
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
            config.listen = args.listen;
            config.warehouse = args.warehouse;
            config.flush_interval = args.flush_interval;
            config.flush_bytes = args.flush_bytes;
            config.auth = args.auth;
            config.bootstrap_principal = bootstrap;
            config.token_ttl = args.token_ttl;
            let listener = tokio::net::TcpListener::bind(config.listen)
                .await
                .with_context(|| format!("binding {}", config.listen))?;
            sluice_server::run(config, listener, sluice_server::shutdown_signal()).await?;
            Ok(())
        }
        Command::Table { conn, command } => {
            let client = sluice_server::cli::Client::connect(&conn.server, &conn.data_dir).await?;
            match command {
                TableCommand::Create { name, columns } => {
                    let info = client.create_table(&name, &columns).await?;
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
            }
            Ok(())
        }
    }
}
