//! `sluice tail TABLE`: prints a table's rows as JSON lines as they become visible in
//! Delta, for a quick look. It asks the pod for the table's location, then polls the
//! Delta log every `--interval` and prints the rows of each data file it has not seen
//! (`--from-start`: the rows already there first). `--max-rows N` exits after N rows.
//! Rows of files that a compaction rewrites are printed again (the tail follows files,
//! not rows). The location is opened with the `AWS_*` environment for `s3://` tables.

use std::collections::HashSet;
use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use object_store::ObjectStoreExt as _;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::client::ConnArgs;

/// `sluice tail` arguments.
#[derive(clap::Args)]
pub struct TailArgs {
    #[command(flatten)]
    conn: ConnArgs,
    /// The table (`catalog.schema.table`).
    table: String,
    /// Print the rows already in the table first.
    #[arg(long)]
    from_start: bool,
    /// How often to look for new versions.
    #[arg(long, default_value = "500ms", value_parser = humantime::parse_duration)]
    interval: Duration,
    /// Exit after printing this many rows.
    #[arg(long)]
    max_rows: Option<u64>,
}

/// Runs `sluice tail`.
pub async fn run(args: TailArgs) -> anyhow::Result<()> {
    let client = args.conn.connect().await?;
    let info = client
        .send(client.api(
            reqwest::Method::GET,
            &format!("/api/2.1/unity-catalog/tables/{}", args.table),
        ))
        .await?;
    let location = info["storage_location"]
        .as_str()
        .context("the table has no storage_location")?;
    let url = url::Url::parse(location).with_context(|| format!("location `{location}`"))?;
    let mut table = deltalake::DeltaTableBuilder::from_url(url)?
        .load()
        .await
        .with_context(|| format!("open Delta table {location}"))?;
    let mut seen: HashSet<String> = HashSet::new();
    if !args.from_start {
        seen.extend(
            table
                .get_files_by_partitions(&[])
                .await?
                .iter()
                .map(|p| p.to_string()),
        );
    }
    let mut printed = 0u64;
    let stdout = std::io::stdout();
    loop {
        for path in table.get_files_by_partitions(&[]).await? {
            if !seen.insert(path.to_string()) {
                continue;
            }
            let bytes = table
                .object_store()
                .get(&path)
                .await
                .with_context(|| format!("read {path}"))?
                .bytes()
                .await?;
            let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)?.build()?;
            for batch in reader {
                let batch = batch?;
                let take = args.max_rows.map_or(batch.num_rows(), |m| {
                    (m - printed).min(batch.num_rows() as u64) as usize
                });
                let mut out = stdout.lock();
                let mut writer = arrow_json::LineDelimitedWriter::new(&mut out);
                writer.write(&batch.slice(0, take))?;
                writer.finish()?;
                out.flush()?;
                printed += take as u64;
                if args.max_rows.is_some_and(|m| printed >= m) {
                    return Ok(());
                }
            }
        }
        tokio::time::sleep(args.interval).await;
        table.update_incremental(None).await?;
    }
}
