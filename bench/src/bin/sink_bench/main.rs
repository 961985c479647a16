//! Delta sink figures (issue 5), one table each:
//!
//! 1. freshness p50/p99 from ack to visible in a polling deltalake reader, on
//!    the local warehouse and on S3 (moto on loopback), at flush intervals
//!    1 s, 250 ms, 100 ms (one official-SDK JSON stream at `--rate` rec/s);
//! 2. sink throughput: Arrow MB/s into committed Parquet (in-process,
//!    Sluice's file layout), per wall second and per CPU second;
//! 3. files per minute and mean file size before and after compaction;
//! 4. commit rate on one table with 1, 2, 4 concurrent writers, local and S3;
//! 5. many simulated pods on one table (issue 20): one committer taking every
//!    pod's hand-offs vs every pod committing its own appends, side by side.
//!
//! Run: `scripts/bench-sink.sh` (release build, then this binary).
//! Options: `--sluice PATH`, `--seconds N` (freshness per scenario, 10),
//! `--rate N` (records/s, 2000), `--compact-seconds N` (60),
//! `--commit-seconds N` (10), `--commit-retries N` (the sink's
//! `COMMIT_RETRIES`), `--throughput-commits N` (8),
//! `--pods LIST` (simulated pods, 1,10,50,100), `--commit-interval`,
//! `--flush-interval` (1s each), `--rows-per-flush N` (1000),
//! `--committer-s3` (also run the simulation on moto),
//! `--sections LIST` (comma-separated subset of
//! `freshness,throughput,compaction,commits,committer`; default all).

mod commits;
mod committer;
mod compaction;
mod freshness;
mod moto;
mod producer;
mod throughput;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Parser;
use sluice_bench::server::Server;
use sluice_bench::table::Table;
use sluice_server::warehouse::{S3Settings, Warehouse};

/// Delta sink benchmark: freshness (local and S3/moto), sink throughput, compaction, commit rate, simulated pods with one committer.
#[derive(clap::Parser)]
struct Options {
    /// The `sluice` binary to benchmark.
    #[arg(long, default_value = "target/release/sluice")]
    sluice: PathBuf,
    /// Seconds of each freshness run and of each simulated-pods run.
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
    /// Simulated pods of each committer-section run.
    #[arg(long, value_delimiter = ',', default_value = "1,10,50,100")]
    pods: Vec<usize>,
    /// The simulated table committer's commit interval.
    #[arg(long, default_value = "1s", value_parser = committer::parse_interval)]
    commit_interval: Duration,
    /// Each simulated pod writes one file per flush interval.
    #[arg(long, default_value = "1s", value_parser = committer::parse_interval)]
    flush_interval: Duration,
    /// Rows in each simulated pod's file.
    #[arg(long, default_value_t = 1000)]
    rows_per_flush: usize,
    /// Also run the simulated pods on S3 (moto), not only on the local warehouse.
    #[arg(long)]
    committer_s3: bool,
    /// Sections to run, in this order.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "freshness,throughput,compaction,commits,committer"
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
    Committer,
}

/// A server on the local warehouse (`moto`: None) or on S3 under `prefix`.
fn start(
    opts: &Options,
    moto: Option<&moto::Moto>,
    prefix: &str,
    flush: &str,
    extra: &[&str],
) -> Result<(Server, Warehouse, PathBuf)> {
    let (warehouse, dir) = bench_warehouse(moto, prefix)?;
    let mut args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    if let Some(m) = moto {
        args.extend(m.serve_args(prefix));
    }
    let server = Server::start(&opts.sluice, &dir, flush, &args)?;
    Ok((server, warehouse, dir))
}

#[tokio::main]
async fn main() -> Result<()> {
    let opts = Options::parse();
    let wants = |s: Section| opts.sections.contains(&s);
    let needs_sluice = wants(Section::Freshness) || wants(Section::Compaction);
    if needs_sluice && !opts.sluice.exists() {
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
    if wants(Section::Committer) {
        committer_section(&opts, &moto).await?;
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

/// A warehouse of in-process runs: local in a new temporary directory, or
/// S3 (moto) under `prefix`; the directory is the caller's to remove.
fn bench_warehouse(moto: Option<&moto::Moto>, prefix: &str) -> Result<(Warehouse, PathBuf)> {
    let dir = throughput::tempfile_dir(prefix)?;
    let warehouse = match moto {
        Some(m) => Warehouse::parse(
            Some(&format!("s3://{}/{prefix}", moto::BUCKET)),
            &dir,
            &m.settings(),
        )?,
        None => Warehouse::parse(None, &dir.join("warehouse"), &S3Settings::default())?,
    };
    Ok((warehouse, dir))
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
            let (warehouse, dir) = bench_warehouse(m, "commits")?;
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

async fn committer_section(opts: &Options, moto: &moto::Moto) -> Result<()> {
    use committer::{Model, Shape};
    let mut t = Table::new(&[
        "warehouse",
        "pods",
        "model",
        "commits/s",
        "rows/s",
        "lag p50 ms",
        "lag p99 ms",
        "files/commit",
        "failed",
        "CPU ms/commit",
        "check",
    ]);
    let stores: &[(&str, Option<&moto::Moto>)] = if opts.committer_s3 {
        &[("local", None), ("s3 (moto)", Some(moto))]
    } else {
        &[("local", None)]
    };
    for &(store, m) in stores {
        for &pods in &opts.pods {
            for model in [Model::Committer, Model::PerPod] {
                let shape = Shape {
                    pods,
                    seconds: opts.seconds,
                    commit_interval: opts.commit_interval,
                    flush_interval: opts.flush_interval,
                    rows_per_flush: opts.rows_per_flush,
                    retries: opts.commit_retries,
                };
                let prefix = format!("sim-{}-{pods}", model.label());
                let (warehouse, dir) = bench_warehouse(m, &prefix)?;
                let name = format!("pods{pods}");
                let mut r = committer::run(&warehouse, &name, model, shape).await?;
                let check = if r.table_rows == r.rows {
                    "ok".to_string()
                } else {
                    format!("FAIL: table {} rows, answered {}", r.table_rows, r.rows)
                };
                let commits = r.commits.max(1) as f64;
                t.row(vec![
                    store.into(),
                    pods.to_string(),
                    model.label().into(),
                    format!("{:.2}", r.commits as f64 / r.seconds),
                    format!("{:.0}", r.rows as f64 / r.seconds),
                    format!("{:.0}", r.lag.median()),
                    format!("{:.0}", r.lag.quantile(0.99)),
                    format!("{:.1}", r.files as f64 / commits),
                    r.failed.to_string(),
                    format!("{:.0}", 1e3 * r.cpu_s / commits),
                    check.clone(),
                ]);
                if check != "ok" {
                    println!("{store}, {pods} pods, {}: {check}", model.label());
                }
                for (error, n) in &r.errors {
                    println!("{store}, {pods} pods, {}: {n} × {error}", model.label());
                }
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }
    println!(
        "\nSimulated pods on one table ({} s per row, one {}-row file per pod per {:?} flush; committer interval {:?}; per-pod: {} retries)",
        opts.seconds,
        opts.rows_per_flush,
        opts.flush_interval,
        opts.commit_interval,
        opts.commit_retries
    );
    print!("{}", t.render());
    Ok(())
}
