//! `wal-bench` (feature `walbench`): how close Sluice's WAL gets to the disk.
//!
//! 1. The seed recipe for log disks: 2300-byte records, one writer, one fdatasync per
//!    record, through the WAL (on a fresh log's first, `fallocate`d segment, and on a
//!    prepared, zero-filled one); and in the same run
//!    `fio --rw=write --ioengine=sync --fdatasync=1 --size=22m --bs=2300` on the same
//!    directory (as given, and with `--overwrite=1`, a file written before). IOPS and
//!    fdatasync p50/p99 for all.
//! 2. Group-commit scaling: 1, 16, 256 concurrent appenders, 200 B and 2300 B records, each
//!    point with prepared segments and with `fallocate`d ones, alternating run by run:
//!    records/s, MB/s, ack latency p50/p99, fsyncs/s, the fdatasync and pwritev latencies the
//!    disk gave during the run, rotations. Goal: at 256 appenders, records/s ≥ 50× the
//!    single-writer fsync IOPS (fio as given), with p99 ack ≤ 2× fio's fdatasync p99.
//!
//! 3. The message-queue scenarios of the Milvus NATS/RocksMQ comparison (1 KB × 50 000,
//!    64 KB × 10 000, 1 MB × 500, 5 MB × 100; publish all durably, then read all back):
//!    Sluice's WAL, and with feature `peers` NATS JetStream and RocksDB at equal
//!    durability, in the same run (see `mq`).
//!
//! `scripts/bench-wal.sh` installs fio and runs this with one command;
//! `scripts/bench-wal.sh --peers` builds with the peers and runs the scenarios alone.

mod counting_fs;
mod fio;
mod mq;
mod scaling;
mod seed;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use sluice_bench::table::Table;

struct Args {
    dir: PathBuf,
    seconds: u64,
    fio: String,
    seed_bytes: u64,
    /// Runs per scaling point; the table shows medians.
    runs: usize,
    /// Sections to run: `seed`, `scaling`, `mq`.
    only: Vec<String>,
    peers: mq::PeerOptions,
}

impl Args {
    fn runs_section(&self, name: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|s| s == name)
    }
}

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        dir: PathBuf::from("target/wal-bench"),
        seconds: 5,
        fio: "fio".into(),
        seed_bytes: 22 << 20,
        runs: 1,
        only: Vec::new(),
        peers: mq::PeerOptions {
            nats_server: "nats-server".into(),
        },
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--dir" => args.dir = PathBuf::from(value()?),
            "--seconds" => args.seconds = value()?.parse()?,
            "--fio" => args.fio = value()?,
            "--seed-mb" => args.seed_bytes = value()?.parse::<u64>()? << 20,
            "--runs" => args.runs = value()?.parse::<usize>()?.max(1),
            "--only" => args.only = value()?.split(',').map(str::to_owned).collect(),
            "--nats-server" => args.peers.nats_server = value()?,
            "-h" | "--help" => {
                println!(
                    "wal-bench [--dir DIR (target/wal-bench)] [--seconds N per scaling run (5)] \
                     [--runs N scaling runs, medians shown (1)] [--fio PATH (fio)] \
                     [--seed-mb MB (22)] [--only seed,scaling,mq] \
                     [--nats-server PATH (nats-server, >= 2.10; feature peers)]"
                );
                std::process::exit(0);
            }
            other => anyhow::bail!("unknown argument {other}"),
        }
    }
    Ok(args)
}

fn main() -> anyhow::Result<()> {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("--mq-child") {
        return mq::child_main(&argv[2..]);
    }
    let args = parse_args()?;
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    println!("WAL benchmark in {}\n", args.dir.display());
    // The scaling goals are stated against the seed figures, so scaling implies seed.
    if args.runs_section("seed") || args.runs_section("scaling") {
        let disk = seed_section(&runtime, &args)?;
        if args.runs_section("scaling") {
            scaling_section(&runtime, &args, &disk)?;
        }
    }
    if args.runs_section("mq") {
        mq_section(&args)?;
    }
    Ok(())
}

/// The disk's single-writer fsync figures: fio's, else the WAL's own.
struct DiskFigures {
    single_iops: f64,
    fdatasync_p99_ms: f64,
}

