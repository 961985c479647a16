//! Starting, stopping and killing real `sluice serve` processes, and reading
//! their Delta tables back.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::RecordBatch;
use databricks_zerobus_ingest_sdk::{AckCallback, ZerobusError, ZerobusSdk, ZerobusStream};

pub const CLIENT_ID: &str = "it-admin";
pub const CLIENT_SECRET: &str = "it-admin-secret-0123456789abcdefghij";
/// The key-encryption key given to cluster pods (`SLUICE_SECRETS_KEY`): 32 bytes of 0x2a.
pub const CLUSTER_KEK: &str = "KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=";

pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// A running `sluice serve` process.
pub struct Server {
    child: Option<Child>,
    pub port: u16,
    pub url: String,
    pub data_dir: PathBuf,
    flush_interval: String,
    extra_args: Vec<String>,
    /// Environment variables of the process (test hooks), applied at every spawn.
    pub env: Vec<(String, String)>,
}

impl Server {
    /// Starts a server on a fresh port with the given flush interval.
    pub async fn start(data_dir: &Path, flush_interval: &str) -> Server {
        Self::start_with_args(data_dir, flush_interval, &[]).await
    }

    /// Starts a server with extra `sluice serve` arguments.
    pub async fn start_with_args(data_dir: &Path, flush_interval: &str, extra: &[&str]) -> Server {
        Self::start_with_env(data_dir, flush_interval, extra, &[]).await
    }

