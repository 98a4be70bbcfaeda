//! A real `redis-server` per test: on a free port of 127.0.0.1, in a directory of its own, with
//! an append-only file so that a stop and a start on the same port keep the data (a restart, as
//! an operator's Redis would have). Killed and removed on drop.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::PATIENCE;

/// See the module docs.
pub struct RedisServer {
    addr: SocketAddr,
    dir: PathBuf,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a server and waits until it answers `PING`.
    pub async fn start() -> RedisServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let dir = std::env::temp_dir().join(format!("dp-redis-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("the server's directory");
        let mut server = RedisServer {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            dir,
            child: None,
        };
        server.run().await;
        server
    }

    /// `redis://127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        format!("redis://{}/0", self.addr)
    }

    /// Kills the server (as a crash would); its data stays in its directory.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port, with the data it had written.
    pub async fn restart(&mut self) {
        self.stop();
        self.run().await;
    }

    async fn run(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.addr.port().to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "yes"])
            .args(["--appendfsync", "always"])
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server (the Debian package) is installed");
        self.child = Some(child);
        let deadline = Instant::now() + PATIENCE;
        loop {
            if self.command(&["PING"]).await.as_deref() == Some("+PONG") {
                return;
            }
            assert!(Instant::now() < deadline, "redis-server did not start");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sends one command and returns the first line of the reply; `None` when the server
    /// cannot be reached.
    pub async fn command(&self, args: &[&str]) -> Option<String> {
        let mut stream = TcpStream::connect(self.addr).await.ok()?;
        let mut request = format!("*{}\r\n", args.len());
        for a in args {
            request.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut reply = Vec::new();
        let mut buf = [0u8; 512];
        while !reply.ends_with(b"\r\n") {
            let n = stream.read(&mut buf).await.ok()?;
            if n == 0 {
                return None;
            }
            reply.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8_lossy(&reply);
        Some(text.lines().next().unwrap_or_default().to_owned())
    }

    /// The keys matching `pattern` (`KEYS`, fine for a test's few keys), as the server lists
    /// them.
    pub async fn keys(&self, pattern: &str) -> Vec<String> {
        let mut stream = TcpStream::connect(self.addr).await.expect("redis");
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

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