/// 1. Seed recipe, Sluice and fio side by side, each on a fresh (`fallocate`d) file and on a
///    file written before (Sluice: a prepared segment; fio: `--overwrite=1`).
fn seed_section(runtime: &tokio::runtime::Runtime, args: &Args) -> anyhow::Result<DiskFigures> {
    let seed_dir = args.dir.join("seed");
    let mut wal_rows = Vec::new();
    for (label, segment) in [
        (
            "Sluice WAL, 1 writer, first segment (fallocate)",
            seed::Segment::First,
        ),
        (
            "Sluice WAL, 1 writer, prepared segment (zero-filled)",
            seed::Segment::Prepared,
        ),
        (
            "Sluice WAL, 1 writer, first segment, O_DIRECT",
            seed::Segment::FirstDirect,
        ),
    ] {
        wal_rows.push((
            label,
            runtime.block_on(seed::run(&seed_dir, args.seed_bytes, segment))?,
        ));
        let _ = std::fs::remove_dir_all(&seed_dir);
    }
    let mut fio_rows = Vec::new();
    for (label, overwrite) in [
        ("fio --ioengine=sync --fdatasync=1", false),
        ("fio ... --overwrite=1 (file written first)", true),
    ] {
        match fio::run(&args.fio, &args.dir, args.seed_bytes, overwrite) {
            Ok(r) => fio_rows.push((label, r)),
            Err(e) => {
                println!("fio did not run ({e:#}); install it with `apt-get install -y fio`\n");
                break;
            }
        }
    }
    let mut t = Table::new(&[
        "seed recipe (2300 B, fdatasync each)",
        "IOPS",
        "p50 ms",
        "p99 ms",
    ]);
    for (label, r) in &wal_rows {
        t.row(vec![
            format!("{label} (ack latency)"),
            format!("{:.0}", r.iops),
            format!("{:.3}", r.p50_ms),
            format!("{:.3}", r.p99_ms),
        ]);
    }
    for (label, f) in &fio_rows {
        t.row(vec![
            format!("{label} (fdatasync latency)"),
            format!("{:.0}", f.iops),
            format!("{:.3}", f.sync_p50_ms),
            format!("{:.3}", f.sync_p99_ms),
        ]);
    }
    println!("{}", t.render());
    // The goals are stated against the fio command (a fresh file), else the WAL's
    // own fresh-log figures.
    let (single_iops, fdatasync_p99_ms) = match (fio_rows.first(), wal_rows.first()) {
        (Some((_, f)), _) => (f.iops, f.sync_p99_ms),
        (None, Some((_, w))) => (w.iops, w.p99_ms),
        (None, None) => anyhow::bail!("no seed figures"),
    };
    Ok(DiskFigures {
        single_iops,
        fdatasync_p99_ms,
    })
}

/// 2. Group-commit scaling, medians of `--runs` runs per point, and the goals.
fn scaling_section(
    runtime: &tokio::runtime::Runtime,
    args: &Args,
    disk: &DiskFigures,
) -> anyhow::Result<()> {
    let mut t = Table::new(&[
        "appenders",
        "record B",
        "next segments",
        "records/s",
        "MB/s",
        "ack p50 ms",
        "ack p99 ms",
        "fsyncs/s",
        "records/fsync",
        "fdatasync p50/p99 ms",
        "pwritev p50 ms",
        "rotations (prepared)",
    ]);
    let mut at_256 = Vec::new();
    for appenders in [1usize, 16, 256] {
        for size in [200usize, 2300] {
            let dir = args.dir.join(format!("scaling-{appenders}-{size}"));
            // Both segment policies alternate run by run, so they share the machine's noise.
            let mut runs: [Vec<scaling::ScalingResult>; 2] = [Vec::new(), Vec::new()];
            for _ in 0..args.runs {
                for (i, prepare) in [true, false].into_iter().enumerate() {
                    runs[i].push(runtime.block_on(scaling::run(
                        &dir,
                        appenders,
                        size,
                        Duration::from_secs(args.seconds),
                        prepare,
                    ))?);
                    let _ = std::fs::remove_dir_all(&dir);
                }
            }
            for (runs, label) in runs.into_iter().zip(["prepared", "fallocate"]) {
                let r = scaling::median(runs);
                t.row(vec![
                    appenders.to_string(),
                    size.to_string(),
                    label.into(),
                    format!("{:.0}", r.records_per_s),
                    format!("{:.1}", r.mb_per_s),
                    format!("{:.3}", r.p50_ms),
                    format!("{:.3}", r.p99_ms),
                    format!("{:.0}", r.fsyncs_per_s),
                    format!("{:.1}", r.records_per_s / r.fsyncs_per_s.max(1e-9)),
                    format!("{:.3}/{:.3}", r.sync_p50_ms, r.sync_p99_ms),
                    format!("{:.3}", r.write_p50_ms),
                    format!("{} ({})", r.rotations, r.adopted),
                ]);
                if appenders == 256 {
                    at_256.push((size, label, r));
                }
            }
        }
    }
    if args.runs > 1 {
        println!("medians of {} runs per row", args.runs);
    }
    println!("{}", t.render());
    for (size, label, r) in &at_256 {
        let speedup = r.records_per_s / disk.single_iops.max(1e-9);
        let p99_goal = 2.0 * disk.fdatasync_p99_ms;
        println!(
            "goal @256 appenders, {size} B, {label}: records/s = {speedup:.0}x single-writer fsync IOPS \
             (goal >= 50x: {}); p99 ack {:.3} ms vs 2x disk fdatasync p99 {p99_goal:.3} ms ({})",
            met(speedup >= 50.0),
            r.p99_ms,
            met(r.p99_ms <= p99_goal),
        );
    }
    println!();
    Ok(())
}

