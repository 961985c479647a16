//! `sluice`: start a pod (`serve`) or a router (`router`), manage a running
//! pod's tables (`table …`), principals (`principal …`), grants (`grant …`,
//! `revoke …`) and signing keys (`keys rotate`), check a machine (`doctor`),
//! drain a pod (`pod drain`), look at or start a cluster (`cluster status|up`).
//! The commands live in `cli/`, one file per group; the pod is the
//! `sluice_server` library.

mod cli;

// With the `jemalloc` feature, jemalloc instead of the system allocator: glibc's malloc
// and free were a tenth of the pod's CPU at 200-byte records; with jemalloc the pod needs
// fewer cores for 5 000 slow streams (README, "Pod efficiency benchmarks", jemalloc).
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

// jemalloc's options, read when it starts (`_RJEM_MALLOC_CONF` in the environment still
// overrides them). `oversize_threshold:0`: no arena of its own for allocations over 8 MiB.
// That arena gives pages back to the kernel as soon as they are freed, and a pod frees
// such buffers all the time (a run's columns and WAL frame, the flush's groups); at
// 10 KiB records every one was faulted in again, 25–69 % more pod CPU per GB than glibc.
// The symbol is jemalloc's weak `malloc_conf` (prefixed by tikv-jemalloc-sys); a C
// `const char *` is one pointer, as a `&[u8; N]` is.
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[export_name = "_rjem_malloc_conf"]
#[allow(non_upper_case_globals)]
static malloc_conf: &[u8; 21] = b"oversize_threshold:0\0";

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
