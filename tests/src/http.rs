//! A small HTTP/1.1 file server on a local port, for tests that fetch by
//! URL and must not reach the internet: `GET /<name>` answers the file
//! with its length, anything else 404. One request per connection.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// The longest request head read.
const MAX_HEAD: usize = 16 * 1024;

/// A running server; stopped when dropped.
pub struct FileServer {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    task: JoinHandle<()>,
}

impl FileServer {
    /// Serves `files` (`name`, bytes) under `/name`.
    pub async fn start(files: Vec<(&str, Vec<u8>)>) -> Self {
        let files: Arc<HashMap<String, Vec<u8>>> = Arc::new(
            files
                .into_iter()
                .map(|(name, bytes)| (format!("/{name}"), bytes))
                .collect(),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let url = format!("http://{}", listener.local_addr().expect("local addr"));
        let task = tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let files = files.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buffer = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
                        match socket.read(&mut buffer).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buffer[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&head);
                    let path = head.split_whitespace().nth(1).unwrap_or("/");
                    let (status, body) = match files.get(path) {
                        Some(bytes) => ("200 OK", bytes.as_slice()),
                        None => ("404 Not Found", b"no such file".as_slice()),
                    };
                    let answer = format!(
                        "HTTP/1.1 {status}\r\ncontent-length: {}\r\ncontent-type: application/octet-stream\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    if socket.write_all(answer.as_bytes()).await.is_ok() {
                        let _ = socket.write_all(body).await;
                    }
                    let _ = socket.shutdown().await;
                });
            }
        });
        Self { url, task }
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
