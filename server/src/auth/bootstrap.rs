//! The first admin: on a pod's first start with `--auth oauth` and an empty
//! catalog, create an admin principal (`--bootstrap-principal ID:SECRET`, or a
//! generated one whose credentials are printed once and kept in the data
//! dir's [`ADMIN_CREDENTIALS_FILE`], mode 0600, for the local CLI).

use std::path::Path;

use super::{generate_secret, hash_secret};
use crate::catalog::{Catalog, PrincipalEntry};
use crate::config::ServeConfig;
use crate::data_dir::write_private;
use crate::error::{Result, ServerError};

/// File in the data dir holding the generated admin credentials (mode 0600).
pub const ADMIN_CREDENTIALS_FILE: &str = "admin-credentials";

/// Creates the admin principal if the catalog has no principal yet.
pub fn bootstrap_admin(catalog: &Catalog, config: &ServeConfig) -> Result<()> {
    if catalog.has_principals()? {
        if config.bootstrap_principal.is_some() {
            tracing::info!("principals exist already; --bootstrap-principal ignored");
        }
        return Ok(());
    }
    let (client_id, secret, generated) = match &config.bootstrap_principal {
        Some((id, secret)) => (id.clone(), secret.clone(), false),
        None => ("sluice-admin".to_string(), generate_secret(), true),
    };
    let (salt, secret_hash) = hash_secret(&secret);
    let added = catalog.add_principal(PrincipalEntry {
        client_id: client_id.clone(),
        name: "admin".into(),
        salt,
        secret_hash,
        admin: true,
    });
    match added {
        Ok(()) => {}
        // Another pod of the cluster bootstrapped the shared catalog first.
        Err(ServerError::AlreadyExists(_)) if config.cluster.is_some() => return Ok(()),
        Err(e) => return Err(e),
    }
    if generated {
        let path = config.data_dir.join(ADMIN_CREDENTIALS_FILE);
        write_private(
            &path,
            format!("SLUICE_CLIENT_ID={client_id}\nSLUICE_CLIENT_SECRET={secret}\n").as_bytes(),
        )?;
        println!(
            "Created admin principal (shown once; also stored in {}):\n  SLUICE_CLIENT_ID={client_id}\n  SLUICE_CLIENT_SECRET={secret}",
            path.display()
        );
    } else {
        tracing::info!(client_id, "created bootstrap admin principal");
    }
    Ok(())
}

/// Reads `SLUICE_CLIENT_ID` / `SLUICE_CLIENT_SECRET` from an admin
/// credentials file.
pub fn read_admin_credentials(data_dir: &Path) -> Option<(String, String)> {
    let text = std::fs::read_to_string(data_dir.join(ADMIN_CREDENTIALS_FILE)).ok()?;
    let mut id = None;
    let mut secret = None;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("SLUICE_CLIENT_ID=") {
            id = Some(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("SLUICE_CLIENT_SECRET=") {
            secret = Some(v.trim().to_string());
        }
    }
    Some((id?, secret?))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn first_start_creates_one_admin_and_a_private_credentials_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let catalog = Catalog::open(dir.path()).expect("catalog");
        let config = ServeConfig::new(dir.path());
        bootstrap_admin(&catalog, &config).expect("bootstrap");
        let (id, secret) = read_admin_credentials(dir.path()).expect("credentials file");
        assert_eq!(id, "sluice-admin");
        let path = dir.path().join(ADMIN_CREDENTIALS_FILE);
        let mode = std::fs::metadata(&path).expect("stat").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let admin = catalog.principal(&id).expect("read").expect("admin exists");
        assert!(admin.admin);
        assert!(crate::auth::verify_secret(
            &admin.salt,
            &admin.secret_hash,
            &secret
        ));
        // A second start finds a principal and changes nothing.
        bootstrap_admin(&catalog, &config).expect("second bootstrap");
        assert_eq!(catalog.principals().expect("list").len(), 1);
        assert_eq!(read_admin_credentials(dir.path()), Some((id, secret)));
    }

    #[test]
    fn a_given_principal_writes_no_file_and_a_partial_file_reads_as_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        let catalog = Catalog::open(dir.path()).expect("catalog");
        let mut config = ServeConfig::new(dir.path());
        config.bootstrap_principal = Some(("ops".into(), "ops-secret-1".into()));
        bootstrap_admin(&catalog, &config).expect("bootstrap");
        assert!(catalog.principal("ops").expect("read").is_some());
        assert_eq!(read_admin_credentials(dir.path()), None);
        write_private(
            &dir.path().join(ADMIN_CREDENTIALS_FILE),
            b"SLUICE_CLIENT_ID=ops\n",
        )
        .expect("write");
        assert_eq!(read_admin_credentials(dir.path()), None);
    }
}
