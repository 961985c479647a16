//! Evolve benchmark: the cost of a rewriting alter (`sluice table alter …
//! --rewrite`, every data file read and written again under the new schema in
//! one Delta commit) beside its peer, `sluice table optimize` (compaction: the
//! same files read and written again, no schema change), on one table of
//! `--rows` rows pushed by `sluice push` into a real `sluice serve`.
//!
//! For each operation: wall seconds of the CLI call, rows/s, the table's bytes
//! read, and the pod's own CPU seconds (utime + stime from /proc) per GB read;
//! the ratio column compares with optimize in the same run.
//!
//! Run: `cargo build --release -p sluice-server && cargo run --release -p
//! sluice-bench --features e2e --bin evolve-bench -- --rows 1000000`.
//! Options: `--sluice PATH` (default target/release/sluice), `--rows N`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Result};
use clap::Parser;
use sluice_bench::procstat::cpu_seconds;
use sluice_bench::server::{require_binary, Server, CLIENT_ID, CLIENT_SECRET};
use sluice_bench::table::Table;

/// Evolve benchmark: a rewriting alter beside optimize on one table.
#[derive(clap::Parser)]
struct Options {
    /// The `sluice` binary to benchmark.
    #[arg(long, default_value = "target/release/sluice")]
    sluice: PathBuf,
    /// Rows in the table.
    #[arg(long, default_value_t = 1_000_000)]
    rows: u64,
}

const TABLE: &str = "main.bench.evolve";

/// Runs the `sluice` CLI against `url`; fails with its stderr.
fn cli(sluice: &Path, url: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(sluice)
        .args(args)
        .env("SLUICE_SERVER", url)
        .env("SLUICE_CLIENT_ID", CLIENT_ID)
        .env("SLUICE_CLIENT_SECRET", CLIENT_SECRET)
        .output()?;
    if !out.status.success() {
        bail!("sluice {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Rows and bytes of the table's live files (Delta log stats).
async fn live(location: &str) -> Result<(u64, i64, usize)> {
    let table = deltalake::open_table(url::Url::parse(location)?).await?;
    let snapshot = table.snapshot()?;
    let (mut rows, mut bytes, mut files) = (0u64, 0i64, 0usize);
    for f in snapshot.log_data().iter() {
        files += 1;
        bytes += f.size();
        let stats: serde_json::Value =
            serde_json::from_str(&f.stats().unwrap_or_default()).unwrap_or_default();
        rows += stats["numRecords"].as_u64().unwrap_or(0);
    }
    Ok((rows, bytes, files))
}

/// One timed CLI operation: wall seconds and the pod's CPU seconds.
fn timed(sluice: &Path, server: &Server, args: &[&str]) -> Result<(f64, f64)> {
    let cpu = cpu_seconds(server.pid())?;
    let started = Instant::now();
    cli(sluice, &server.url, args)?;
    Ok((
        started.elapsed().as_secs_f64(),
        cpu_seconds(server.pid())? - cpu,
    ))
}

#[tokio::main]
async fn main() -> Result<()> {
    let o = Options::parse();
    require_binary(&o.sluice)?;
    let dir = std::env::temp_dir().join(format!("evolve-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let server = Server::start(&o.sluice, &dir, "1s", &[])?;
    server.wait_ready().await?;
    cli(
        &o.sluice,
        &server.url,
        &[
            "table",
            "create",
            TABLE,
            "--columns",
            "id BIGINT NOT NULL, device STRING, temp FLOAT, n INT, note STRING",
        ],
    )?;
    let location = serde_json::from_str::<serde_json::Value>(&cli(
        &o.sluice,
        &server.url,
        &["table", "describe", TABLE, "--json"],
    )?)?["storage_location"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let input = dir.join("rows.jsonl");
    let mut text = String::with_capacity(o.rows as usize * 90);
    for i in 0..o.rows {
        text.push_str(&format!(
            "{{\"id\": {i}, \"device\": \"device-{}\", \"temp\": {}.25, \"n\": {}, \"note\": \"note {i}\"}}\n",
            i % 1000,
            i % 50,
            i % 100_000
        ));
    }
    std::fs::write(&input, text)?;
    let path = input.display().to_string();
    cli(&o.sluice, &server.url, &["push", TABLE, &path])?;
    let deadline = Instant::now() + std::time::Duration::from_secs(600);
    let (rows, bytes, files) = loop {
        let now = live(&location).await?;
        if now.0 >= o.rows {
            break now;
        }
        if Instant::now() > deadline {
            bail!("only {} of {} rows committed", now.0, o.rows);
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    };
    println!(
        "table: {rows} rows in {files} files, {:.1} MB (build of {})",
        bytes as f64 / 1e6,
        o.sluice.display()
    );
    let mut out = Table::new(&[
        "operation",
        "rows",
        "MB read",
        "wall s",
        "rows/s",
        "pod CPU s",
        "pod CPU s/GB",
        "rows/s vs optimize",
    ]);
    let rewrite = timed(
        &o.sluice,
        &server,
        &[
            "table",
            "alter",
            TABLE,
            "--widen",
            "temp FLOAT TO DOUBLE",
            "--drop-columns",
            "note",
            "--rewrite",
        ],
    )?;
    let (_, bytes_after, _) = live(&location).await?;
    let optimize = timed(&o.sluice, &server, &["table", "optimize", TABLE])?;
    let mut row = |name: &str, read: i64, (wall, cpu): (f64, f64)| {
        let gb = read as f64 / 1e9;
        out.row(vec![
            name.to_string(),
            rows.to_string(),
            format!("{:.1}", read as f64 / 1e6),
            format!("{wall:.2}"),
            format!("{:.0}", rows as f64 / wall),
            format!("{cpu:.2}"),
            format!("{:.1}", cpu / gb),
            format!("{:.2}", optimize.0 / wall),
        ]);
    };
    row("alter --widen --drop-columns --rewrite", bytes, rewrite);
    row("optimize (peer)", bytes_after, optimize);
    println!("{}", out.render());
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
