//! `sluice`: start a pod (`serve`) or a router (`router`), manage a running
//! pod's tables (`table …`), principals (`principal …`), grants (`grant …`,
//! `revoke …`) and signing keys (`keys rotate`), check a machine (`doctor`),
//! drain a pod (`pod drain`), look at or start a cluster (`cluster status|up`).
//! The commands live in `cli/`, one file per group; the pod is the
//! `sluice_server` library.

mod cli;

use clap::Parser;

// The command line (no doc comment here: clap would print it as help).
#[derive(Parser)]
#[command(
    name = "sluice",
    version,
    about = "Streaming ingest into Delta Lake over the Zerobus protocol"
)]
struct Cli {
    /// Log lines as text (default) or JSON (one object per line, for log shippers).
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "text",
        env = "SLUICE_LOG_FORMAT"
    )]
    log_format: cli::LogFormat,
    #[command(subcommand)]
    command: cli::Command,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let _ = cli::LOG_FORMAT.set(cli.log_format);
    cli.command.run().await
}
