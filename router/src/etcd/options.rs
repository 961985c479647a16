//! How to reach a secured etcd: TLS material (a CA to trust, a client certificate) and
//! etcd's own user/password authentication. Read by the binaries from flags and files,
//! handed to [`super::EtcdClient::connect`]. The password never shows in `Debug` output.

use std::fmt;

/// Everything beyond the endpoints that a connection to etcd may need. The default is a
/// plain-text, unauthenticated connection.
#[derive(Clone, Debug, Default)]
pub struct EtcdOptions {
    /// TLS settings; used only with `etcds://` endpoints.
    pub tls: EtcdTls,
    /// etcd user and password (etcd's `auth enable`); none: no authentication.
    pub credentials: Option<Credentials>,
}

/// TLS material for `etcds://` endpoints, all PEM.
#[derive(Clone, Debug, Default)]
pub struct EtcdTls {
    /// The CA that signed etcd's server certificate; none: the system's roots.
    pub ca_pem: Option<Vec<u8>>,
    /// A client certificate and its key (etcd's `--client-cert-auth`).
    pub identity: Option<ClientIdentity>,
}

/// A client certificate chain and its private key, PEM.
#[derive(Clone)]
pub struct ClientIdentity {
    /// The certificate chain.
    pub cert_pem: Vec<u8>,
    /// Its private key.
    pub key_pem: Vec<u8>,
}

impl fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClientIdentity { cert, key: <redacted> }")
    }
}

impl EtcdTls {
    /// Whether any TLS material was given.
    pub fn is_set(&self) -> bool {
        self.ca_pem.is_some() || self.identity.is_some()
    }
}

/// An etcd user name and password.
#[derive(Clone)]
pub struct Credentials {
    /// The etcd user.
    pub user: String,
    /// Its password.
    pub password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Credentials {{ user: {:?}, password: <redacted> }}",
            self.user
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_never_shows_the_password_or_the_key() {
        let options = EtcdOptions {
            tls: EtcdTls {
                ca_pem: None,
                identity: Some(ClientIdentity {
                    cert_pem: b"CERT".to_vec(),
                    key_pem: b"PRIVATE-KEY-BYTES".to_vec(),
                }),
            },
            credentials: Some(Credentials {
                user: "sluice".into(),
                password: "hunter2-very-secret".into(),
            }),
        };
        let shown = format!("{options:?}");
        assert!(shown.contains("sluice"), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(!shown.contains("PRIVATE"), "{shown}");
    }
}
