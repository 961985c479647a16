//! `sluice cluster up --pods N`: a whole cluster as local processes on loopback, for
//! development and demos: one etcd (the `etcd` binary on PATH, e.g. Debian `etcd-server`),
//! N pods sharing one local-folder warehouse, and a router. Everything lives under `--dir`,
//! including the key-encryption key the pods share (`secrets.key`, generated once).
//! Ctrl-C (or SIGTERM) drains the pods (SIGTERM each), then stops the router and etcd.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use sluice_server::auth::bootstrap::{read_admin_credentials, ADMIN_CREDENTIALS_FILE};
use sluice_server::auth::kek::GENERATED_KEK_FILE;
use sluice_server::auth::{generate_secret, Kek};
use sluice_server::data_dir::write_private;
use sluice_server::{Result, ServerError};

/// Arguments of `sluice cluster up`.
#[derive(clap::Args, Debug)]
pub struct UpArgs {
    /// Number of pods.
    #[arg(long, default_value_t = 3)]
    pub pods: u16,
    /// Folder for etcd's data, the pods' data dirs, the shared warehouse and the logs.
    #[arg(long, default_value = "sluice-cluster")]
    pub dir: PathBuf,
    /// etcd client port (the peer port is the next one).
    #[arg(long, default_value_t = 23790)]
    pub etcd_port: u16,
    /// Port of pod 0; pod i listens on this + i.
    #[arg(long, default_value_t = 50061)]
    pub first_pod_port: u16,
    /// Address of the router (the producers' endpoint).
    #[arg(long, default_value = "127.0.0.1:50050")]
    pub router_listen: std::net::SocketAddr,
    /// ID:SECRET of the cluster's first admin (a secret of at least 32 characters).
    /// Default: `sluice-admin` with a generated secret, printed at start.
    #[arg(long)]
    pub bootstrap_principal: Option<String>,
}

struct Children(Vec<(String, Child)>);

impl Drop for Children {
    fn drop(&mut self) {
        for (_, child) in self.0.iter_mut().rev() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn spawn(name: &str, cmd: &mut Command, log: &Path) -> Result<Child> {
    let file = std::fs::File::create(log)
        .map_err(|e| ServerError::io(format!("creating {}", log.display()), e))?;
    let err = file
        .try_clone()
        .map_err(|e| ServerError::io("cloning a log handle", e))?;
    cmd.stdout(Stdio::from(file))
        .stderr(Stdio::from(err))
        .spawn()
        .map_err(|e| ServerError::io(format!("starting {name}"), e))
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on the pid of a child we own.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
}

/// Starts the cluster and runs until Ctrl-C.
pub async fn run(args: UpArgs) -> anyhow::Result<()> {
    let dir = &args.dir;
    std::fs::create_dir_all(dir.join("logs"))?;
    let exe = std::env::current_exe()?;
    let join = format!("etcd://127.0.0.1:{}", args.etcd_port);
    let kek_file = dir.join(GENERATED_KEK_FILE);
    if !kek_file.exists() {
        Kek::generate()?.write_to(&kek_file)?;
    }
    let principal = match &args.bootstrap_principal {
        Some(given) => given.clone(),
        None => cluster_admin(dir)?,
    };
    let mut children = Children(Vec::new());
    let etcd = spawn(
        "etcd",
        Command::new("etcd")
            .arg("--name")
            .arg("sluice")
            .arg("--data-dir")
            .arg(dir.join("etcd"))
            .arg("--listen-client-urls")
            .arg(format!("http://127.0.0.1:{}", args.etcd_port))
            .arg("--advertise-client-urls")
            .arg(format!("http://127.0.0.1:{}", args.etcd_port))
            .arg("--listen-peer-urls")
            .arg(format!("http://127.0.0.1:{}", args.etcd_port + 1))
            .arg("--initial-advertise-peer-urls")
            .arg(format!("http://127.0.0.1:{}", args.etcd_port + 1))
            .arg("--initial-cluster")
            .arg(format!("sluice=http://127.0.0.1:{}", args.etcd_port + 1)),
        &dir.join("logs/etcd.log"),
    )?;
    children.0.push(("etcd".into(), etcd));
    wait_for_etcd(&join).await?;
    for i in 0..args.pods {
        let port = args.first_pod_port + i;
        let pod = spawn(
            "pod",
            Command::new(&exe)
                .arg("serve")
                .arg("--join")
                .arg(&join)
                .arg("--pod-id")
                .arg(format!("pod-{i}"))
                .arg("--listen")
                .arg(format!("127.0.0.1:{port}"))
                .arg("--data-dir")
                .arg(dir.join(format!("pod-{i}")))
                .arg("--warehouse")
                .arg(dir.join("warehouse"))
                .arg("--bootstrap-principal")
                .arg(&principal)
                .arg("--secrets-key-file")
                .arg(&kek_file),
            &dir.join(format!("logs/pod-{i}.log")),
        )?;
        children.0.push((format!("pod-{i}"), pod));
    }
    let router = spawn(
        "router",
        Command::new(&exe)
            .arg("router")
            .arg("--listen")
            .arg(args.router_listen.to_string())
            .arg("--join")
            .arg(&join),
        &dir.join("logs/router.log"),
    )?;
    children.0.push(("router".into(), router));
    let (id, secret) = principal.split_once(':').unwrap_or(("sluice-admin", ""));
    println!(
        "cluster up: {} pods, router on http://{}, meta store {join}\n  export SLUICE_SERVER=http://{} SLUICE_JOIN={join} SLUICE_CLIENT_ID={id} SLUICE_CLIENT_SECRET={secret}\n  logs in {}; Ctrl-C stops everything",
        args.pods,
        args.router_listen,
        args.router_listen,
        dir.join("logs").display()
    );
    sluice_server::shutdown_signal().await;
    println!("stopping: draining pods");
    for (name, child) in children.0.iter_mut() {
        if name.starts_with("pod-") {
            signal(child, libc::SIGTERM);
        }
    }
    for (name, child) in children.0.iter_mut() {
        if name.starts_with("pod-") {
            let _ = child.wait();
        }
    }
    for (_, child) in children.0.iter_mut() {
        signal(child, libc::SIGTERM);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    Ok(())
}

async fn wait_for_etcd(join: &str) -> Result<()> {
    for _ in 0..100 {
        if let Ok(meta) = sluice_router::Meta::connect(join, &Default::default()).await {
            if meta.pods().await.is_ok() {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(ServerError::Unavailable(format!(
        "etcd at {join} did not come up"
    )))
}

/// `ID:SECRET` of the cluster's first admin: the one in `<dir>/admin-credentials`, else
/// `sluice-admin` with a generated secret, kept there (0600) for the next `cluster up`.
fn cluster_admin(dir: &Path) -> Result<String> {
    if let Some((id, secret)) = read_admin_credentials(dir) {
        return Ok(format!("{id}:{secret}"));
    }
    let secret = generate_secret();
    write_private(
        &dir.join(ADMIN_CREDENTIALS_FILE),
        format!("SLUICE_CLIENT_ID=sluice-admin\nSLUICE_CLIENT_SECRET={secret}\n").as_bytes(),
    )?;
    Ok(format!("sluice-admin:{secret}"))
}
