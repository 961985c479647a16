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
    #[command(subcommand)]
    command: cli::Command,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    Cli::parse().command.run().await
}
