//! A real Sluice cluster on loopback for the SDK 3.0.0 tests: one `etcd`, `sluice serve
//! --join` pods sharing one local-folder warehouse (each can be SIGKILLed, restarted with its
//! data dir, or drained), a `sluice router` in front, and the owner of a persistent stream
//! read from the registry in etcd (`/sluice/pstreams/<id>`).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use databricks_zerobus_ingest_sdk::ZerobusSdk;
use sluice_proto::etcd::etcdserverpb::kv_client::KvClient;
use sluice_proto::etcd::etcdserverpb::RangeRequest;

use crate::sluice::{
    create_table_at, free_port, sdk_at, sluice_bin, wait_healthy, CLIENT_ID, CLIENT_SECRET,
};
use crate::HarnessError;

/// The key-encryption key every pod of the test cluster shares (32 bytes, base64).
const CLUSTER_KEK: &str = "KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=";
/// How long a process gets to answer its health check.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A child process with its log file; SIGKILLed when dropped.
struct Process {
    child: Option<Child>,
    log: PathBuf,
}

impl Process {
    fn spawn(command: &mut Command, log: PathBuf) -> Result<Process, HarnessError> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(HarnessError::io(format!("open {}", log.display())))?;
        let err = file.try_clone().map_err(HarnessError::io("clone a log"))?;
        let child = command
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err)
            .spawn()
            .map_err(HarnessError::io(format!("spawn {command:?}")))?;
        Ok(Process {
            child: Some(child),
            log,
        })
    }

    async fn healthy(&mut self, url: &str) -> Result<(), HarnessError> {
        let child = self
            .child
            .as_mut()
            .ok_or_else(|| HarnessError::ServerStart {
                reason: "not running".into(),
                log: String::new(),
            })?;
        wait_healthy(child, url, &self.log, START_TIMEOUT).await
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One pod: its id, port and data dir survive a kill.
pub struct Pod {
    /// The pod id (`--pod-id`).
    pub id: String,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    port: u16,
    dir: PathBuf,
    join: String,
    warehouse: PathBuf,
    process: Process,
}

impl Pod {
    fn command(&self) -> Command {
        let mut c = Command::new(sluice_bin());
        c.arg("serve")
            .arg("--data-dir")
            .arg(self.dir.join("data"))
            .args(["--listen", &format!("127.0.0.1:{}", self.port)])
            .args(["--auth", "oauth"])
            .args(["--flush-interval", "1s"])
            .args([
                "--bootstrap-principal",
                &format!("{CLIENT_ID}:{CLIENT_SECRET}"),
            ])
            .args(["--join", &self.join, "--pod-id", &self.id])
            .arg("--warehouse")
            .arg(&self.warehouse)
            .args(["--drain-grace", "3s"])
            .env("SLUICE_SECRETS_KEY", CLUSTER_KEK)
            .env("RUST_LOG", "info");
        c
    }

    /// SIGKILL: nothing of the shutdown runs; its WAL keeps what was acked.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// Starts the pod again with the same id, port and data dir.
    pub async fn restart(&mut self) -> Result<(), HarnessError> {
        self.process = Process::spawn(&mut self.command(), self.dir.join("server.log"))?;
        self.process.healthy(&format!("{}/healthz", self.url)).await
    }

    /// Waits (up to `timeout`) for the process to exit on its own (after a drain).
    pub fn wait_exit(&mut self, timeout: Duration) -> bool {
        let Some(child) = self.process.child.as_mut() else {
            return true;
        };
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                self.process.child = None;
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// The pod's log so far.
    pub fn log(&self) -> String {
        self.process.log()
    }
}

/// etcd, the pods and a router.
pub struct Cluster {
    /// `etcd://127.0.0.1:PORT`.
    pub join: String,
    etcd_url: String,
    /// The pods, started in order.
    pub pods: Vec<Pod>,
    router: Process,
    /// The router's URL (gRPC, OAuth and the tables API).
    pub router_url: String,
    dir: tempfile::TempDir,
    _etcd: Process,
}

impl Cluster {
    /// Starts etcd, `pods` pods and a router; returns once the router reaches a pod.
    pub async fn start(pods: usize) -> Result<Cluster, HarnessError> {
        let dir = tempfile::tempdir().map_err(HarnessError::io("temporary dir"))?;
        let (client, peer) = (free_port()?, free_port()?);
        let etcd_url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let mut etcd = Process::spawn(
            Command::new("etcd")
                .args(["--name", "it", "--data-dir"])
                .arg(dir.path().join("etcd"))
                .args(["--listen-client-urls", &etcd_url])
                .args(["--advertise-client-urls", &etcd_url])
                .args(["--listen-peer-urls", &peer_url])
                .args(["--initial-advertise-peer-urls", &peer_url])
                .args(["--initial-cluster", &format!("it={peer_url}")]),
            dir.path().join("etcd.log"),
        )?;
        etcd.healthy(&format!("{etcd_url}/health")).await?;
        let join = format!("etcd://127.0.0.1:{client}");
        let warehouse = dir.path().join("warehouse");
        let mut started = Vec::with_capacity(pods);
        for n in 0..pods {
            let id = format!("pod-{n}");
            let pod_dir = dir.path().join(&id);
            std::fs::create_dir_all(&pod_dir).map_err(HarnessError::io("pod dir"))?;
            let port = free_port()?;
            let mut pod = Pod {
                url: format!("http://127.0.0.1:{port}"),
                id,
                port,
                dir: pod_dir,
                join: join.clone(),
                warehouse: warehouse.clone(),
                process: Process {
                    child: None,
                    log: PathBuf::new(),
                },
            };
            pod.restart().await?;
            started.push(pod);
        }
        let port = free_port()?;
        let router_url = format!("http://127.0.0.1:{port}");
        let mut router = Process::spawn(
            Command::new(sluice_bin())
                .args(["router", "--listen", &format!("127.0.0.1:{port}")])
                .args(["--join", &join])
                .env("RUST_LOG", "info"),
            dir.path().join("router.log"),
        )?;
        router.healthy(&format!("{router_url}/readyz")).await?;
        Ok(Cluster {
            join,
            etcd_url,
            pods: started,
            router,
            router_url,
            dir,
            _etcd: etcd,
        })
    }

    /// An official SDK 3.0.0 client pointed at the router.
    pub fn sdk(&self) -> Result<ZerobusSdk, HarnessError> {
        sdk_at(&self.router_url)
    }

    /// Creates table `name` with `columns` in the cluster's dir; returns its location.
    pub fn create_table(&self, name: &str, columns: &str) -> Result<String, HarnessError> {
        create_table_at(
            &self.router_url,
            &self.dir.path().join("tables"),
            name,
            columns,
        )
    }

    /// The JSON value of etcd key `key` (None: no such key).
    async fn etcd_json(&self, key: String) -> Result<Option<serde_json::Value>, HarnessError> {
        let etcd_error = |e: String| HarnessError::Reader(format!("etcd: {e}"));
        let mut kv = KvClient::connect(self.etcd_url.clone())
            .await
            .map_err(|e| etcd_error(e.to_string()))?;
        let found = kv
            .range(RangeRequest {
                key: key.into_bytes(),
                ..Default::default()
            })
            .await
            .map_err(|e| etcd_error(e.to_string()))?
            .into_inner();
        found
            .kvs
            .first()
            .map(|kv| serde_json::from_slice(&kv.value).map_err(|e| etcd_error(e.to_string())))
            .transpose()
    }

    /// The pod that owns persistent stream `id` in the registry (None: released).
    pub async fn owner(&self, id: &str) -> Result<Option<String>, HarnessError> {
        let Some(record) = self.etcd_json(format!("/sluice/pstreams/{id}")).await? else {
            return Err(HarnessError::Reader(format!(
                "etcd: no record of stream {id}"
            )));
        };
        Ok(record["owner"]
            .as_str()
            .filter(|o| !o.is_empty())
            .map(str::to_string))
    }

    /// The pod holding the committer role of `table` (None: none elected now).
    pub async fn committer(&self, table: &str) -> Result<Option<String>, HarnessError> {
        let role = self
            .etcd_json(format!("/sluice/committers/{table}"))
            .await?;
        Ok(role.and_then(|r| r["pod"].as_str().map(str::to_string)))
    }

    /// The pod with id `id`.
    pub fn pod_mut(&mut self, id: &str) -> Option<&mut Pod> {
        self.pods.iter_mut().find(|p| p.id == id)
    }

    /// Asks pod `id` to drain (`sluice pod drain`) and waits until it has left.
    pub fn drain(&self, id: &str) -> Result<String, HarnessError> {
        let out = Command::new(sluice_bin())
            .args(["pod", "drain", id, "--join", &self.join, "--timeout", "60s"])
            .output()
            .map_err(HarnessError::io("run sluice pod drain"))?;
        if !out.status.success() {
            return Err(HarnessError::Cli {
                args: format!("pod drain {id}"),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// How many lines of all pods' logs contain `needle`.
    pub fn pod_log_lines(&self, needle: &str) -> usize {
        self.pods
            .iter()
            .map(|p| p.log().lines().filter(|l| l.contains(needle)).count())
            .sum()
    }

    /// Every pod's log and the router's, for a failure message.
    pub fn logs(&self) -> String {
        let mut all = String::new();
        for pod in &self.pods {
            all.push_str(&format!("--- {} ---\n{}\n", pod.id, tail(&pod.log())));
        }
        all.push_str(&format!("--- router ---\n{}\n", tail(&self.router.log())));
        all
    }
}

/// The last 60 lines of `text`.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(60)..].join("\n")
}
