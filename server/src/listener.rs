//! The accept loop of the pod's one port: plain text, or TLS (rustls) when
//! `--tls-cert` / `--tls-key` are given, each connection served by hyper's
//! auto builder (HTTP/1.1 and HTTP/2; ALPN `h2`, `http/1.1` under TLS) with
//! the pod's HTTP/2 limits, and the same router (gRPC + HTTP) either way.
//! Each connection's writes go through [`coalesce::Coalesce`], which lets
//! the responses of the other ready tasks join them in one system call.
//!
//! On a TLS port, a client that speaks plain text is told so instead of
//! being cut off: its first byte is not a TLS handshake record (0x16), so
//! the connection is served in plain text by a router that answers every
//! gRPC call with UNAVAILABLE ("this server requires TLS…") and every
//! other request with HTTP 400.
//!
//! Shutdown: when `shutdown` resolves the loop stops accepting, every
//! connection gets a graceful shutdown (HTTP/2 GOAWAY), and `serve`
//! returns once all of them are closed.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

mod coalesce;

use crate::config::{ServeConfig, TlsFiles};
use crate::error::{Result, ServerError};
use coalesce::Coalesce;

/// A client must finish its TLS handshake (or send its first byte) in this time.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// First byte of a TLS record carrying a handshake message.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;
/// What a plain-text client of a TLS port is told.
pub const TLS_REQUIRED: &str =
    "this server requires TLS: connect with https:// (TLS on), not plain text";

/// How connections are served.
pub struct ServeOptions {
    /// TLS identity; `None` serves plain text.
    pub tls: Option<Arc<ServerConfig>>,
    /// HTTP/2 streams per connection.
    pub h2_max_concurrent_streams: u32,
    /// Largest HTTP/2 header list, bytes.
    pub h2_max_header_bytes: u32,
}

impl ServeOptions {
    /// The options of `config`, with an already loaded TLS identity.
    pub fn new(config: &ServeConfig, tls: Option<Arc<ServerConfig>>) -> Self {
        ServeOptions {
            tls,
            h2_max_concurrent_streams: config.limits.h2_max_concurrent_streams,
            h2_max_header_bytes: config.limits.h2_max_header_bytes,
        }
    }
}

/// Reads the PEM certificate chain and key into a rustls server config
/// (ring provider, TLS 1.2 and 1.3, ALPN `h2` then `http/1.1`).
pub fn load_tls(files: &TlsFiles) -> Result<Arc<ServerConfig>> {
    let bad = |what: &str, path: &std::path::Path, e: String| {
        ServerError::Config(format!("{what} {}: {e}", path.display()))
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .map_err(|e| bad("--tls-cert", &files.cert, e.to_string()))?
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| bad("--tls-cert", &files.cert, e.to_string()))?;
    if certs.is_empty() {
        return Err(bad("--tls-cert", &files.cert, "no certificate".into()));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| bad("--tls-key", &files.key, e.to_string()))?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ServerError::Config(format!("TLS: {e}")))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| bad("--tls-cert/--tls-key", &files.cert, e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves `app` on `listener` until `shutdown` resolves and every
/// connection has closed.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    options: ServeOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http2()
        .max_concurrent_streams(options.h2_max_concurrent_streams)
        .max_header_list_size(options.h2_max_header_bytes);
    let builder = Arc::new(builder);
    let acceptor = options.tls.map(TlsAcceptor::from);
    let refusal = Router::new().fallback(tls_required);
    let stop = CancellationToken::new();
    let connections = TaskTracker::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let conn = Connection {
            builder: builder.clone(),
            stop: stop.clone(),
            peer,
        };
        match &acceptor {
            None => connections.spawn(conn.serve(TokioIo::new(stream), app.clone())),
            Some(acceptor) => {
                connections.spawn(conn.tls(stream, acceptor.clone(), app.clone(), refusal.clone()))
            }
        };
    }
    drop(listener);
    stop.cancel();
    connections.close();
    connections.wait().await;
    Ok(())
}

struct Connection {
    builder: Arc<Builder<TokioExecutor>>,
    stop: CancellationToken,
    peer: SocketAddr,
}

impl Connection {
    async fn tls(self, stream: TcpStream, acceptor: TlsAcceptor, app: Router, refusal: Router) {
        let mut first = [0u8; 1];
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, stream.peek(&mut first)).await {
            Ok(Ok(1)) => {}
            _ => return,
        }
        if first[0] != TLS_HANDSHAKE_RECORD {
            tracing::debug!(peer = %self.peer, "plain-text client on the TLS port; telling it so");
            return self.serve(TokioIo::new(stream), refusal).await;
        }
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
            Ok(Ok(tls)) => self.serve(TokioIo::new(tls), app).await,
            Ok(Err(e)) => tracing::debug!(peer = %self.peer, "TLS handshake failed: {e}"),
            Err(_) => tracing::debug!(peer = %self.peer, "TLS handshake timed out"),
        }
    }

    async fn serve<I>(self, io: I, app: Router)
    where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        let conn = self
            .builder
            .serve_connection_with_upgrades(Coalesce::new(io), TowerToHyperService::new(app));
        tokio::pin!(conn);
        let result = tokio::select! {
            r = conn.as_mut() => r,
            _ = self.stop.cancelled() => {
                conn.as_mut().graceful_shutdown();
                conn.await
            }
        };
        if let Err(e) = result {
            tracing::debug!(peer = %self.peer, "connection ended: {e}");
        }
    }
}

/// The answer to anything sent in plain text to a TLS port.
async fn tls_required(headers: HeaderMap) -> Response {
    let grpc = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"));
    if grpc {
        tonic::Status::unavailable(TLS_REQUIRED)
            .into_http::<axum::body::Body>()
            .into_response()
    } else {
        (StatusCode::BAD_REQUEST, TLS_REQUIRED).into_response()
    }
}
