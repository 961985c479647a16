//! `sluice keys rotate`: a client of the admin API's signing-key rotation.

use clap::Subcommand;
use reqwest::Method;
use sluice_server::Result;

use super::client::{Client, ConnArgs};

/// The signing-key commands.
#[derive(Subcommand)]
pub enum KeysCommand {
    /// Add a new signing key; tokens signed by older keys verify until they expire.
    Rotate,
}

/// Runs a keys command against the pod of `conn`.
pub async fn run(conn: ConnArgs, command: KeysCommand) -> anyhow::Result<()> {
    let client = conn.connect().await?;
    match command {
        KeysCommand::Rotate => {
            let kid = client.rotate_keys().await?;
            println!("new signing key {kid}; tokens signed by older keys verify until they expire");
        }
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
