//! The message-queue scenarios of the Milvus comparison of NATS and RocksMQ: publish N
//! messages of one size, every one acknowledged only once it is durable (fsync'd), then read
//! them all back in order. Sluice's WAL side by side with NATS JetStream and RocksDB
//! (feature `peers`) at equal durability:
//!
//! | system | durability of an ack | how the producer keeps `window` messages in flight |
//! |---|---|---|
//! | Sluice WAL | `Durability::Fsync`: fdatasync per group-commit batch | one task: append, wait for the oldest LSN when `window` are pending |
//! | JetStream | `sync_interval: always` (fsync per write), file storage, publish acks | one task: `publish`, await the oldest ack future when `window` are pending |
//! | RocksDB | `WriteOptions::set_sync(true)` (WAL fsync per write group) | `window` threads each `put` one message at a time (RocksDB's own group commit) |
//!
//! Every system gets the same in-flight window (at most 256 messages and 64 MiB) and the
//! same message bytes (an 8-byte sequence number, then filler), and every read checks each
//! message's number and length. Each (system, scenario) runs in a fresh child process
//! (`wal-bench --mq-child ...`) so that peak RSS and CPU seconds belong to that run alone;
//! a NATS server is a grandchild whose usage the child adds to its own.

pub mod sluice;
pub mod usage;

#[cfg(feature = "peers")]
pub mod jetstream;
#[cfg(feature = "peers")]
pub mod rocks;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use usage::Usage;

/// (message bytes, messages) per scenario.
pub const SCENARIOS: [(usize, usize); 4] = [
    (1 << 10, 50_000),
    (64 << 10, 10_000),
    (1 << 20, 500),
    (5 << 20, 100),
];

/// Most messages in flight (published, not yet acknowledged) for any system.
const MAX_WINDOW_MESSAGES: usize = 256;
/// Most bytes in flight for any system.
const MAX_WINDOW_BYTES: usize = 64 << 20;

/// Messages in flight for a message size: the same for every system.
pub fn window(size: usize) -> usize {
    (MAX_WINDOW_BYTES / size.max(1)).clamp(1, MAX_WINDOW_MESSAGES)
}

/// The systems compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum System {
    SluiceWal,
    JetStream,
    RocksDb,
}

impl System {
    /// The systems this build can run: the peers only with feature `peers`.
    pub fn available() -> Vec<System> {
        if cfg!(feature = "peers") {
            vec![System::SluiceWal, System::JetStream, System::RocksDb]
        } else {
            vec![System::SluiceWal]
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            System::SluiceWal => "sluice-wal",
            System::JetStream => "jetstream",
            System::RocksDb => "rocksdb",
        }
    }

    pub fn parse(name: &str) -> anyhow::Result<System> {
        [System::SluiceWal, System::JetStream, System::RocksDb]
            .into_iter()
            .find(|s| s.name() == name)
            .with_context(|| format!("unknown system {name}"))
    }
}

/// The bytes of message `seq`: its sequence number (little endian), then filler.
pub fn message(seq: u64, size: usize) -> Vec<u8> {
    let mut m = vec![0x5au8; size.max(8)];
    m[..8].copy_from_slice(&seq.to_le_bytes());
    m
}

/// Checks that `bytes` is message `seq` of `size` bytes.
pub fn check(seq: u64, size: usize, bytes: &[u8]) -> anyhow::Result<()> {
    anyhow::ensure!(
        bytes.len() == size.max(8),
        "message {seq}: {} bytes, expected {size}",
        bytes.len()
    );
    let got = u64::from_le_bytes(bytes[..8].try_into()?);
    anyhow::ensure!(got == seq, "read message {got} where {seq} was expected");
    Ok(())
}

/// What a child reports for one run.
#[derive(Debug, Serialize, Deserialize)]
pub struct Outcome {
    pub publish_s: f64,
    pub read_s: f64,
    /// Allocated bytes of the store's directory after publishing.
    pub disk_bytes: u64,
    /// The child process itself (client and, for in-process stores, the store).
    pub client: Usage,
    /// A separate server process, if the system has one.
    pub server: Option<Usage>,
}

impl Outcome {
    pub fn cpu_s(&self) -> f64 {
        self.client.cpu_s + self.server.map_or(0.0, |s| s.cpu_s)
    }

    /// Client and server peaks added (an upper bound of their joint peak).
    pub fn peak_rss(&self) -> u64 {
        self.client.peak_rss + self.server.map_or(0, |s| s.peak_rss)
    }
}

/// How the parent reaches the peers.
#[derive(Clone, Debug)]
pub struct PeerOptions {
    /// The `nats-server` binary (needs `sync_interval: always`, v2.10+).
    pub nats_server: String,
}

/// Runs one (system, scenario) in a child process of this binary and returns its report.
pub fn run_isolated(
    system: System,
    size: usize,
    count: usize,
    dir: &Path,
    peers: &PeerOptions,
) -> anyhow::Result<Outcome> {
    let exe = std::env::current_exe().context("locating wal-bench")?;
    let out = Command::new(exe)
        .arg("--mq-child")
        .args([system.name(), &size.to_string(), &count.to_string()])
        .arg(dir)
        .args(["--nats-server", &peers.nats_server])
        .output()
        .context("starting the scenario child")?;
    anyhow::ensure!(
        out.status.success(),
        "{} {size} B x {count} failed ({}): {}",
        system.name(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .context("no report from the scenario child")?;
    Ok(serde_json::from_str(line)?)
}

/// Timings and disk use measured inside a child.
pub struct Measured {
    pub publish: Duration,
    pub read: Duration,
    pub disk_bytes: u64,
    pub server: Option<Usage>,
}

/// Body of `wal-bench --mq-child SYSTEM SIZE COUNT DIR [--nats-server PATH]`: runs the
/// scenario and prints an [`Outcome`] as one JSON line.
pub fn child_main(args: &[String]) -> anyhow::Result<()> {
    let [system, size, count, dir, rest @ ..] = args else {
        anyhow::bail!("--mq-child SYSTEM SIZE COUNT DIR [--nats-server PATH]");
    };
    let system = System::parse(system)?;
    let size: usize = size.parse()?;
    let count: usize = count.parse()?;
    let dir = PathBuf::from(dir);
    let nats_server = match rest {
        [flag, path] if flag == "--nats-server" => path.clone(),
        _ => "nats-server".into(),
    };
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let before = Usage::of_self();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let measured = match system {
        System::SluiceWal => runtime.block_on(sluice::run(&dir, size, count))?,
        #[cfg(feature = "peers")]
        System::JetStream => runtime.block_on(jetstream::run(&dir, size, count, &nats_server))?,
        #[cfg(feature = "peers")]
        System::RocksDb => rocks::run(&dir, size, count)?,
        #[cfg(not(feature = "peers"))]
        other => anyhow::bail!(
            "{} needs wal-bench built with feature `peers` (nats-server: {nats_server})",
            other.name()
        ),
    };
    drop(runtime);
    let after = Usage::of_self();
    let _ = std::fs::remove_dir_all(&dir);
    let outcome = Outcome {
        publish_s: measured.publish.as_secs_f64(),
        read_s: measured.read.as_secs_f64(),
        disk_bytes: measured.disk_bytes,
        client: Usage {
            cpu_s: after.cpu_s - before.cpu_s,
            peak_rss: after.peak_rss,
        },
        server: measured.server,
    };
    println!("{}", serde_json::to_string(&outcome)?);
    Ok(())
}
