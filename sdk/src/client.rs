//! [`Client`]: one endpoint (a pod or a router), its gRPC channel (TLS with the system's
//! or custom roots for `https://`), and its token source. Streams are made from it
//! ([`Client::stream`]); it is cheap to clone.

use std::sync::Arc;
use std::time::Duration;

use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use crate::error::{Result, SdkError};
use crate::token::TokenSource;

pub(crate) struct ClientInner {
    pub(crate) channel: Channel,
    pub(crate) tokens: TokenSource,
    pub(crate) endpoint: String,
}

/// A connection to one Sluice endpoint (see the module doc).
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<ClientInner>,
}

impl Client {
    /// Starts a builder for `endpoint` (`http://host:port` or `https://host:port`).
    pub fn builder(endpoint: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            endpoint: endpoint.into(),
            credentials: None,
            token_url: None,
            ca_pem: None,
            connect_timeout: Duration::from_secs(5),
        }
    }

    /// The endpoint this client talks to.
    pub fn endpoint(&self) -> &str {
        &self.inner.endpoint
    }
}

/// Configures a [`Client`].
pub struct ClientBuilder {
    endpoint: String,
    credentials: Option<(String, String)>,
    token_url: Option<String>,
    ca_pem: Option<Vec<u8>>,
    connect_timeout: Duration,
}

impl ClientBuilder {
    /// OAuth client id and secret, exchanged for tokens at the token endpoint.
    pub fn credentials(mut self, id: impl Into<String>, secret: impl Into<String>) -> Self {
        self.credentials = Some((id.into(), secret.into()));
        self
    }

    /// The token endpoint. Default: `{endpoint}/oidc/v1/token`.
    pub fn token_url(mut self, url: impl Into<String>) -> Self {
        self.token_url = Some(url.into());
        self
    }

    /// Trust these PEM roots (instead of the system's) for `https://` endpoints, for gRPC
    /// and for the token endpoint.
    pub fn ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.ca_pem = Some(pem.into());
        self
    }

    /// How long one TCP/TLS connect may take. Default: 5 s.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Builds the client (connects lazily, on the first stream).
    pub fn build(self) -> Result<Client> {
        let endpoint = self.endpoint.trim_end_matches('/').to_string();
        let mut ep = Endpoint::from_shared(endpoint.clone())
            .map_err(|e| SdkError::Config(format!("endpoint `{endpoint}`: {e}")))?
            .connect_timeout(self.connect_timeout)
            .http2_keep_alive_interval(Duration::from_secs(5))
            .keep_alive_timeout(Duration::from_secs(5))
            .keep_alive_while_idle(true)
            .tcp_nodelay(true);
        let mut http = reqwest::Client::builder().timeout(Duration::from_secs(30));
        if endpoint.starts_with("https://") {
            let tls = match &self.ca_pem {
                Some(pem) => ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem)),
                None => ClientTlsConfig::new().with_native_roots(),
            };
            ep = ep
                .tls_config(tls)
                .map_err(|e| SdkError::Config(format!("TLS: {e}")))?;
        }
        if let Some(pem) = &self.ca_pem {
            let cert = reqwest::Certificate::from_pem(pem)
                .map_err(|e| SdkError::Config(format!("CA PEM: {e}")))?;
            http = http
                .tls_built_in_root_certs(false)
                .add_root_certificate(cert);
        }
        let http = http
            .build()
            .map_err(|e| SdkError::Config(format!("HTTP client: {e}")))?;
        let tokens = match self.credentials {
            Some((id, secret)) => {
                let url = self
                    .token_url
                    .unwrap_or_else(|| format!("{endpoint}/oidc/v1/token"));
                TokenSource::credentials(http, url, id, secret)
            }
            None => TokenSource::None,
        };
        Ok(Client {
            inner: Arc::new(ClientInner {
                channel: ep.connect_lazy(),
                tokens,
                endpoint,
            }),
        })
    }
}
