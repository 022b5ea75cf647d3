//! A TCP forwarder on loopback that a test can cut: every connection
//! through it is dropped at once, and new ones are taken again after.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Forwards `127.0.0.1:<port>` to a target.
pub struct TcpProxy {
    /// Where to connect instead of the target.
    pub addr: SocketAddr,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accepting: JoinHandle<()>,
}

impl TcpProxy {
    /// Starts forwarding to `target`.
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connections: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let held = connections.clone();
        let accepting = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let copy = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                let mut held = held.lock().unwrap();
                held.retain(|c| !c.is_finished());
                held.push(copy);
            }
        });
        Self {
            addr,
            connections,
            accepting,
        }
    }

    /// `http://<addr>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Drops every connection through the proxy now (both ends see a
    /// reset); later connections go through again.
    pub fn cut(&self) {
        for connection in self.connections.lock().unwrap().drain(..) {
            connection.abort();
        }
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.accepting.abort();
        self.cut();
    }
}
