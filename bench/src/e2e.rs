//! What the end-to-end benchmarks share (feature `e2e`): the ~200-byte telemetry record and
//! its descriptor, starting real `sluice` processes (pods, routers) and the HTTP calls they
//! need (health, token, table creation), and per-record send/ack timelines fed by the
//! official SDK's ack callback.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use databricks_zerobus_ingest_sdk::{AckCallback, OffsetId};
use prost::Message;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FieldDescriptorProto};

/// Admin principal of benchmark servers.
pub const CLIENT_ID: &str = "bench-admin";
/// Its secret.
pub const CLIENT_SECRET: &str = "bench-admin-secret-0123456789abcdef";
/// Stream `s` uses ids `s * ID_STRIDE + offset`.
pub const ID_STRIDE: i64 = 1_000_000_000;
/// Size the records are padded to.
pub const TARGET_RECORD_BYTES: usize = 200;

#[derive(Clone, PartialEq, prost::Message)]
struct Telemetry {
    #[prost(int64, optional, tag = "1")]
    id: Option<i64>,
    #[prost(string, optional, tag = "2")]
    device: Option<String>,
    #[prost(int64, optional, tag = "3")]
    ts: Option<i64>,
    #[prost(double, optional, tag = "4")]
    temp: Option<f64>,
    #[prost(double, optional, tag = "5")]
    humidity: Option<f64>,
    #[prost(string, optional, tag = "6")]
    payload: Option<String>,
}

/// The descriptor of the telemetry record.
pub fn descriptor() -> DescriptorProto {
    let field = |name: &str, number: i32, ty: Type| FieldDescriptorProto {
        name: Some(name.into()),
        number: Some(number),
        label: Some(Label::Optional as i32),
        r#type: Some(ty as i32),
        ..Default::default()
    };
    DescriptorProto {
        name: Some("Telemetry".into()),
        field: vec![
            field("id", 1, Type::Int64),
            field("device", 2, Type::String),
            field("ts", 3, Type::Int64),
            field("temp", 4, Type::Double),
            field("humidity", 5, Type::Double),
            field("payload", 6, Type::String),
        ],
        ..Default::default()
    }
}

/// One encoded record with id `id`.
pub fn record(id: i64, padding: &str) -> Vec<u8> {
    Telemetry {
        id: Some(id),
        device: Some(format!("device-{:04}", id % 1000)),
        ts: Some(1_700_000_000_000_000 + id),
        temp: Some(20.0 + (id % 100) as f64 / 10.0),
        humidity: Some(0.45),
        payload: Some(padding.to_string()),
    }
    .encode_to_vec()
}

/// Padding that brings a record to ~TARGET_RECORD_BYTES.
pub fn padding() -> String {
    padding_to(TARGET_RECORD_BYTES)
}

/// Padding that brings a record to `bytes` (for id 123 456 789; other ids differ by a byte or
/// two). An empty payload already costs its tag and a one-byte length; a longer one needs a
/// longer length varint.
pub fn padding_to(bytes: usize) -> String {
    let base = record(123_456_789, "").len();
    let pad = (1..=4)
        .map(|varint| (bytes + 1).saturating_sub(base + varint))
        .find(|&p| prost::encoding::encoded_len_varint(p as u64) + p + base == bytes + 1)
        .unwrap_or(0);
    "x".repeat(pad)
}

/// The descriptor of a wide record: `id` (int64) then `c1`..`c{columns-1}` (double).
pub fn wide_descriptor(columns: usize) -> DescriptorProto {
    let field = |name: String, number: i32, ty: Type| FieldDescriptorProto {
        name: Some(name),
        number: Some(number),
        label: Some(Label::Optional as i32),
        r#type: Some(ty as i32),
        ..Default::default()
    };
    let mut fields = vec![field("id".into(), 1, Type::Int64)];
    for c in 1..columns {
        fields.push(field(format!("c{c}"), c as i32 + 1, Type::Double));
    }
    DescriptorProto {
        name: Some("Wide".into()),
        field: fields,
        ..Default::default()
    }
}

/// UC columns of the wide table of [`wide_descriptor`].
pub fn wide_columns(columns: usize) -> serde_json::Value {
    let mut cols =
        vec![serde_json::json!({"name": "id", "type_text": "bigint", "nullable": false})];
    for c in 1..columns {
        cols.push(serde_json::json!({"name": format!("c{c}"), "type_text": "double"}));
    }
    serde_json::Value::Array(cols)
}

/// One encoded wide record with id `id` and `columns - 1` doubles.
pub fn wide_record(id: i64, columns: usize) -> Vec<u8> {
    let mut buf = Vec::with_capacity(columns * 9 + 10);
    prost::encoding::int64::encode(1, &id, &mut buf);
    for c in 1..columns {
        let v = (id % 1000) as f64 + c as f64 / 8.0;
        prost::encoding::double::encode(c as u32 + 1, &v, &mut buf);
    }
    buf
}

