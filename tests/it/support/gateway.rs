//! `Gateway`: the real `dialect-proxy` binary, started as a child process on `127.0.0.1:0`.
//!
//! The address comes from the one line the binary prints on stdout
//! (`dialect-proxy listening on http://127.0.0.1:PORT`, or `https://` when the listener speaks
//! TLS: see [`Gateway::scheme`]). stderr (logs) is captured and printed
//! only if the test panics; set `DIALECT_PROXY_TEST_STDERR=inherit` to see it live instead.
//! The process is killed when the `Gateway` is dropped.

use std::{
    io::{BufRead, BufReader, Read},
    net::SocketAddr,
    process::{Child, Command, Stdio},
    sync::{mpsc, Arc, Mutex},
    thread,
    time::Duration,
};

const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
const LISTENING_PREFIX: &str = "dialect-proxy listening on ";

pub struct Gateway {
    pub addr: SocketAddr,
    /// `http` or `https`, as announced.
    scheme: &'static str,
    child: Child,
    args: Vec<String>,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// stdout lines after the listening line (e.g. the admin address).
    later_lines: Arc<Mutex<Vec<String>>>,
}

/// What a spawned gateway process is limited to, beyond its arguments and environment.
#[derive(Clone, Copy, Default)]
struct Limits {
    /// Its descriptor limit (`RLIMIT_NOFILE`, soft and hard).
    nofile: Option<u64>,
    /// The one CPU it may run on.
    cpu: Option<usize>,
}

impl Gateway {
    /// Runs `dialect-proxy serve --listen 127.0.0.1:0 <args...>` and waits for the listening line.
    /// Synchronous: it blocks the calling thread for at most the startup timeout.
    pub fn spawn(args: &[&str]) -> Gateway {
        Gateway::spawn_with_env(args, &[])
    }

    /// [`Gateway::spawn`] with the environment variables `env` set for the child only (the test
    /// process's environment, shared by every test, is left alone).
    pub fn spawn_with_env(args: &[&str], env: &[(&str, &str)]) -> Gateway {
        Gateway::start(args, env, Limits::default())
    }

    /// [`Gateway::spawn`] with the child's descriptor limit (`RLIMIT_NOFILE`, soft and hard)
    /// set to `nofile`, as `ulimit -n` would.
    pub fn spawn_with_nofile(args: &[&str], nofile: u64) -> Gateway {
        let limits = Limits {
            nofile: Some(nofile),
            ..Limits::default()
        };
        Gateway::start(args, &[], limits)
    }

    /// [`Gateway::spawn`] with the child allowed to run on CPU `cpu` only, as `taskset -c`
    /// would.
    pub fn spawn_on_cpu(args: &[&str], cpu: usize) -> Gateway {
        let limits = Limits {
            cpu: Some(cpu),
            ..Limits::default()
        };
        Gateway::start(args, &[], limits)
    }

