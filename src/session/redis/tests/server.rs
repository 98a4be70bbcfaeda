//! A real `redis-server` for one test: on a free port, in its own directory, without
//! persistence (unless its extra arguments ask for it); stopped, restarted on the same port,
//! frozen, and killed on drop. The end-to-end tests use this same file
//! (`tests/it/support/redis.rs`): it needs nothing but `std` and `libc`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A running (or stopped) server.
pub struct RedisServer {
    pub port: u16,
    dir: PathBuf,
    extra: Vec<String>,
    /// Whether the port speaks TLS (no plain PING to check readiness).
    tls: bool,
    child: Option<Child>,
}

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Starts `redis-server` with `args`, its output discarded, and waits up to 10 s until
/// `answers` says it is up (`what` names it if it never is).
pub fn launch(args: &[String], what: &str, answers: impl Fn() -> bool) -> Child {
    let child = Command::new("redis-server")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server starts");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !answers() {
        assert!(Instant::now() < deadline, "{what} did not answer");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// A fresh directory for one server.
pub fn scratch_dir(what: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "dp-redis-{what}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

impl RedisServer {
    pub fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// A server with extra arguments (`--requirepass`, …).
    pub fn start_with(extra: &[&str]) -> RedisServer {
        RedisServer::on(free_port(), extra)
    }

    /// A server on `port`.
    pub fn on(port: u16, extra: &[&str]) -> RedisServer {
        let mut server = RedisServer {
            port,
            dir: scratch_dir("server"),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            tls: false,
            child: None,
        };
        server.restart();
        server
    }

    /// A server whose port speaks TLS only, with the certificate and key given.
    pub fn tls(cert: &str, key: &str, ca: &str) -> RedisServer {
        let port = free_port();
        let mut server = RedisServer {
            port,
            dir: scratch_dir("tls"),
            extra: [
                "--port",
                "0",
                "--tls-port",
                &port.to_string(),
                "--tls-cert-file",
                cert,
                "--tls-key-file",
                key,
                "--tls-ca-cert-file",
                ca,
                "--tls-auth-clients",
                "no",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            tls: true,
            child: None,
        };
        server.restart();
        server
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts the server (again), on the same port, and waits until it answers.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "already running");
        let mut args: Vec<String> = vec![
            "--port".into(),
            self.port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--save".into(),
            String::new(),
            "--appendonly".into(),
            "no".into(),
            "--dir".into(),
            self.dir.display().to_string(),
        ];
        args.extend(self.extra.iter().cloned());
        self.child = Some(launch(&args, "redis-server", || self.answers()));
    }

    /// Whether the server accepts a connection (and, without TLS, answers PING: `+PONG`, or
    /// `-NOAUTH` when it wants a password).
    fn answers(&self) -> bool {
        let Ok(mut conn) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        if self.tls {
            return true;
        }
        let _ = conn.set_read_timeout(Some(Duration::from_secs(1)));
        if conn.write_all(b"PING\r\n").is_err() {
            return false;
        }
        let mut reply = [0u8; 1];
        matches!(conn.read(&mut reply), Ok(1) if reply[0] == b'+' || reply[0] == b'-')
    }

    /// Kills the server (its data is gone: no persistence).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes (`SIGSTOP`) or thaws (`SIGCONT`) the server: a Redis that hangs.
    pub fn freeze(&self, frozen: bool) {
        let pid = self.child.as_ref().expect("running").id() as libc::pid_t;
        let signal = if frozen { libc::SIGSTOP } else { libc::SIGCONT };
        // SAFETY: signals a child process this helper started and still owns.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.freeze(false);
        }
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