/// An official Rust SDK 2.12.0 client of the plain-HTTP benchmark pod at `url` (it serves
/// both the Zerobus endpoint and the Unity Catalog API).
pub fn official_sdk(url: &str) -> Result<Arc<databricks_zerobus_ingest_sdk::ZerobusSdk>> {
    Ok(Arc::new(
        databricks_zerobus_ingest_sdk::ZerobusSdk::builder()
            .endpoint(url)
            .unity_catalog_url(url)
            .no_tls()
            .build()?,
    ))
}

/// A free loopback port.
pub fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// A child process killed when dropped.
pub struct Process {
    /// The child.
    pub child: Child,
    /// Its HTTP base URL (when it serves one).
    pub url: String,
}

impl Process {
    /// Starts `program args…` with output to `log`.
    pub fn spawn(program: &Path, args: &[String], log: &Path, url: String) -> Result<Process> {
        let file = std::fs::File::create(log)?;
        let child = Command::new(program)
            .args(args)
            .env("RUST_LOG", "warn")
            .stdout(file.try_clone()?)
            .stderr(file)
            .stdin(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", program.display()))?;
        Ok(Process { child, url })
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
    }

    /// Waits up to `timeout` for the process to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        bail!("process {} did not exit", self.child.id())
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Removes a scenario's data directory and waits until its file system has committed the
/// removal (`syncfs` of the parent). Freeing gigabytes of blocks — with online discard,
/// trimming them — is then over before the next scenario starts: otherwise it lands in that
/// scenario's first journal commits, which its WAL's fdatasyncs wait for.
pub fn remove_and_settle(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
    if let Some(parent) = dir.parent().and_then(|p| std::fs::File::open(p).ok()) {
        use std::os::fd::AsRawFd;
        // SAFETY: `parent` is an open file for the duration of the call.
        unsafe { libc::syncfs(parent.as_raw_fd()) };
    }
}

/// `sluice serve` arguments for a benchmark pod on `port`.
pub fn serve_args(data_dir: &Path, port: u16, flush_interval: &str) -> Vec<String> {
    vec![
        "serve".into(),
        "--data-dir".into(),
        data_dir.display().to_string(),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
        "--flush-interval".into(),
        flush_interval.into(),
        "--bootstrap-principal".into(),
        format!("{CLIENT_ID}:{CLIENT_SECRET}"),
    ]
}

/// Starts a one-member etcd (`etcd` from PATH, member `name`) with its data and log in
/// `dir`; returns it once healthy, with the `etcd://HOST:PORT` URL pods join.
pub async fn start_etcd(dir: &Path, name: &str) -> Result<(Process, String)> {
    let (client, peer) = (free_port()?, free_port()?);
    let args: Vec<String> = [
        "--name",
        name,
        "--data-dir",
        &dir.join("etcd").display().to_string(),
        "--listen-client-urls",
        &format!("http://127.0.0.1:{client}"),
        "--advertise-client-urls",
        &format!("http://127.0.0.1:{client}"),
        "--listen-peer-urls",
        &format!("http://127.0.0.1:{peer}"),
        "--initial-advertise-peer-urls",
        &format!("http://127.0.0.1:{peer}"),
        "--initial-cluster",
        &format!("{name}=http://127.0.0.1:{peer}"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let etcd = Process::spawn(
        Path::new("etcd"),
        &args,
        &dir.join("etcd.log"),
        format!("http://127.0.0.1:{client}"),
    )?;
    wait_ready(&format!("{}/health", etcd.url)).await?;
    Ok((etcd, format!("etcd://127.0.0.1:{client}")))
}

/// A cluster's key-encryption key file (every pod of a cluster needs the same one), written
/// once as `dir/secrets.key`, mode 0600.
pub fn kek_file(dir: &Path) -> Result<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("secrets.key");
    if !path.exists() {
        // base64 of 32 bytes of 0x2a: a fixed benchmark key.
        std::fs::write(&path, "KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=\n")?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(path)
}

/// Polls `url` until it answers 2xx.
pub async fn wait_ready(url: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Ok(r) = reqwest::get(url).await {
            if r.status().is_success() {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("{url} did not answer")
}

/// An admin token from the server at `base`.
pub async fn token(base: &str) -> Result<String> {
    let v: serde_json::Value = reqwest::Client::new()
        .post(format!("{base}/oidc/v1/token"))
        .basic_auth(CLIENT_ID, Some(CLIENT_SECRET))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await?
        .json()
        .await?;
    Ok(v["access_token"].as_str().context("no token")?.to_string())
}

/// UC columns of the telemetry table the end-to-end benchmarks write.
pub fn telemetry_columns() -> serde_json::Value {
    serde_json::json!([
        {"name": "id", "type_text": "bigint", "nullable": false},
        {"name": "device", "type_text": "string"},
        {"name": "ts", "type_text": "timestamp"},
        {"name": "temp", "type_text": "double"},
        {"name": "humidity", "type_text": "double"},
        {"name": "payload", "type_text": "string"},
    ])
}

/// Creates the telemetry table `name` through the tables API at `base`; returns its location.
pub async fn create_table(base: &str, name: &str) -> Result<String> {
    let columns = telemetry_columns();
    let resp = reqwest::Client::new()
        .post(format!("{base}/api/2.1/unity-catalog/tables"))
        .bearer_auth(token(base).await?)
        .json(&serde_json::json!({"name": name, "columns": columns}))
        .send()
        .await?;
    let status = resp.status();
    let v: serde_json::Value = resp.json().await?;
    if !status.is_success() {
        bail!("create table: {status} {v}");
    }
    Ok(v["storage_location"]
        .as_str()
        .context("location")?
        .to_string())
}

/// Per-stream timestamps by offset (ns since the run's start; 0 = not yet).
pub struct Timeline {
    start: Instant,
    /// When each offset was queued in the SDK.
    pub sent: Vec<AtomicU64>,
    /// When each offset's ack arrived.
    pub acked: Vec<AtomicU64>,
}

impl Timeline {
    /// A timeline for up to `capacity` records.
    pub fn new(start: Instant, capacity: usize) -> Self {
        Timeline {
            start,
            sent: (0..capacity).map(|_| AtomicU64::new(0)).collect(),
            acked: (0..capacity).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// ns since the start.
    pub fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// `(offset, sent ns, acked ns)` of every acked record, in offset order, up to the first
    /// offset never sent.
    pub fn acked_records(&self) -> impl Iterator<Item = (usize, u64, u64)> + '_ {
        self.sent
            .iter()
            .zip(&self.acked)
            .map(|(s, a)| (s.load(Ordering::Relaxed), a.load(Ordering::Relaxed)))
            .take_while(|&(sent, _)| sent != 0)
            .enumerate()
            .filter(|&(_, (_, acked))| acked != 0)
            .map(|(offset, (sent, acked))| (offset, sent, acked))
    }

    /// Notes that `offset` was queued now.
    pub fn mark_sent(&self, offset: usize) {
        self.mark_sent_at(offset, self.now());
    }

    /// Notes that `offset` was due at `ns` since the start (an open-loop producer's schedule,
    /// so time spent waiting for in-flight room counts as latency).
    pub fn mark_sent_at(&self, offset: usize, ns: u64) {
        if let Some(slot) = self.sent.get(offset) {
            slot.store(ns.max(1), Ordering::Relaxed);
        }
    }
}

/// Ack callback that stamps a [`Timeline`] (cumulative acks stamp every offset up to the
/// acked one that has no stamp yet).
pub struct AckTimes {
    timeline: Arc<Timeline>,
    next: AtomicU64,
}

impl AckTimes {
    /// Stamps `timeline`.
    pub fn new(timeline: Arc<Timeline>) -> Self {
        AckTimes {
            timeline,
            next: AtomicU64::new(0),
        }
    }
}

impl AckCallback for AckTimes {
    fn on_ack(&self, offset: OffsetId) {
        let now = self.timeline.now().max(1);
        let from = self.next.fetch_max(offset as u64 + 1, Ordering::Relaxed);
        for o in from..=offset as u64 {
            if let Some(slot) = self.timeline.acked.get(o as usize) {
                slot.store(now, Ordering::Relaxed);
            }
        }
    }
    fn on_error(&self, offset: OffsetId, error_message: &str) {
        eprintln!("record {offset} failed: {error_message}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acked_records_skip_unacked_offsets_and_stop_at_the_first_unsent() {
        let tl = Timeline::new(Instant::now(), 6);
        for (offset, sent, acked) in [(0, 10, 15), (1, 11, 0), (2, 12, 30), (4, 14, 40)] {
            tl.sent[offset].store(sent, Ordering::Relaxed);
            tl.acked[offset].store(acked, Ordering::Relaxed);
        }
        let got: Vec<_> = tl.acked_records().collect();
        assert_eq!(got, [(0, 10, 15), (2, 12, 30)]);
    }

    #[test]
    fn padded_records_have_the_asked_size() {
        for bytes in [200, 1024, 10_240] {
            assert_eq!(record(123_456_789, &padding_to(bytes)).len(), bytes);
        }
    }

    #[test]
    fn a_wide_record_decodes_with_its_descriptor() {
        use prost_reflect::{DescriptorPool, DynamicMessage};
        let file = prost_types::FileDescriptorProto {
            name: Some("wide.proto".into()),
            message_type: vec![wide_descriptor(100)],
            ..Default::default()
        };
        let pool = DescriptorPool::from_file_descriptor_set(prost_types::FileDescriptorSet {
            file: vec![file],
        })
        .expect("pool");
        let desc = pool.get_message_by_name("Wide").expect("message");
        let msg = DynamicMessage::decode(desc, wide_record(7, 100).as_slice()).expect("decode");
        assert_eq!(msg.fields().count(), 100);
        assert_eq!(wide_columns(100).as_array().map(Vec::len), Some(100));
    }
}
