//! A TCP proxy a test controls, standing for the network between a producer and a pod:
//! [`Proxy::cut`] resets every open connection and refuses new ones (accepts and drops
//! them at once) until [`Proxy::restore`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

pub struct Proxy {
    pub url: String,
    cut: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<AbortHandle>>>,
    accept: AbortHandle,
}

impl Proxy {
    /// Forwards `127.0.0.1:<new port>` to `127.0.0.1:target_port`.
    pub async fn start(target_port: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let port = listener.local_addr().expect("addr").port();
        let cut = Arc::new(AtomicBool::new(false));
        let conns: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let (c, cs) = (Arc::clone(&cut), Arc::clone(&conns));
        let accept = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    return;
                };
                if c.load(Ordering::SeqCst) {
                    drop(inbound);
                    continue;
                }
                let task = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(("127.0.0.1", target_port)).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                cs.lock().expect("conns").push(task.abort_handle());
            }
        })
        .abort_handle();
        Proxy {
            url: format!("http://127.0.0.1:{port}"),
            cut,
            conns,
            accept,
        }
    }

    /// The network goes down: open connections are dropped, new ones refused.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for c in self.conns.lock().expect("conns").drain(..) {
            c.abort();
        }
    }

    /// The network comes back.
    pub fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}
