//! `wal-bench` (feature `walbench`): how close Sluice's WAL gets to the disk.
//!
//! 1. The seed recipe for log disks: 2300-byte records, one writer, one fdatasync per
//!    record, through the WAL; and in the same run
//!    `fio --rw=write --ioengine=sync --fdatasync=1 --size=22m --bs=2300` on the same
//!    directory. IOPS and fdatasync p50/p99 for both.
//! 2. Group-commit scaling: 1, 16, 256 concurrent appenders, 200 B and 2300 B records:
//!    records/s, MB/s, ack latency p50/p99, fsyncs/s. Goal: at 256 appenders, records/s
//!    ≥ 50× the single-writer fsync IOPS, with p99 ack ≤ 2× the disk's fdatasync p99.
//!
//! 3. The message-queue scenarios of the Milvus NATS/RocksMQ comparison (1 KB × 50 000,
//!    64 KB × 10 000, 1 MB × 500, 5 MB × 100; publish all durably, then read all back) on
//!    the WAL alone; the NATS JetStream and RocksDB peers are not wired in yet.
//!
//! `scripts/bench-wal.sh` installs fio and runs this with one command.

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
}

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        dir: PathBuf::from("target/wal-bench"),
        seconds: 5,
        fio: "fio".into(),
        seed_bytes: 22 << 20,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--dir" => args.dir = PathBuf::from(value()?),
            "--seconds" => args.seconds = value()?.parse()?,
            "--fio" => args.fio = value()?,
            "--seed-mb" => args.seed_bytes = value()?.parse::<u64>()? << 20,
            "-h" | "--help" => {
                println!(
                    "wal-bench [--dir DIR (target/wal-bench)] [--seconds N per scaling run (5)] \
                     [--fio PATH (fio)] [--seed-mb MB (22)]"
                );
                std::process::exit(0);
            }
            other => anyhow::bail!("unknown argument {other}"),
        }
    }
    Ok(args)
}

fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    println!("WAL benchmark in {}\n", args.dir.display());

    // 1. Seed recipe, Sluice and fio side by side.
    let wal_seed = runtime.block_on(seed::run(&args.dir.join("seed"), args.seed_bytes))?;
    let fio_seed = match fio::run(&args.fio, &args.dir, args.seed_bytes) {
        Ok(r) => Some(r),
        Err(e) => {
            println!("fio did not run ({e:#}); install it with `apt-get install -y fio`\n");
            None
        }
    };
    let mut t = Table::new(&[
        "seed recipe (2300 B, fdatasync each)",
        "IOPS",
        "fdatasync p50 ms",
        "fdatasync p99 ms",
    ]);
    t.row(vec![
        "Sluice WAL, 1 writer (ack latency)".into(),
        format!("{:.0}", wal_seed.iops),
        format!("{:.3}", wal_seed.p50_ms),
        format!("{:.3}", wal_seed.p99_ms),
    ]);
    if let Some(f) = &fio_seed {
        t.row(vec![
            "fio --ioengine=sync --fdatasync=1".into(),
            format!("{:.0}", f.iops),
            format!("{:.3}", f.sync_p50_ms),
            format!("{:.3}", f.sync_p99_ms),
        ]);
    }
    println!("{}", t.render());

    // 2. Group-commit scaling.
    let mut t = Table::new(&[
        "appenders",
        "record B",
        "records/s",
        "MB/s",
        "ack p50 ms",
        "ack p99 ms",
        "fsyncs/s",
        "records/fsync",
    ]);
    let mut at_256 = Vec::new();
    for appenders in [1usize, 16, 256] {
        for size in [200usize, 2300] {
            let dir = args.dir.join(format!("scaling-{appenders}-{size}"));
            let r = runtime.block_on(scaling::run(
                &dir,
                appenders,
                size,
                Duration::from_secs(args.seconds),
            ))?;
            t.row(vec![
                appenders.to_string(),
                size.to_string(),
                format!("{:.0}", r.records_per_s),
                format!("{:.1}", r.mb_per_s),
                format!("{:.3}", r.p50_ms),
                format!("{:.3}", r.p99_ms),
                format!("{:.0}", r.fsyncs_per_s),
                format!("{:.1}", r.records_per_s / r.fsyncs_per_s.max(1e-9)),
            ]);
            if appenders == 256 {
                at_256.push((size, r));
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    println!("{}", t.render());

    // Goals, against the single-writer fsync IOPS and the disk's fdatasync p99 (fio's,
    // else the WAL's own single-writer figure).
    let single_iops = fio_seed.as_ref().map_or(wal_seed.iops, |f| f.iops);
    let disk_p99 = fio_seed.as_ref().map_or(wal_seed.p99_ms, |f| f.sync_p99_ms);
    for (size, r) in &at_256 {
        let speedup = r.records_per_s / single_iops.max(1e-9);
        println!(
            "goal @256 appenders, {size} B: records/s = {speedup:.0}x single-writer fsync IOPS \
             (goal >= 50x: {}); p99 ack {:.3} ms vs 2x disk fdatasync p99 {:.3} ms ({})",
            if speedup >= 50.0 { "met" } else { "NOT met" },
            r.p99_ms,
            2.0 * disk_p99,
            if r.p99_ms <= 2.0 * disk_p99 {
                "met"
            } else {
                "NOT met"
            },
        );
    }

    // 3. Message-queue scenarios.
    let mut t = Table::new(&[
        "scenario",
        "publish s",
        "read s",
        "publish MB/s",
        "CPU s",
        "peak RSS MB (process)",
        "disk MB",
    ]);
    for (size, count) in mq::SCENARIOS {
        let r = runtime.block_on(mq::run(&args.dir.join("mq"), size, count))?;
        let mb = (size * count) as f64 / 1e6;
        t.row(vec![
            format!("{} KiB x {count}", size >> 10),
            format!("{:.3}", r.publish.as_secs_f64()),
            format!("{:.3}", r.read.as_secs_f64()),
            format!("{:.0}", mb / r.publish.as_secs_f64().max(1e-9)),
            format!("{:.2}", r.cpu_s),
            format!("{:.0}", r.peak_rss_mb),
            format!("{:.0}", r.disk_mb),
        ]);
    }
    println!(
        "\nmessage-queue scenarios (Sluice WAL only)\n{}",
        t.render()
    );
    let _ = std::fs::remove_dir_all(args.dir.join("seed"));
    Ok(())
}
