//! An HTTP/1.1 proxy in front of an S3 server (moto) that loses one answer: once armed with
//! a path fragment and a suffix, it forwards the next PUT whose path has both, and then drops
//! the connection instead of passing the S3 server's answer on. The object is written; the
//! client hears the connection end (as after a timeout or a network fault on the way back).
//!
//! Requests are read head by head (a `Content-Length` body each; a chunked request makes the
//! proxy stop looking at that connection and copy it as it is). Answers are copied as they
//! come: a client sends its next request only after the answer to the last one, so what the
//! server sends after the armed PUT is its answer.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

/// The armed fault: the path fragment and suffix of the PUT whose answer is lost.
type Armed = Arc<Mutex<Option<(String, String)>>>;

pub struct LostAnswerProxy {
    pub endpoint: String,
    armed: Armed,
    lost: Arc<AtomicUsize>,
    accept: AbortHandle,
}

impl LostAnswerProxy {
    /// Forwards `127.0.0.1:<new port>` to `target` (`http://127.0.0.1:PORT`).
    pub async fn start(target: &str) -> LostAnswerProxy {
        let target = target
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let port = listener.local_addr().expect("addr").port();
        let armed: Armed = Arc::default();
        let lost = Arc::new(AtomicUsize::new(0));
        let (a, l) = (Arc::clone(&armed), Arc::clone(&lost));
        let accept = tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let Ok(outbound) = TcpStream::connect(&target).await else {
                    continue;
                };
                tokio::spawn(relay(inbound, outbound, Arc::clone(&a), Arc::clone(&l)));
            }
        })
        .abort_handle();
        LostAnswerProxy {
            endpoint: format!("http://127.0.0.1:{port}"),
            armed,
            lost,
            accept,
        }
    }

    /// The answer to the next PUT whose path contains `fragment` and ends with `suffix` is
    /// lost.
    pub fn arm(&self, fragment: &str, suffix: &str) {
        *self.armed.lock().expect("armed") = Some((fragment.to_string(), suffix.to_string()));
    }

    /// How many answers were lost so far.
    pub fn lost(&self) -> usize {
        self.lost.load(Ordering::SeqCst)
    }
}

impl Drop for LostAnswerProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Copies one connection both ways, losing the armed PUT's answer.
async fn relay(inbound: TcpStream, outbound: TcpStream, armed: Armed, lost: Arc<AtomicUsize>) {
    let (client_read, client_write) = inbound.into_split();
    let (server_read, server_write) = outbound.into_split();
    let swallow = Arc::new(AtomicBool::new(false));
    let answers = tokio::spawn(copy_answers(
        server_read,
        client_write,
        Arc::clone(&swallow),
    ));
    let _ = copy_requests(client_read, server_write, &armed, &swallow).await;
    // The client closed its side (or the connection is being dropped): let the answers
    // finish unless one is being lost, which ends the task itself.
    let _ = answers.await;
    if swallow.load(Ordering::SeqCst) {
        lost.fetch_add(1, Ordering::SeqCst);
    }
}

/// Server → client; once `swallow` is set, the next bytes end the connection instead.
async fn copy_answers(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, swallow: Arc<AtomicBool>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if swallow.load(Ordering::SeqCst) {
            // Dropping both halves closes the client's connection without the answer.
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// Client → server, a request at a time; sets `swallow` before forwarding the armed PUT.
async fn copy_requests(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    armed: &Armed,
    swallow: &AtomicBool,
) -> std::io::Result<()> {
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // One request head.
        let head_end = loop {
            if let Some(i) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let n = from.read(&mut buf).await?;
            if n == 0 {
                return Ok(());
            }
            pending.extend_from_slice(&buf[..n]);
        };
        let head = String::from_utf8_lossy(&pending[..head_end]).to_string();
        let mut lines = head.split("\r\n");
        let request = lines.next().unwrap_or_default().to_string();
        let mut length = 0usize;
        let mut chunked = false;
        for line in lines {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
            if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = true;
            }
        }
        if chunked {
            // Not followed: copy the rest of the connection as it is.
            to.write_all(&pending).await?;
            tokio::io::copy(&mut from, &mut to).await?;
            return Ok(());
        }
        let mut parts = request.split(' ');
        let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let path = path.split('?').next().unwrap_or("");
        if method == "PUT" {
            let mut armed = armed.lock().expect("armed");
            if armed.as_ref().is_some_and(|(fragment, suffix)| {
                path.contains(fragment.as_str()) && path.ends_with(suffix.as_str())
            }) {
                *armed = None;
                swallow.store(true, Ordering::SeqCst);
            }
        }
        // The head and its body.
        while pending.len() < head_end + length {
            let n = from.read(&mut buf).await?;
            if n == 0 {
                return Ok(());
            }
            pending.extend_from_slice(&buf[..n]);
        }
        let rest = pending.split_off(head_end + length);
        to.write_all(&pending).await?;
        pending = rest;
        if swallow.load(Ordering::SeqCst) {
            // Nothing more goes over a connection whose answer is being lost.
            return Ok(());
        }
    }
}
