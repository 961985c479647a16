//! Delta sink figures (issue 5), one table each:
//!
//! 1. freshness p50/p99 from ack to visible in a polling deltalake reader, on
//!    the local warehouse and on S3 (moto on loopback), at flush intervals
//!    1 s, 250 ms, 100 ms (one official-SDK JSON stream at `--rate` rec/s);
//! 2. sink throughput: Arrow MB/s into committed Parquet (in-process,
//!    Sluice's file layout), per wall second and per CPU second;
//! 3. files per minute and mean file size before and after compaction;
//! 4. commit rate on one table with 1, 2, 4 concurrent writers, local and S3.
//!
//! Run: `scripts/bench-sink.sh` (release build, then this binary).
//! Options: `--sluice PATH`, `--seconds N` (freshness per scenario, 10),
//! `--rate N` (records/s, 2000), `--compact-seconds N` (60),
//! `--commit-seconds N` (10), `--commit-retries N` (the sink's
//! `COMMIT_RETRIES`), `--throughput-commits N` (8),
//! `--sections LIST` (comma-separated subset of
//! `freshness,throughput,compaction,commits`; default all).

mod commits;
mod compaction;
mod freshness;
mod moto;
mod producer;
mod throughput;

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Parser;
use sluice_bench::server::Server;
use sluice_bench::table::Table;
use sluice_server::warehouse::{S3Settings, Warehouse};

/// Delta sink benchmark: freshness (local and S3/moto), sink throughput, compaction, commit rate.
#[derive(clap::Parser)]
struct Options {
    /// The `sluice` binary to benchmark.
    #[arg(long, default_value = "target/release/sluice")]
    sluice: PathBuf,
    /// Seconds of each freshness run.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Records per second of the freshness producer.
    #[arg(long, default_value_t = 2000)]
    rate: u64,
    /// Seconds of ingest before compaction is measured.
    #[arg(long, default_value_t = 60)]
    compact_seconds: u64,
    /// Seconds of each commit-rate run.
    #[arg(long, default_value_t = 10)]
    commit_seconds: u64,
    /// Commits of the in-process sink throughput run.
    #[arg(long, default_value_t = 8)]
    throughput_commits: usize,
    /// Lost races each commit of the commit-rate section may retry
    /// (default: the sink's `COMMIT_RETRIES`; deltalake's own default is 15).
    #[arg(long, default_value_t = sluice_server::sink::COMMIT_RETRIES)]
    commit_retries: usize,
    /// Sections to run, in this order.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "freshness,throughput,compaction,commits"
    )]
    sections: Vec<Section>,
}

/// One part of the benchmark.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Section {
    Freshness,
    Throughput,
    Compaction,
    Commits,
}

/// A server on the local warehouse (`moto`: None) or on S3 under `prefix`.
fn start(
    opts: &Options,
    moto: Option<&moto::Moto>,
    prefix: &str,
    flush: &str,
    extra: &[&str],
) -> Result<(Server, Warehouse, PathBuf)> {
    let dir = throughput::tempfile_dir(prefix)?;
    let mut args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    let warehouse = match moto {
        Some(m) => {
            args.extend(m.serve_args(prefix));
            Warehouse::parse(
                Some(&format!("s3://{}/{prefix}", moto::BUCKET)),
                &dir,
                &m.settings(),
            )?
        }
        None => Warehouse::parse(None, &dir.join("warehouse"), &S3Settings::default())?,
    };
    let server = Server::start(&opts.sluice, &dir, flush, &args)?;
    Ok((server, warehouse, dir))
}

#[tokio::main]
async fn main() -> Result<()> {
    let opts = Options::parse();
    if !opts.sluice.exists() {
        bail!(
            "{} not found: cargo build --release -p sluice-server",
            opts.sluice.display()
        );
    }
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let moto = moto::Moto::start().await?;
    println!(
        "Sluice sink benchmark ({cores} cores; S3 = moto_server on loopback; {} rec/s of ~200-byte JSON)",
        opts.rate
    );
    let wants = |s: Section| opts.sections.contains(&s);
    if wants(Section::Freshness) {
        freshness_section(&opts, &moto).await?;
    }
    if wants(Section::Throughput) {
        throughput_section(&opts).await?;
    }
    if wants(Section::Compaction) {
        compaction_section(&opts).await?;
    }
    if wants(Section::Commits) {
        commits_section(&opts, &moto).await?;
    }
    Ok(())
}

