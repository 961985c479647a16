//! A real S3-compatible server for the tests: moto's `moto_server`
//! (PyPI `moto[s3,server]`, installed into `.venv` by `scripts/test.sh`),
//! one process per test on a free loopback port, killed on drop. moto
//! honours `If-None-Match: *` atomically, which concurrent Delta writers
//! rely on.
//!
//! Also the Python reader: `tests/python/delta_reader.py` reads a table with
//! Python `deltalake` and `polars` (local or on moto) and hands the rows back
//! as an Arrow IPC file.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use arrow_array::RecordBatch;
use serde_json::Value;

use crate::harness::free_port;

pub const BUCKET: &str = "sluice-it";

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root")
        .to_path_buf()
}

/// A program of the test virtualenv (`.venv/bin`), or the path in `override_var`.
pub fn venv_bin(name: &str, override_var: &str) -> PathBuf {
    if let Ok(p) = std::env::var(override_var) {
        return PathBuf::from(p);
    }
    let p = repo_root().join(".venv/bin").join(name);
    assert!(
        p.exists(),
        "{} not found: run scripts/test.sh once (it installs tests/python/requirements.txt \
         into .venv) or set {override_var}",
        p.display()
    );
    p
}

/// `--warehouse warehouse` and the S3 flags of moto's test credentials at
/// `endpoint`.
pub fn s3_args(warehouse: &str, endpoint: &str) -> Vec<String> {
    [
        "--warehouse",
        warehouse,
        "--s3-endpoint",
        endpoint,
        "--s3-region",
        "us-east-1",
        "--s3-access-key-id",
        "testing",
        "--s3-secret-access-key",
        "testing",
        "--s3-allow-http",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// `moto_server` on `port`, logging (appending) to `logs/moto.log`.
fn spawn_moto(logs: &tempfile::TempDir, port: u16) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(logs.path().join("moto.log"))
        .expect("moto log");
    Command::new(venv_bin("moto_server", "SLUICE_MOTO_SERVER"))
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn moto_server")
}

/// A running moto S3 server with one bucket.
pub struct Moto {
    child: Child,
    pub endpoint: String,
    _logs: tempfile::TempDir,
}

impl Moto {
    /// Starts `moto_server` and creates the test bucket.
    pub async fn start() -> Moto {
        let port = free_port();
        let logs = tempfile::tempdir().expect("tempdir");
        let child = spawn_moto(&logs, port);
        let mut moto = Moto {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            _logs: logs,
        };
        moto.create_bucket().await;
        moto
    }

    /// Kills the server: the endpoint refuses connections until [`Moto::restart`].
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts a fresh (empty) server on the same endpoint and creates the bucket again.
    pub async fn restart(&mut self) {
        self.kill();
        let port = self
            .endpoint
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("port of the endpoint");
        self.child = spawn_moto(&self._logs, port);
        self.create_bucket().await;
    }

    async fn create_bucket(&mut self) {
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("moto_server exited early ({status})");
            }
            let created = client
                .put(format!("{}/{BUCKET}", self.endpoint))
                .send()
                .await;
            if let Ok(r) = created {
                assert!(r.status().is_success(), "creating bucket: {}", r.status());
                return;
            }
            assert!(Instant::now() < deadline, "moto_server did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The `sluice serve` flags of a warehouse under `prefix` in the bucket.
    pub fn serve_args(&self, prefix: &str) -> Vec<String> {
        self.warehouse_args(&format!("s3://{BUCKET}/{prefix}"))
    }

    /// `--warehouse warehouse` with the flags that reach this server (the
    /// same for `sluice serve` and `sluice doctor`).
    pub fn warehouse_args(&self, warehouse: &str) -> Vec<String> {
        s3_args(warehouse, &self.endpoint)
    }

    /// Storage options for readers (Python deltalake/polars, the deltalake crate).
    pub fn storage_options(&self) -> Value {
        serde_json::json!({
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_ALLOW_HTTP": "true",
        })
    }

    /// Keys of every object under `prefix` (list-objects-v2 over HTTP).
    pub async fn list(&self, prefix: &str) -> Vec<String> {
        let body = reqwest::Client::new()
            .get(format!(
                "{}/{BUCKET}?list-type=2&prefix={prefix}&max-keys=100000",
                self.endpoint
            ))
            .send()
            .await
            .expect("list objects")
            .text()
            .await
            .expect("list body");
        body.split("<Key>")
            .skip(1)
            .filter_map(|s| s.split("</Key>").next())
            .map(str::to_string)
            .collect()
    }
}

impl Moto {
    /// Deletes one object (a signed request through `object_store`).
    pub async fn delete(&self, key: &str) {
        use object_store::ObjectStoreExt;
        let store = object_store::aws::AmazonS3Builder::new()
            .with_bucket_name(BUCKET)
            .with_endpoint(&self.endpoint)
            .with_region("us-east-1")
            .with_access_key_id("testing")
            .with_secret_access_key("testing")
            .with_allow_http(true)
            .build()
            .expect("s3 client");
        store
            .delete(&object_store::path::Path::from(key))
            .await
            .unwrap_or_else(|e| panic!("deleting {key}: {e}"));
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the Python readers saw.
#[derive(Debug)]
pub struct PyRead {
    /// Rows as Python `deltalake` read them.
    pub batches: Vec<RecordBatch>,
    /// The summary line (`version`, `files`, `rows`, `polars_rows`,
    /// `polars_id_sum`, `polars_distinct_ids`).
    pub summary: Value,
}

/// Reads the table at `location` with Python `deltalake` and `polars`
/// (`options`: storage options, `{}` for a local table).
pub fn python_read(location: &str, options: &Value) -> PyRead {
    python_read_with(location, options, &[])
}

/// [`python_read`] with environment variables for `delta_reader.py`
/// (`SLUICE_POLARS_ROWS=1`: the summary holds every row as polars reads it).
pub fn python_read_with(location: &str, options: &Value, env: &[(&str, &str)]) -> PyRead {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("rows.arrow");
    let output = Command::new(venv_bin("python", "SLUICE_PYTHON"))
        .arg(repo_root().join("tests/python/delta_reader.py"))
        .arg(location)
        .arg(&out)
        .env("SLUICE_STORAGE_OPTIONS", options.to_string())
        .envs(env.iter().copied())
        .output()
        .expect("run delta_reader.py");
    assert!(
        output.status.success(),
        "delta_reader.py failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: Value =
        serde_json::from_slice(&output.stdout).expect("delta_reader.py prints one JSON line");
    let file = std::fs::File::open(&out).expect("rows.arrow");
    let reader = arrow_ipc::reader::FileReader::try_new(file, None).expect("ipc reader");
    let batches = reader.map(|b| b.expect("ipc batch")).collect();
    PyRead { batches, summary }
}