    /// Starts a server with extra `sluice serve` arguments and environment variables (test
    /// hooks); a restart keeps both.
    pub async fn start_with_env(
        data_dir: &Path,
        flush_interval: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        let port = free_port();
        let mut s = Server {
            child: None,
            port,
            url: format!("http://127.0.0.1:{port}"),
            data_dir: data_dir.to_path_buf(),
            flush_interval: flush_interval.to_string(),
            extra_args: extra.iter().map(|s| s.to_string()).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        s.spawn().await;
        s
    }

    async fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.data_dir.join("server.log"))
            .or_else(|_| {
                std::fs::create_dir_all(&self.data_dir)?;
                std::fs::File::create(self.data_dir.join("server.log"))
            })
            .expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["serve", "--data-dir"])
            .arg(&self.data_dir)
            .args(["--listen", &format!("127.0.0.1:{}", self.port)])
            .args(["--flush-interval", &self.flush_interval])
            .args([
                "--bootstrap-principal",
                &format!("{CLIENT_ID}:{CLIENT_SECRET}"),
            ])
            .args(&self.extra_args)
            .env("RUST_LOG", "info")
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .envs(
                self.extra_args
                    .iter()
                    .any(|a| a == "--join")
                    .then_some(("SLUICE_SECRETS_KEY", CLUSTER_KEK)),
            )
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn sluice");
        self.child = Some(child);
        self.wait_healthy().await;
    }

    async fn wait_healthy(&mut self) {
        let url = format!("{}/healthz", self.url);
        let log = self.data_dir.join("server.log");
        let child = self.child.as_mut().expect("spawned");
        wait_http_ok(&url, "sluice serve", child, &log, Duration::from_secs(60)).await;
    }

    /// The sum of the values of the Prometheus series whose line starts with `name` (a
    /// metric name, optionally with its labels).
    pub async fn metric(&self, name: &str) -> f64 {
        self.metrics(&[name]).await[0]
    }

    /// One scrape of `/metrics`, as text.
    pub async fn metrics_text(&self) -> String {
        reqwest::get(format!("{}/metrics", self.url))
            .await
            .expect("metrics")
            .text()
            .await
            .expect("metrics text")
    }

    /// [`Server::metric`] for each of `names`, all from one scrape.
    pub async fn metrics(&self, names: &[&str]) -> Vec<f64> {
        let text = self.metrics_text().await;
        names
            .iter()
            .map(|name| {
                text.lines()
                    .filter(|l| l.starts_with(name) && !l.starts_with('#'))
                    .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                    .sum()
            })
            .collect()
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.data_dir.join("server.log")).unwrap_or_default()
    }

    /// The log so far, after checking that the process never panicked.
    pub fn log_without_panic(&self) -> String {
        let log = self.log();
        assert!(!log.contains("panicked"), "the server panicked:\n{log}");
        log
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// SIGKILL: no shutdown code runs.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("kill");
            child.wait().expect("wait");
        }
    }

    /// SIGTERM without waiting: the graceful stop begins.
    pub fn sigterm(&self) {
        if let Some(child) = &self.child {
            // SAFETY: kill(2) on our own child's pid; no memory is touched.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        }
    }

    /// SIGTERM and wait for the graceful stop.
    pub fn terminate(&mut self) {
        self.sigterm();
        if let Some(mut child) = self.child.take() {
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                if let Ok(Some(status)) = child.try_wait() {
                    assert!(
                        status.success(),
                        "sluice exited with {status}:\n{}",
                        self.log()
                    );
                    return;
                }
                assert!(Instant::now() < deadline, "sluice did not stop on SIGTERM");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// Waits (up to `timeout`) for the process to exit on its own; returns whether it
    /// exited successfully.
    pub fn wait_exit(&mut self, timeout: Duration) -> bool {
        let Some(mut child) = self.child.take() else {
            return false;
        };
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return status.success();
            }
            if Instant::now() >= deadline {
                self.child = Some(child);
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts the process again on the same port and data dir.
    pub async fn restart(&mut self) {
        assert!(self.child.is_none(), "restart of a running server");
        self.spawn().await;
    }

    /// Runs the `sluice` CLI against this server.
    pub fn cli(&self, args: &[&str]) -> std::process::Output {
        cli_at(&self.url, args)
    }

    /// Runs a CLI command that must succeed and print JSON: the JSON and its stderr lines.
    pub fn cli_json(&self, args: &[&str]) -> (serde_json::Value, Vec<String>) {
        let out = self.cli(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "sluice {args:?}: {stderr}");
        let json = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("sluice {args:?} printed no JSON ({e}): {stderr}"));
        (json, stderr.lines().map(str::to_string).collect())
    }

    /// Creates a table through the CLI.
    pub fn create_table(&self, name: &str, columns: &str) {
        self.create_table_with_flags(name, columns, &[]);
    }

    /// Creates a table through the CLI with extra `table create` flags
    /// (e.g. `--system-columns`).
    pub fn create_table_with_flags(&self, name: &str, columns: &str, flags: &[&str]) {
        let mut args = vec!["table", "create", name, "--columns", columns];
        args.extend_from_slice(flags);
        let out = self.cli(&args);
        assert!(
            out.status.success(),
            "table create failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Creates a table through the CLI and returns its storage location.
    pub async fn create_table_at(&self, name: &str, columns: &str) -> String {
        self.create_table_with(name, columns, &[]).await
    }

    /// Creates a table through the CLI with more `table create` arguments
    /// (e.g. `--property delta.KEY=VALUE`) and returns its storage location.
    pub async fn create_table_with(&self, name: &str, columns: &str, extra: &[&str]) -> String {
        self.create_table_with_flags(name, columns, extra);
        self.table_info(name).await["storage_location"]
            .as_str()
            .expect("storage_location")
            .to_string()
    }

    /// An official-SDK JSON stream to `table` with the admin credentials.
    pub async fn json_stream(&self, table: &str) -> ZerobusStream {
        admin_json_stream(&self.sdk(), table).await
    }

    /// An official-SDK JSON stream to `table` without SDK recovery, for tests that watch how
    /// a stream fails (the SDK's error carries the server's status); a flush gives up after
    /// 30 s. Acks are reported to `acks` if given.
    pub async fn unrecovered_json_stream(
        &self,
        table: &str,
        acks: Option<Arc<dyn AckCallback>>,
    ) -> Result<ZerobusStream, ZerobusError> {
        let sdk = self.sdk();
        let mut builder = sdk
            .stream_builder()
            .table(table)
            .oauth(CLIENT_ID, CLIENT_SECRET)
            .json()
            .recovery(false)
            .flush_timeout_ms(30_000);
        if let Some(acks) = acks {
            builder = builder.ack_callback(acks);
        }
        builder.build().await
    }

    /// An official-SDK protobuf stream to `table` with the admin credentials,
    /// opened with `descriptor`.
    pub async fn proto_stream(
        &self,
        table: &str,
        descriptor: prost_types::DescriptorProto,
    ) -> ZerobusStream {
        self.sdk()
            .stream_builder()
            .table(table)
            .oauth(CLIENT_ID, CLIENT_SECRET)
            .compiled_proto(descriptor)
            .build()
            .await
            .expect("proto stream")
    }

    /// Pushes `{"id": i, "note": "n<i>"}` for `i in 0..n` on one JSON
    /// stream, waits until every record is acked, then SIGKILLs the server
    /// under the still open stream.
    pub async fn push_notes_then_kill(&mut self, table: &str, n: i64) {
        let stream = self.json_stream(table).await;
        for i in 0..n {
            let rec = serde_json::json!({"id": i, "note": format!("n{i}")}).to_string();
            stream
                .ingest_record_offset(databricks_zerobus_ingest_sdk::JsonString(rec))
                .await
                .expect("ingest");
        }
        stream.flush().await.expect("every record acked");
        self.kill();
        drop(stream);
    }

    /// Asserts that `rows` (JSON rows, any order) are exactly the `n` records
    /// [`Server::push_notes_then_kill`] pushed: ids `0..n`, each once, each
    /// with its note.
    pub fn assert_pushed_notes(rows: &mut [serde_json::Value], n: i64) {
        rows.sort_by_key(|r| r["id"].as_i64().expect("id"));
        assert_eq!(rows.len(), n as usize, "each record exactly once");
        for (i, r) in rows.iter().enumerate() {
            assert_eq!(r["id"], i as i64);
            assert_eq!(r["note"], format!("n{i}"));
        }
    }

    /// An official-SDK client for this server (TLS off, default OAuth flow).
    pub fn sdk(&self) -> ZerobusSdk {
        sdk_at(&self.url)
    }

    /// An admin access token.
    pub async fn token(&self) -> String {
        let v: serde_json::Value = reqwest::Client::new()
            .post(format!("{}/oidc/v1/token", self.url))
            .basic_auth(CLIENT_ID, Some(CLIENT_SECRET))
            .form(&[("grant_type", "client_credentials")])
            .send()
            .await
            .expect("token request")
            .json()
            .await
            .expect("token json");
        v["access_token"]
            .as_str()
            .expect("access_token")
            .to_string()
    }

    /// The UC table info JSON of a table.
    pub async fn table_info(&self, name: &str) -> serde_json::Value {
        reqwest::Client::new()
            .get(format!("{}/api/2.1/unity-catalog/tables/{name}", self.url))
            .bearer_auth(self.token().await)
            .send()
            .await
            .expect("get table")
            .json()
            .await
            .expect("table json")
    }
}

/// Polls `url` until it answers 2xx; panics (with the process's log) if `child` exits
/// first or `timeout` passes.
pub async fn wait_http_ok(url: &str, what: &str, child: &mut Child, log: &Path, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    let client = reqwest::Client::new();
    let read_log = || std::fs::read_to_string(log).unwrap_or_default();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited early ({status}); log:\n{}", read_log());
        }
        if let Ok(r) = client.get(url).send().await {
            if r.status().is_success() {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{what} did not answer {url}:\n{}",
            read_log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs the `sluice` CLI against `url` with the admin credentials.
pub fn cli_at(url: &str, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .env("SLUICE_SERVER", url)
        .env("SLUICE_CLIENT_ID", CLIENT_ID)
        .env("SLUICE_CLIENT_SECRET", CLIENT_SECRET)
        .output()
        .expect("run sluice cli")
}

/// An official-SDK JSON stream to `table` through `sdk` with the admin credentials.
pub async fn admin_json_stream(sdk: &ZerobusSdk, table: &str) -> ZerobusStream {
    sdk.stream_builder()
        .table(table)
        .oauth(CLIENT_ID, CLIENT_SECRET)
        .json()
        .build()
        .await
        .expect("json stream")
}

/// An official-SDK client for `url` (gRPC and OAuth/catalog; TLS off).
pub fn sdk_at(url: &str) -> ZerobusSdk {
    ZerobusSdk::builder()
        .endpoint(url)
        .unity_catalog_url(url)
        .no_tls()
        .build()
        .expect("sdk")
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Reads every row of the Delta table at `location` (the files of its
/// current snapshot, as the deltalake crate lists them).
pub async fn read_delta(location: &str) -> Vec<RecordBatch> {
    let url = url::Url::parse(location).expect("url");
    let table = deltalake::open_table(url).await.expect("open delta table");
    let mut batches = Vec::new();
    let uris: Vec<String> = table.get_file_uris().expect("file uris").collect();
    for uri in uris {
        let path = url::Url::parse(&uri)
            .ok()
            .and_then(|u| u.to_file_path().ok())
            .unwrap_or_else(|| PathBuf::from(&uri));
        let file = std::fs::File::open(&path).expect("open parquet");
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
            .expect("parquet reader")
            .build()
            .expect("build reader");
        for b in reader {
            batches.push(b.expect("batch"));
        }
    }
    batches
}

/// The live Parquet files of the Delta table at `location` (a local folder): each file's
/// path in the table and the Arrow schema it was written with.
pub async fn live_file_schemas(location: &str) -> Vec<(String, arrow_schema::SchemaRef)> {
    let url = url::Url::parse(location).expect("url");
    let dir = url.to_file_path().expect("a local table");
    let table = deltalake::open_table(url).await.expect("open delta table");
    let files: Vec<String> = table
        .snapshot()
        .expect("snapshot")
        .log_data()
        .iter()
        .map(|f| f.path().to_string())
        .collect();
    files
        .into_iter()
        .map(|file| {
            let bytes = bytes::Bytes::from(std::fs::read(dir.join(&file)).expect("read file"));
            let reader =
                parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
                    .expect("parquet");
            let schema = reader.schema().clone();
            (file, schema)
        })
        .collect()
}

/// Number of rows in the Delta table at `location`.
pub async fn delta_row_count(location: &str) -> usize {
    read_delta(location)
        .await
        .iter()
        .map(|b| b.num_rows())
        .sum()
}

/// Polls until the table holds `rows` rows (or panics after `timeout`).
pub async fn wait_for_rows(location: &str, rows: usize, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let n = delta_row_count(location).await;
        if n >= rows {
            assert_eq!(n, rows, "more rows than expected");
            return;
        }
        assert!(
            Instant::now() < deadline,
            "only {n} of {rows} rows after {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Sends JSON records `{"id": 0..n}` on `stream`, flushes and closes it; returns the record
/// bytes sent.
pub async fn push_ids_and_close(mut stream: ZerobusStream, n: i64) -> usize {
    let mut bytes = 0;
    for id in 0..n {
        let record = serde_json::json!({ "id": id }).to_string();
        bytes += record.len();
        stream
            .ingest_record_offset(databricks_zerobus_ingest_sdk::JsonString(record))
            .await
            .expect("ingest");
    }
    stream.flush().await.expect("flush");
    let _ = stream.close().await;
    bytes
}
