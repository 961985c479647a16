//! `sluice push TABLE [FILE|-]`: sends a JSON-lines, CSV, Parquet or Avro input to a table with
//! Sluice's own producer SDK (`sluice-sdk`), with a progress line and a closing summary.
//!
//! Exit codes: 0 when every record was acked; 2 for a bad record (the input's or the
//! server's refusal), naming its 1-based record number and the reason — records before it
//! were sent and acked, none after it; 1 for anything else (no server, bad credentials).
//! `--persistent` sends on a persistent stream whose id lives in a state file: a run
//! killed half-way, run again, resumes at the server's watermark and skips the records
//! already durable, so nothing is written twice (the input must be the same).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use sluice_sdk::{Client, SdkError, Stream};

use super::client::ConnArgs;
use super::push_input::{self, InputFormat, Item};

/// `sluice push` arguments.
#[derive(clap::Args)]
pub struct PushArgs {
    #[command(flatten)]
    conn: ConnArgs,
    /// The table (`catalog.schema.table`).
    table: String,
    /// The input file; `-` or none: standard input.
    file: Option<PathBuf>,
    /// The input format. Default: from the file's extension (standard input: jsonl).
    #[arg(long, value_enum)]
    format: Option<InputFormat>,
    /// Exactly-once and resumable: a persistent stream, its id kept in `--state`.
    #[arg(long)]
    persistent: bool,
    /// The persistent stream's state file. Default: FILE.sluice-push.json.
    #[arg(long)]
    state: Option<PathBuf>,
    /// Records unacked at once.
    #[arg(long, default_value_t = 50_000)]
    max_inflight: usize,
}

/// How a push ended badly.
enum Failure {
    /// A bad record: its 1-based number and why.
    BadRecord(u64, String),
    Other(anyhow::Error),
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Other(e)
    }
}

/// A stream's final error as a failure (a refusal naming a record is a bad record).
fn stream_failure(e: SdkError) -> Failure {
    match e {
        SdkError::Refused {
            record: Some(offset),
            message,
            ..
        } => Failure::BadRecord(offset as u64 + 1, message),
        e => Failure::Other(anyhow::Error::new(e).context("the stream failed")),
    }
}

struct Counts {
    sent: u64,
    bytes: u64,
    skipped: u64,
    position: u64,
}

/// Runs `sluice push`.
pub async fn run(args: PushArgs) -> anyhow::Result<()> {
    match push(args).await {
        Ok(()) => Ok(()),
        Err(Failure::BadRecord(n, why)) => {
            eprintln!("sluice push: record {n}: {why}");
            std::process::exit(2)
        }
        Err(Failure::Other(e)) => Err(e),
    }
}

async fn push(args: PushArgs) -> Result<(), Failure> {
    if args.state.is_some() && !args.persistent {
        return Err(anyhow::anyhow!("--state needs --persistent").into());
    }
    let path = args.file.as_deref();
    let format = push_input::format_for(path, args.format)?;
    let input = push_input::open(path, format)?;
    let mut builder = Client::builder(args.conn.server());
    if let Some((id, secret)) = args.conn.credentials() {
        builder = builder.credentials(id, secret);
    }
    let client = builder.build().context("client")?;
    let mut stream = client
        .stream(&args.table)
        .json()
        .max_inflight_records(args.max_inflight);
    if args.persistent {
        let state = match (
            &args.state,
            path.filter(|p| *p != std::path::Path::new("-")),
        ) {
            (Some(s), _) => s.clone(),
            (None, Some(p)) => {
                let mut s = p.as_os_str().to_owned();
                s.push(".sluice-push.json");
                PathBuf::from(s)
            }
            (None, None) => {
                return Err(
                    anyhow::anyhow!("--persistent on standard input needs --state FILE").into(),
                )
            }
        };
        stream = stream.persistent(state);
    }
    let stream = stream.open().await.map_err(stream_failure)?;
    let skip = if args.persistent {
        u64::try_from(stream.next_offset()).unwrap_or(0)
    } else {
        0
    };
    let started = Instant::now();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Item>(4096);
    let reader = tokio::task::spawn_blocking(move || {
        for item in input.items {
            if tx.blocking_send(item).is_err() {
                break;
            }
        }
    });
    let mut counts = Counts {
        sent: 0,
        bytes: 0,
        skipped: 0,
        position: 0,
    };
    let mut progress = Progress::new(input.total);
    let mut index = 0u64;
    let mut bad = None;
    while let Some(item) = rx.recv().await {
        index += 1;
        counts.position = item.position;
        let record = match item.record {
            Ok(r) => r,
            Err(why) => {
                bad = Some(Failure::BadRecord(index, why));
                break;
            }
        };
        if index <= skip {
            counts.skipped += 1;
            continue;
        }
        counts.bytes += record.len() as u64;
        counts.sent += 1;
        if let Err(e) = stream.send(record).await {
            bad = Some(stream_failure(e));
            break;
        }
        progress.tick(&counts, &stream, started);
    }
    drop(rx);
    let _ = reader.await;
    let closed = stream_close(stream).await;
    progress.finish();
    if let Some(failure) = bad {
        return Err(failure);
    }
    closed?;
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    println!(
        "pushed {} records ({:.1} MB) to {} in {:.1} s: {:.0} records/s, {:.1} MB/s{}",
        counts.sent,
        counts.bytes as f64 / 1e6,
        args.table,
        secs,
        counts.sent as f64 / secs,
        counts.bytes as f64 / 1e6 / secs,
        if counts.skipped > 0 {
            format!(
                "; skipped {} records already durable (resumed)",
                counts.skipped
            )
        } else {
            String::new()
        }
    );
    Ok(())
}

async fn stream_close(stream: Stream) -> Result<(), Failure> {
    stream.close().await.map_err(stream_failure)
}

/// The progress display: on a terminal an `indicatif` bar redrawn every 100 ms (records
/// sent and acked, records/s, MB/s; with a file also the share read and the ETA);
/// otherwise a plain line every 5 s.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    total: Option<u64>,
    last: Instant,
}

impl Progress {
    fn new(total: Option<u64>) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let (bar, template) = match total {
                Some(t) => (
                    indicatif::ProgressBar::new(t),
                    "{spinner} [{bar:30}] {percent:>3}% {msg}, ETA {eta}",
                ),
                None => (indicatif::ProgressBar::new_spinner(), "{spinner} {msg}"),
            };
            if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar
        });
        Progress {
            bar,
            total,
            last: Instant::now(),
        }
    }

    fn tick(&mut self, counts: &Counts, stream: &Stream, started: Instant) {
        let every = if self.bar.is_some() {
            Duration::from_millis(100)
        } else {
            Duration::from_secs(5)
        };
        if self.last.elapsed() < every {
            return;
        }
        self.last = Instant::now();
        let secs = started.elapsed().as_secs_f64().max(1e-9);
        let acked = stream.acked_offset() + 1;
        let line = format!(
            "{} records sent, {acked} acked, {:.0} records/s, {:.1} MB/s",
            counts.sent,
            counts.sent as f64 / secs,
            counts.bytes as f64 / 1e6 / secs
        );
        if let Some(bar) = &self.bar {
            bar.set_position(counts.position);
            bar.set_message(line);
            return;
        }
        let share = self
            .total
            .filter(|t| *t > 0)
            .map(|t| counts.position as f64 / t as f64);
        let eta = share
            .filter(|s| *s > 0.0)
            .map(|s| format!(", {:.0}%, ETA {:.0} s", s * 100.0, secs / s - secs))
            .unwrap_or_default();
        eprintln!("{line}{eta}");
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }
}
