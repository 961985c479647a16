//! How a pod, a router and the CLI reach a secured etcd: the `--etcd-*` flags (TLS files,
//! user and password) every command with `--join` takes, and their reading into the
//! router crate's [`EtcdOptions`]. The password comes from `--etcd-password`,
//! `SLUICE_ETCD_PASSWORD` or `--etcd-password-file` and never shows in `Debug` output
//! or logs.

use std::fmt;
use std::path::{Path, PathBuf};

use sluice_router::etcd::{ClientIdentity, Credentials, EtcdOptions, EtcdTls};

use crate::error::{Result, ServerError};

/// The etcd access flags.
#[derive(clap::Args, Clone, Default)]
pub struct EtcdAccess {
    /// PEM CA that signed etcd's server certificate (with an etcds:// URL; default: the
    /// system's roots).
    #[arg(long, env = "SLUICE_ETCD_CA")]
    pub etcd_ca: Option<PathBuf>,
    /// PEM client certificate for etcd's --client-cert-auth (needs --etcd-key).
    #[arg(long, env = "SLUICE_ETCD_CERT", requires = "etcd_key")]
    pub etcd_cert: Option<PathBuf>,
    /// PEM private key of --etcd-cert.
    #[arg(long, env = "SLUICE_ETCD_KEY", requires = "etcd_cert")]
    pub etcd_key: Option<PathBuf>,
    /// etcd user (etcd's `auth enable`); needs a password.
    #[arg(long, env = "SLUICE_ETCD_USER")]
    pub etcd_user: Option<String>,
    /// Password of --etcd-user (prefer SLUICE_ETCD_PASSWORD or --etcd-password-file: a
    /// flag is visible in the process list).
    #[arg(
        long,
        env = "SLUICE_ETCD_PASSWORD",
        hide_env_values = true,
        conflicts_with = "etcd_password_file"
    )]
    pub etcd_password: Option<String>,
    /// File holding the password of --etcd-user (one line).
    #[arg(long, env = "SLUICE_ETCD_PASSWORD_FILE")]
    pub etcd_password_file: Option<PathBuf>,
}

impl fmt::Debug for EtcdAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdAccess")
            .field("etcd_ca", &self.etcd_ca)
            .field("etcd_cert", &self.etcd_cert)
            .field("etcd_key", &self.etcd_key)
            .field("etcd_user", &self.etcd_user)
            .field(
                "etcd_password",
                &self.etcd_password.as_ref().map(|_| "<redacted>"),
            )
            .field("etcd_password_file", &self.etcd_password_file)
            .finish()
    }
}

impl EtcdAccess {
    /// Reads the files and checks that user and password come together.
    pub fn options(&self) -> Result<EtcdOptions> {
        let identity = match (&self.etcd_cert, &self.etcd_key) {
            (Some(cert), Some(key)) => Some(ClientIdentity {
                cert_pem: read(cert, "--etcd-cert")?,
                key_pem: read(key, "--etcd-key")?,
            }),
            (None, None) => None,
            _ => {
                return Err(ServerError::Config(
                    "--etcd-cert and --etcd-key go together".into(),
                ))
            }
        };
        let ca_pem = self
            .etcd_ca
            .as_ref()
            .map(|ca| read(ca, "--etcd-ca"))
            .transpose()?;
        Ok(EtcdOptions {
            tls: EtcdTls { ca_pem, identity },
            credentials: self.credentials()?,
        })
    }

    fn credentials(&self) -> Result<Option<Credentials>> {
        let password = match (&self.etcd_password, &self.etcd_password_file) {
            (Some(p), _) => Some(p.clone()),
            (None, Some(file)) => {
                let bytes = read(file, "--etcd-password-file")?;
                let text = String::from_utf8(bytes)
                    .map_err(|_| ServerError::Config(format!("{} is not UTF-8", file.display())))?;
                Some(text.trim_end_matches(['\r', '\n']).to_string())
            }
            (None, None) => None,
        };
        match (&self.etcd_user, password) {
            (Some(user), Some(password)) => Ok(Some(Credentials {
                user: user.clone(),
                password,
            })),
            (None, None) => Ok(None),
            (Some(user), None) => Err(ServerError::Config(format!(
                "--etcd-user {user} needs a password (SLUICE_ETCD_PASSWORD, --etcd-password-file \
                 or --etcd-password)"
            ))),
            (None, Some(_)) => Err(ServerError::Config(
                "an etcd password is given without --etcd-user".into(),
            )),
        }
    }
}

fn read(path: &Path, flag: &str) -> Result<Vec<u8>> {
    std::fs::read(path)
        .map_err(|e| ServerError::io(format!("reading {flag} {}", path.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_file_gives_the_password_without_its_line_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("pw");
        std::fs::write(&file, "s3cret-pw\n").expect("write");
        let access = EtcdAccess {
            etcd_user: Some("sluice".into()),
            etcd_password_file: Some(file),
            ..Default::default()
        };
        let options = access.options().expect("options");
        let credentials = options.credentials.expect("credentials");
        assert_eq!(
            (credentials.user.as_str(), credentials.password.as_str()),
            ("sluice", "s3cret-pw")
        );
        assert!(!format!("{access:?} {credentials:?}").contains("s3cret"));
    }

    #[test]
    fn user_and_password_come_together() {
        let user_only = EtcdAccess {
            etcd_user: Some("sluice".into()),
            ..Default::default()
        };
        let message = user_only.options().expect_err("refused").to_string();
        assert!(message.contains("needs a password"), "{message}");
        let password_only = EtcdAccess {
            etcd_password: Some("pw".into()),
            ..Default::default()
        };
        assert!(password_only.options().is_err());
        assert!(EtcdAccess::default()
            .options()
            .expect("no flags")
            .credentials
            .is_none());
    }

    #[test]
    fn an_unreadable_ca_file_names_the_flag() {
        let access = EtcdAccess {
            etcd_ca: Some(PathBuf::from("/nonexistent/ca.pem")),
            ..Default::default()
        };
        let message = access.options().expect_err("refused").to_string();
        assert!(message.contains("--etcd-ca"), "{message}");
    }
}