async fn freshness_section(opts: &Options, moto: &moto::Moto) -> Result<()> {
    let mut t = Table::new(&[
        "warehouse",
        "flush",
        "fresh p50 ms",
        "fresh p99 ms",
        "samples",
    ]);
    for (store, m) in [("local", None), ("s3 (moto)", Some(moto))] {
        for flush in ["1s", "250ms", "100ms"] {
            let prefix = format!("fresh-{}-{flush}", if m.is_some() { "s3" } else { "local" });
            let (server, warehouse, dir) = start(opts, m, &prefix, flush, &[])?;
            server.wait_ready().await?;
            let mut s = freshness::run(
                &server,
                &warehouse,
                "bench.sink.fresh",
                opts.rate,
                opts.seconds,
            )
            .await?;
            t.row(vec![
                store.into(),
                flush.into(),
                format!("{:.0}", s.median()),
                format!("{:.0}", s.quantile(0.99)),
                s.len().to_string(),
            ]);
            drop(server);
            let _ = std::fs::remove_dir_all(dir);
        }
    }
    println!(
        "\nFreshness: ack → visible to a polling deltalake reader ({} s per row)",
        opts.seconds
    );
    print!("{}", t.render());

    Ok(())
}

async fn throughput_section(opts: &Options) -> Result<()> {
    let r = throughput::run(opts.throughput_commits, 100_000).await?;
    let mut t = Table::new(&[
        "commits",
        "Arrow MB",
        "Parquet MB",
        "wall s",
        "CPU s",
        "MB/s wall",
        "MB/s per CPU-s",
    ]);
    t.row(vec![
        opts.throughput_commits.to_string(),
        format!("{:.1}", r.arrow_mb),
        format!("{:.1}", r.parquet_mb),
        format!("{:.2}", r.wall_s),
        format!("{:.2}", r.cpu_s),
        format!("{:.1}", r.arrow_mb / r.wall_s),
        format!("{:.1}", r.arrow_mb / r.cpu_s),
    ]);
    println!("\nSink throughput: Arrow → Parquet (zstd 3, page statistics) → Delta commit, local, in-process");
    print!("{}", t.render());

    Ok(())
}

async fn compaction_section(opts: &Options) -> Result<()> {
    let (server, warehouse, dir) = start(
        opts,
        None,
        "compaction",
        "1s",
        &["--compact-min-files", "1000000", "--upkeep-interval", "1h"],
    )?;
    server.wait_ready().await?;
    let c = compaction::run(&server, &warehouse, opts.rate, opts.compact_seconds).await?;
    drop(server);
    let _ = std::fs::remove_dir_all(dir);
    let minutes = c.seconds as f64 / 60.0;
    let mut t = Table::new(&["", "files", "files/min", "mean file KB", "rows"]);
    for (label, files) in [("before", &c.before), ("after optimize", &c.after)] {
        t.row(vec![
            label.into(),
            files.count.to_string(),
            format!("{:.1}", files.count as f64 / minutes),
            format!("{:.1}", files.mean_bytes / 1e3),
            files.rows.to_string(),
        ]);
    }
    println!(
        "\nCompaction: {} s of ingest at flush 1 s, local, {} records sent and acked, then optimize ({:.2} s)",
        c.seconds, c.sent, c.optimize_s
    );
    print!("{}", t.render());

    Ok(())
}

async fn commits_section(opts: &Options, moto: &moto::Moto) -> Result<()> {
    let mut t = Table::new(&[
        "warehouse",
        "writers",
        "commits/s",
        "raced %",
        "failed",
        "CPU ms/commit",
    ]);
    for (store, m) in [("local", None), ("s3 (moto)", Some(moto))] {
        for writers in [1usize, 2, 4] {
            let dir = throughput::tempfile_dir("commits")?;
            let warehouse = match m {
                Some(m) => Warehouse::parse(
                    Some(&format!("s3://{}/commits", moto::BUCKET)),
                    &dir,
                    &m.settings(),
                )?,
                None => Warehouse::parse(None, &dir.join("warehouse"), &S3Settings::default())?,
            };
            let name = format!("w{writers}");
            let r = commits::run(
                &warehouse,
                &name,
                writers,
                opts.commit_seconds,
                opts.commit_retries,
            )
            .await?;
            t.row(vec![
                store.into(),
                writers.to_string(),
                format!("{:.1}", r.commits as f64 / r.seconds),
                format!("{:.0}", 100.0 * r.raced as f64 / r.commits.max(1) as f64),
                r.failed.to_string(),
                format!("{:.0}", 1e3 * r.cpu_s / r.commits.max(1) as f64),
            ]);
            for (error, n) in &r.errors {
                println!("{store}, {writers} writers: {n} × {error}");
            }
            let _ = std::fs::remove_dir_all(dir);
        }
    }
    println!(
        "\nCommit rate on one table ({} s per row, one-row appends back to back, sink commit properties: {} retries)",
        opts.commit_seconds,
        opts.commit_retries
    );
    print!("{}", t.render());
    Ok(())
}
