//! TLS on the ports beside the main one (`--mqtt-listen`, `--kafka-listen`): when the pod
//! has `--tls-cert`/`--tls-key`, those ports speak TLS with the same certificate. No ALPN
//! is asked for (the main port's `h2`/`http/1.1` list would refuse a client offering its
//! own protocol name; MQTT and Kafka need none). A client whose first byte is not a TLS
//! handshake record (a plain-text client) is closed without a byte written, and a
//! handshake must finish within [`HANDSHAKE_TIMEOUT`].

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// A client must send its first byte and finish its TLS handshake in this time.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// First byte of a TLS record carrying a handshake message.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// The acceptor of a side port for the pod's TLS identity (None: plain text).
pub fn acceptor(tls: Option<Arc<ServerConfig>>) -> Option<TlsAcceptor> {
    tls.map(|config| {
        let mut config = (*config).clone();
        config.alpn_protocols = Vec::new();
        TlsAcceptor::from(Arc::new(config))
    })
}

/// The TLS stream of `stream`, or why there is none (the connection is then dropped:
/// closed without an answer).
pub async fn accept(
    acceptor: &TlsAcceptor,
    stream: TcpStream,
) -> Result<TlsStream<TcpStream>, String> {
    let mut first = [0u8; 1];
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, stream.peek(&mut first)).await {
        Ok(Ok(1)) => {}
        Ok(Ok(_)) => return Err("closed before a TLS handshake".into()),
        Ok(Err(e)) => return Err(format!("reading the first byte: {e}")),
        Err(_) => return Err("no TLS handshake in time".into()),
    }
    if first[0] != TLS_HANDSHAKE_RECORD {
        return Err(format!(
            "first byte {:#04x} is not a TLS handshake: a plain-text client on a TLS port",
            first[0]
        ));
    }
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => Ok(tls),
        Ok(Err(e)) => Err(format!("TLS handshake failed: {e}")),
        Err(_) => Err("TLS handshake timed out".into()),
    }
}