fn met(yes: bool) -> &'static str {
    if yes {
        "met"
    } else {
        "NOT met"
    }
}

/// 3. Message-queue scenarios, every available system in the same run.
fn mq_section(args: &Args) -> anyhow::Result<()> {
    let systems = mq::System::available();
    let mut t = Table::new(&[
        "scenario",
        "system",
        "publish s",
        "read s",
        "s/op (both)",
        "publish MB/s",
        "CPU s",
        "peak RSS MB",
        "disk MB",
    ]);
    let mut verdicts = Vec::new();
    for (size, count) in mq::SCENARIOS {
        let scenario = format!("{} KiB x {count}", size >> 10);
        let mut totals = Vec::new();
        for &system in &systems {
            let dir = args.dir.join("mq").join(system.name());
            let r = mq::run_isolated(system, size, count, &dir, &args.peers)?;
            eprintln!(
                "{scenario} {}: publish {:.3} s, read {:.3} s",
                system.name(),
                r.publish_s,
                r.read_s
            );
            let mb = (size * count) as f64 / 1e6;
            let peak = match r.server {
                Some(s) => format!(
                    "{:.0} (server {:.0})",
                    r.peak_rss() as f64 / 1e6,
                    s.peak_rss as f64 / 1e6
                ),
                None => format!("{:.0}", r.peak_rss() as f64 / 1e6),
            };
            t.row(vec![
                scenario.clone(),
                system.name().into(),
                format!("{:.3}", r.publish_s),
                format!("{:.3}", r.read_s),
                format!("{:.3}", r.publish_s + r.read_s),
                format!("{:.0}", mb / r.publish_s.max(1e-9)),
                format!("{:.2}", r.cpu_s()),
                peak,
                format!("{:.0}", r.disk_bytes as f64 / 1e6),
            ]);
            totals.push((system, r.publish_s, r.read_s));
        }
        verdicts.push((scenario, totals));
    }
    let _ = std::fs::remove_dir_all(args.dir.join("mq"));
    println!(
        "message-queue scenarios: every message acked only once fsync'd; {} in flight at most \
         256 messages / 64 MiB; one child process per row\n{}",
        if systems.len() > 1 {
            "Sluice WAL, NATS JetStream (sync_interval: always), RocksDB (sync writes);"
        } else {
            "Sluice WAL only (build with feature `peers` for JetStream and RocksDB);"
        },
        t.render()
    );
    for (scenario, totals) in verdicts {
        let Some(&(_, wal_pub, wal_read)) = totals.first() else {
            continue;
        };
        for &(system, publish, read) in &totals[1..] {
            println!(
                "{scenario}: Sluice WAL vs {}: publish {:.1}x, read {:.1}x ({})",
                system.name(),
                publish / wal_pub.max(1e-9),
                read / wal_read.max(1e-9),
                if wal_pub < publish && wal_read < read {
                    "Sluice faster at both"
                } else {
                    "Sluice NOT faster at both"
                }
            );
        }
    }
    Ok(())
}
