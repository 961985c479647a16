//! The scenarios on NATS JetStream (feature `peers`): a real `nats-server` process with file
//! storage and `sync_interval: always` (the file store fsyncs every write before the publish
//! ack; Debian's 2.9 server has no such setting and syncs only every 2 minutes, so a 2.10+
//! server is required), driven by the official `async-nats` client. Publishes with acks,
//! keeping `window` ack futures pending; reads back through a pull consumer
//! (`AckPolicy::None`). The server is stopped with SIGTERM and reaped with `wait4`, so its
//! CPU seconds and peak RSS are reported beside the client's.

use std::collections::VecDeque;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use async_nats::jetstream::{self, consumer, stream};
use futures::StreamExt;

use super::usage::{self, Usage};
use super::{check, message, window, Measured};

/// The largest message a scenario sends is 5 MiB; NATS defaults to 1 MiB.
const MAX_PAYLOAD: &str = "8MB";
const SUBJECT: &str = "bench";
/// Bytes per pull request when reading back: whole 64 MiB windows of 5 MiB messages made
/// the server drop deliveries to the client (slow consumer), losing messages.
const READ_BATCH_BYTES: usize = 16 << 20;

pub async fn run(dir: &Path, size: usize, count: usize, binary: &str) -> anyhow::Result<Measured> {
    let store = dir.join("store");
    let mut server = NatsServer::start(binary, dir, &store)?;
    let measured = drive(&server.url, &store, size, count).await;
    let server_usage = server.stop()?;
    let mut measured = measured?;
    measured.server = Some(server_usage);
    Ok(measured)
}

async fn drive(url: &str, store: &Path, size: usize, count: usize) -> anyhow::Result<Measured> {
    let client = connect(url).await?;
    let window = window(size);
    let js = jetstream::ContextBuilder::new()
        .max_ack_inflight(window)
        .backpressure_on_inflight(true)
        .build(client);
    let stream = js
        .create_stream(stream::Config {
            name: "BENCH".into(),
            subjects: vec![SUBJECT.into()],
            storage: stream::StorageType::File,
            ..Default::default()
        })
        .await?;

    let started = Instant::now();
    let mut pending = VecDeque::with_capacity(window);
    for seq in 0..count as u64 {
        if pending.len() == window {
            if let Some(ack) = pending.pop_front() {
                ack.await?;
            }
        }
        pending.push_back(js.publish(SUBJECT, message(seq, size).into()).await?);
    }
    for ack in pending {
        ack.await?;
    }
    let publish = started.elapsed();
    let disk_bytes = usage::allocated_bytes(store);

    let started = Instant::now();
    let consumer: consumer::PullConsumer = stream
        .create_consumer(consumer::pull::Config {
            ack_policy: consumer::AckPolicy::None,
            ..Default::default()
        })
        .await?;
    let mut messages = consumer
        .stream()
        .max_messages_per_batch(window)
        .max_bytes_per_batch(READ_BATCH_BYTES.max(size + 4096))
        .messages()
        .await?;
    for seq in 0..count as u64 {
        let m = messages
            .next()
            .await
            .with_context(|| format!("the consumer ended after {seq} messages"))??;
        check(seq, size, &m.payload)?;
    }
    let read = started.elapsed();
    Ok(Measured {
        publish,
        read,
        disk_bytes,
        server: None,
    })
}

/// Connects, retrying while the server starts up.
async fn connect(url: &str) -> anyhow::Result<async_nats::Client> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match async_nats::connect(url).await {
            Ok(c) => return Ok(c),
            Err(e) if Instant::now() > deadline => {
                return Err(e).with_context(|| format!("connecting to nats-server at {url}"))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// A `nats-server` child process with JetStream on `store`.
struct NatsServer {
    child: Child,
    url: String,
}

impl NatsServer {
    fn start(binary: &str, dir: &Path, store: &Path) -> anyhow::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let conf = dir.join("nats.conf");
        std::fs::write(
            &conf,
            format!(
                "listen: \"127.0.0.1:{port}\"\nmax_payload: {MAX_PAYLOAD}\n\
                 jetstream {{\n  store_dir: \"{}\"\n  sync_interval: always\n}}\n",
                store.display()
            ),
        )?;
        let child = Command::new(binary)
            .arg("-c")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {binary} (needs nats-server >= 2.10)"))?;
        Ok(NatsServer {
            child,
            url: format!("nats://127.0.0.1:{port}"),
        })
    }

    /// SIGTERM, then reap: the server's own CPU and peak memory.
    fn stop(&mut self) -> anyhow::Result<Usage> {
        if let Some(status) = self.child.try_wait()? {
            anyhow::bail!("nats-server exited early: {status}");
        }
        let pid = libc::pid_t::try_from(self.child.id())?;
        // SAFETY: `pid` is our child, not yet reaped (try_wait above saw it running).
        unsafe { libc::kill(pid, libc::SIGTERM) };
        Ok(usage::wait_child(self.child.id())?)
    }
}