    fn start(args: &[&str], env: &[(&str, &str)], limits: Limits) -> Gateway {
        let mut full: Vec<String> = vec!["serve".into(), "--listen".into(), "127.0.0.1:0".into()];
        full.extend(args.iter().map(|a| a.to_string()));

        let inherit = std::env::var("DIALECT_PROXY_TEST_STDERR").is_ok_and(|v| v == "inherit");
        let mut command = Command::new(env!("CARGO_BIN_EXE_dialect-proxy"));
        if limits.nofile.is_some() || limits.cpu.is_some() {
            use std::os::unix::process::CommandExt;
            let limit = limits.nofile.map(|nofile| libc::rlimit {
                rlim_cur: nofile as libc::rlim_t,
                rlim_max: nofile as libc::rlim_t,
            });
            // SAFETY: a zeroed `cpu_set_t` is an empty set; CPU_SET only writes into it.
            let cpus = limits.cpu.map(|cpu| unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu, &mut set);
                set
            });
            // SAFETY: between fork and exec the closure only makes async-signal-safe calls.
            unsafe {
                command.pre_exec(move || {
                    if let Some(limit) = &limit {
                        if libc::setrlimit(libc::RLIMIT_NOFILE, limit) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                    if let Some(set) = &cpus {
                        let size = std::mem::size_of::<libc::cpu_set_t>();
                        if libc::sched_setaffinity(0, size, set) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                    Ok(())
                });
            }
        }
        let mut child = command
            .args(&full)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(if inherit {
                Stdio::inherit()
            } else {
                Stdio::piped()
            })
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start dialect-proxy {full:?}: {e}"));

        let stderr = Arc::new(Mutex::new(Vec::new()));
        if let Some(mut pipe) = child.stderr.take() {
            let sink = stderr.clone();
            thread::spawn(move || {
                let mut chunk = [0u8; 4096];
                while let Ok(n) = pipe.read(&mut chunk) {
                    if n == 0 {
                        break;
                    }
                    sink.lock().unwrap().extend_from_slice(&chunk[..n]);
                }
            });
        }

        // Read stdout on a thread (first line to us, the rest drained so the pipe never fills).
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel::<Option<String>>();
        let later_lines = Arc::new(Mutex::new(Vec::new()));
        let sink_lines = later_lines.clone();
        thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let first = lines.next().and_then(Result::ok);
            let _ = tx.send(first);
            for line in lines.map_while(Result::ok) {
                sink_lines.lock().unwrap().push(line);
            }
        });

        let mut gateway = Gateway {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            scheme: "http",
            child,
            args: full,
            stderr,
            later_lines,
        };
        let first_line = match rx.recv_timeout(STARTUP_TIMEOUT) {
            Ok(Some(line)) => line,
            Ok(None) => {
                let status = gateway.child.wait().ok();
                panic!(
                    "dialect-proxy {:?} exited ({status:?}) without printing its listening line\n\
                     --- stderr ---\n{}",
                    gateway.args,
                    gateway.stderr()
                );
            }
            Err(_) => panic!(
                "dialect-proxy {:?} printed no listening line within {STARTUP_TIMEOUT:?}\n\
                 --- stderr ---\n{}",
                gateway.args,
                gateway.stderr()
            ),
        };
        let announced = first_line.strip_prefix(LISTENING_PREFIX).and_then(|rest| {
            let (scheme, addr) = rest.trim_end().split_once("://")?;
            let scheme = ["http", "https"].into_iter().find(|s| *s == scheme)?;
            Some((scheme, addr.parse().ok()?))
        });
        (gateway.scheme, gateway.addr) = announced.unwrap_or_else(|| {
            panic!(
                "unexpected first stdout line {first_line:?}; expected \
                 \"{LISTENING_PREFIX}http(s)://127.0.0.1:PORT\"\n--- stderr ---\n{}",
                gateway.stderr()
            )
        });
        gateway
    }

    /// `--client ag-ui --upstream <url> --upstream-dialect ag-ui <extra...>`.
    pub fn agui(upstream_url: &str, extra: &[&str]) -> Gateway {
        let mut args = vec![
            "--client",
            "ag-ui",
            "--upstream",
            upstream_url,
            "--upstream-dialect",
            "ag-ui",
        ];
        args.extend_from_slice(extra);
        Gateway::spawn(&args)
    }

    /// The demo agent behind a TLS listener with `cert` and `key`, and `extra` flags.
    pub fn demo_tls(cert: &std::path::Path, key: &std::path::Path, extra: &[&str]) -> Gateway {
        let (cert, key) = (
            cert.to_str().expect("a UTF-8 path"),
            key.to_str().expect("a UTF-8 path"),
        );
        let mut args = vec![
            "--upstream",
            "builtin:demo",
            "--tls-cert",
            cert,
            "--tls-key",
            key,
        ];
        args.extend_from_slice(extra);
        Gateway::spawn(&args)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http`, or `https` when the listener speaks TLS.
    pub fn scheme(&self) -> &'static str {
        self.scheme
    }

    /// `http://127.0.0.1:PORT` (or `https://`).
    pub fn url(&self) -> String {
        format!("{}://{}", self.scheme, self.addr)
    }

    /// The gateway's process id (to read its `/proc` entries).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything the gateway has written to stderr so far (empty when inherited).
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// Waits until stderr holds `needle` (logs reach the harness through a pipe, a moment after
    /// the gateway wrote them) and returns everything written so far; panics after `PATIENCE`.
    pub async fn wait_for_stderr(&self, needle: &str) -> String {
        let deadline = tokio::time::Instant::now() + super::PATIENCE;
        loop {
            let log = self.stderr();
            if log.contains(needle) {
                return log;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{needle:?} never reached the gateway's stderr:\n{log}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The admin listener's address, from its stdout line (`--admin-listen` must be given).
    pub fn admin_addr(&self) -> SocketAddr {
        let deadline = std::time::Instant::now() + STARTUP_TIMEOUT;
        loop {
            let found = self.later_lines.lock().unwrap().iter().find_map(|l| {
                l.strip_prefix("dialect-proxy admin on http://")
                    .and_then(|a| a.trim().parse().ok())
            });
            if let Some(addr) = found {
                return addr;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no admin line on stdout"
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends SIGTERM (graceful shutdown) to the gateway process.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill(1) runs");
        assert!(status.success(), "kill -TERM failed");
    }

    /// Waits for the process to exit, up to `timeout`; the exit status if it did.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Kills the process with SIGKILL, as a crash would: nothing of it runs after this.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if thread::panicking() {
            // Give the stderr reader a moment to collect the tail.
            thread::sleep(Duration::from_millis(50));
            let log = self.stderr();
            let tail: String = {
                let lines: Vec<&str> = log.lines().collect();
                lines[lines.len().saturating_sub(80)..].join("\n")
            };
            eprintln!(
                "--- dialect-proxy {:?} stderr (last 80 lines) ---\n{tail}\n--- end ---",
                self.args
            );
        }
    }
}
