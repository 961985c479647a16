//! `sluice keys rotate`: a client of the admin API's signing-key rotation.
//! `sluice keys rotate-kek`: re-encrypts every signing key of a stopped pod's catalog (the
//! data dir's file, or etcd with `--join`) from the current key-encryption key to a new one.

use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;
use reqwest::Method;
use sluice_server::audit::{pending, Action, AuditEvent};
use sluice_server::auth::kek::{pod_kek, GENERATED_KEK_FILE};
use sluice_server::auth::{reseal, Kek};
use sluice_server::catalog::{Catalog, EtcdStore};
use sluice_server::Result;

use super::client::{Client, ConnArgs};

/// The signing-key commands.
#[derive(Subcommand)]
pub enum KeysCommand {
    /// Add a new signing key; tokens signed by older keys verify until they expire.
    Rotate,
    /// Re-encrypt every token-signing key under a new key-encryption key. Stop the server
    /// (every pod of a cluster) first; start it again with the new key.
    RotateKek(Box<RotateKekArgs>),
}

/// The flags of `sluice keys rotate-kek`.
#[derive(clap::Args)]
pub struct RotateKekArgs {
    /// File holding the new key-encryption key (base64 of 32 bytes).
    #[arg(long)]
    new_key_file: PathBuf,
    /// File holding the current key-encryption key (or set SLUICE_SECRETS_KEY). Default on
    /// a single node: <data-dir>/secrets.key, which then receives the new key.
    #[arg(long)]
    secrets_key_file: Option<PathBuf>,
    /// The cluster's etcd (etcd://HOST:PORT[,…], etcds:// for TLS); default: the catalog
    /// in --data-dir.
    #[arg(long, env = "SLUICE_JOIN")]
    join: Option<String>,
    #[command(flatten)]
    etcd: sluice_server::etcd_access::EtcdAccess,
}

/// Runs a keys command against the pod of `conn`.
pub async fn run(conn: ConnArgs, command: KeysCommand) -> anyhow::Result<()> {
    match command {
        KeysCommand::Rotate => {
            let client = conn.connect().await?;
            let kid = client.rotate_keys().await?;
            println!("new signing key {kid}; tokens signed by older keys verify until they expire");
        }
        KeysCommand::RotateKek(args) => rotate_kek(conn.data_dir().to_path_buf(), *args).await?,
    }
    Ok(())
}

async fn rotate_kek(data_dir: PathBuf, args: RotateKekArgs) -> anyhow::Result<()> {
    super::init_tracing();
    let new = Kek::from_file(&args.new_key_file)?;
    let source = super::serve::kek_source(args.secrets_key_file);
    let (catalog, _lock) = match &args.join {
        Some(join) => {
            let join = join.clone();
            let options = args.etcd.options()?;
            let store =
                tokio::task::spawn_blocking(move || EtcdStore::connect(&join, options)).await??;
            (Catalog::with_store(Box::new(store))?, None)
        }
        None => {
            let lock = sluice_wal::lock_dir(&data_dir.join(sluice_server::data_dir::WAL_DIR))
                .context("the server must be stopped during rotate-kek")?;
            (Catalog::open(&data_dir)?, Some(lock))
        }
    };
    let generated = source.is_none() && args.join.is_none();
    let old = pod_kek(source.as_ref(), &data_dir, args.join.is_some(), true)?;
    if old.id() == new.id() {
        anyhow::bail!("the new key-encryption key is the current one");
    }
    let count = catalog.change_signing_keys(|key| reseal(&old, &new, key))?;
    let event = AuditEvent::now(
        super::operator(args.etcd.etcd_user.as_deref()),
        Action::KeysRotateKek,
        new.id(),
        "cli",
        format!(
            "{count} signing keys re-encrypted from key-encryption key {}",
            old.id()
        ),
    );
    event.log();
    match &args.join {
        Some(join) => {
            let meta = super::cluster::connect_meta(join, &args.etcd).await?;
            pending::park_in_etcd(&meta, &event).await?;
        }
        None => pending::park_in_dir(&data_dir, &event)?,
    }
    println!(
        "re-encrypted {count} signing keys from key-encryption key {} to {}",
        old.id(),
        new.id()
    );
    if generated {
        let path = data_dir.join(GENERATED_KEK_FILE);
        new.write_to(&path)?;
        println!("{} now holds the new key", path.display());
    } else {
        println!("start the server with the new key (--secrets-key-file / SLUICE_SECRETS_KEY)");
    }
    Ok(())
}

impl Client {
    /// Adds a new token-signing key; returns its id.
    pub async fn rotate_keys(&self) -> Result<String> {
        let v = self
            .send(self.api(Method::POST, "/api/sluice/v1/keys/rotate"))
            .await?;
        Ok(v["kid"].as_str().unwrap_or_default().to_string())
    }
}
