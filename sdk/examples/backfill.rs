//! Backfill from a file: sends a JSON-lines file on a persistent stream, exactly once and
//! resumable — run it again after a crash or Ctrl-C and it skips what the server already
//! holds (the stream id lives in `FILE.backfill.json`).
//!
//! `cargo run -p sluice-sdk --example backfill -- ENDPOINT TABLE FILE` with
//! `SLUICE_CLIENT_ID` / `SLUICE_CLIENT_SECRET` set.

use std::io::BufRead;

use anyhow::Context;
use sluice_sdk::Client;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, endpoint, table, file] = args.as_slice() else {
        anyhow::bail!("usage: backfill ENDPOINT TABLE FILE");
    };
    let client = Client::builder(endpoint.as_str())
        .credentials(
            std::env::var("SLUICE_CLIENT_ID").unwrap_or_default(),
            std::env::var("SLUICE_CLIENT_SECRET").unwrap_or_default(),
        )
        .build()?;
    let stream = client
        .stream(table.as_str())
        .json()
        .persistent(format!("{file}.backfill.json"))
        .open()
        .await?;
    let skip = stream.next_offset();
    let input = std::io::BufReader::new(std::fs::File::open(file).context("open the file")?);
    let mut sent = 0u64;
    for (i, line) in input.lines().enumerate() {
        let line = line?;
        if (i as i64) < skip {
            continue;
        }
        stream.send(line).await?;
        sent += 1;
    }
    stream.close().await?;
    println!("sent {sent} records (skipped {skip} already durable)");
    Ok(())
}
