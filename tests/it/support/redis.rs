//! A real `redis-server` per test, for the end-to-end tests: the unit tests' own harness
//! (`src/session/redis/tests/server.rs`, the same file), on a free port in a directory of its
//! own, with an append-only file fsynced on every write so that a stop and a start on the same
//! port keep the data (a restart, as an operator's Redis would have). Killed and removed on
//! drop.

#[path = "../../../src/session/redis/tests/server.rs"]
mod server;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// See the module docs.
pub struct RedisServer(server::RedisServer);

impl RedisServer {
    /// Starts a server and waits until it answers `PING`.
    pub async fn start() -> RedisServer {
        // Later arguments win over the harness's own `--appendonly no`.
        RedisServer(server::RedisServer::start_with(&[
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
        ]))
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        self.0.url()
    }

    /// Kills the server (as a crash would); its data stays in its directory.
    pub fn stop(&mut self) {
        self.0.stop();
    }

    /// Starts it again on the same port, with the data it had written.
    pub async fn restart(&mut self) {
        self.0.stop();
        self.0.restart();
    }

    /// The keys matching `pattern` (`KEYS`, fine for a test's few keys), as the server lists
    /// them.
    pub async fn keys(&self, pattern: &str) -> Vec<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.0.port))
            .await
            .expect("redis");
        let request = format!("*2\r\n$4\r\nKEYS\r\n${}\r\n{pattern}\r\n", pattern.len());
        stream.write_all(request.as_bytes()).await.expect("write");
        // The reply is an array of bulk strings; read until it is complete.
        let mut reply = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = stream.read(&mut buf).await.expect("read");
            assert!(n > 0, "redis closed mid-reply");
            reply.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&reply);
            let lines: Vec<&str> = text.split("\r\n").collect();
            let Some(count) = lines[0].strip_prefix('*') else {
                panic!("KEYS answered {text}");
            };
            let count: usize = count.parse().expect("an array length");
            if lines.len() > 2 * count + 1 {
                return (0..count).map(|i| lines[2 + 2 * i].to_owned()).collect();
            }
        }
    }
}
