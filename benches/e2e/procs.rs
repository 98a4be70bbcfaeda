//! The processes of the rig: the mock upstream, the Python SDK agent, the gateway and nginx,
//! each started pinned to its CPU and killed when its handle is dropped; the load generator's
//! own pinning; RSS; tracers (strace, perf) attached to a running process and stopped with
//! SIGINT so that they write what they gathered.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command};

use crate::client::Face;
use crate::mock::Script;

/// The gateway under test, built by Cargo with the bench profile.
pub const GATEWAY: &str = env!("CARGO_BIN_EXE_dialect-proxy");

/// Which CPUs each process of the rig runs on.
#[derive(Clone, Debug)]
pub struct Layout {
    pub cpus: usize,
    pub pinned: bool,
}

impl Layout {
    /// Reads the CPU count; pins only with at least two CPUs and `taskset` available.
    pub fn detect() -> Layout {
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let taskset = std::process::Command::new("taskset")
            .arg("-V")
            .output()
            .is_ok();
        Layout {
            cpus,
            pinned: cpus >= 2 && taskset,
        }
    }

    /// Pins this process (all its threads, and the children it starts later) to CPU 0.
    pub fn pin_self(&self) -> anyhow::Result<()> {
        if !self.pinned {
            return Ok(());
        }
        let status = std::process::Command::new("taskset")
            .args(["-a", "-p", "-c", "0", &std::process::id().to_string()])
            .stdout(Stdio::null())
            .status()
            .context("taskset")?;
        if !status.success() {
            bail!("taskset -p failed: {status}");
        }
        Ok(())
    }

    pub fn describe(&self) -> String {
        if self.pinned {
            format!(
                "{} CPUs: load generator (this process, sched affinity via `taskset -a -p -c 0`) \
                 and mock upstream (`taskset -c 0`) on CPU 0; system under test (gateway or \
                 nginx) alone on CPU 1 (`taskset -c 1`)",
                self.cpus
            )
        } else {
            format!(
                "{} CPU(s): nothing pinned (needs 2 CPUs and taskset)",
                self.cpus
            )
        }
    }

    fn command(&self, cpu: u32, program: &str) -> Command {
        if self.pinned {
            let mut c = Command::new("taskset");
            c.arg("-c").arg(cpu.to_string()).arg(program);
            c
        } else {
            Command::new(program)
        }
    }
}

/// A child process of the rig with the address it serves; killed when dropped.
pub struct Proc {
    pub addr: SocketAddr,
    pub child: Child,
    _stdout: Option<BufReader<ChildStdout>>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    /// Resident set size in KiB (`VmRSS`).
    pub fn rss_kib(&self) -> anyhow::Result<u64> {
        rss_kib(self.child.id())
    }

    /// Nanoseconds its threads have run on a CPU so far (`/proc/PID/task/*/schedstat`).
    pub fn cpu_ns(&self) -> anyhow::Result<u64> {
        let mut total = 0;
        for task in std::fs::read_dir(format!("/proc/{}/task", self.child.id()))? {
            let stat = std::fs::read_to_string(task?.path().join("schedstat"))?;
            total += stat
                .split_whitespace()
                .next()
                .and_then(|ns| ns.parse::<u64>().ok())
                .ok_or_else(|| anyhow!("no run time in schedstat"))?;
        }
        Ok(total)
    }

    /// Kills the process and waits for it.
    pub async fn stop(self) {
        drop(self);
    }
}

/// Busy and total jiffies of one CPU so far (`/proc/stat`): busy is everything but idle
/// and I/O wait.
pub fn cpu_jiffies(cpu: u32) -> anyhow::Result<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let name = format!("cpu{cpu}");
    let fields: Vec<u64> = stat
        .lines()
        .find_map(|l| l.strip_prefix(&name).filter(|rest| rest.starts_with(' ')))
        .ok_or_else(|| anyhow!("no {name} in /proc/stat"))?
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    let total: u64 = fields.iter().take(8).sum();
    let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
    Ok((total - idle, total))
}

pub fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| anyhow!("no VmRSS for {pid}"))
}

/// Reads lines of `stdout` until one contains `http://ADDR`; gives the reader back.
async fn announced(
    mut stdout: BufReader<ChildStdout>,
    what: &str,
) -> anyhow::Result<(SocketAddr, BufReader<ChildStdout>)> {
    let name = what.to_string();
    let read = tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
        let mut line = String::new();
        loop {
            line.clear();
            if stdout.read_line(&mut line)? == 0 {
                bail!("{name} exited before listening");
            }
            if let Some((_, addr)) = line.trim().split_once("http://") {
                let addr: SocketAddr = addr
                    .trim_end_matches('/')
                    .parse()
                    .with_context(|| format!("{name} address {line:?}"))?;
                return Ok((addr, stdout));
            }
        }
    });
    tokio::time::timeout(Duration::from_secs(20), read)
        .await
        .with_context(|| format!("{what} did not announce its address"))?
        .context("join")?
}

/// Starts a mock upstream on CPU 0.
pub async fn mock(layout: &Layout, script: &Script) -> anyhow::Result<Proc> {
    let exe = std::env::current_exe().context("current_exe")?;
    let mut cmd = layout.command(0, &exe.to_string_lossy());
    cmd.arg("mock").args(script.to_args());
    spawn(cmd, "mock", None).await
}

/// Starts the Python SDK agent (`benches/sdk_agent.py`) on CPU 0.
pub async fn sdk_agent(
    layout: &Layout,
    python: &Path,
    events: u64,
    delta_bytes: usize,
) -> anyhow::Result<Proc> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/sdk_agent.py");
    let mut cmd = layout.command(0, &python.to_string_lossy());
    cmd.arg(script)
        .args(["--events", &events.to_string()])
        .args(["--delta-bytes", &delta_bytes.to_string()]);
    spawn(cmd, "sdk agent", None).await
}

/// Starts the gateway on CPU 1 with `face` in front of the mock, stderr to `log`, with `extra`
/// flags: the binary this benchmark was built with, or the command `BENCH_GATEWAY` names
/// (another build, or a wrapper that runs it under a profiler; the figures are then that
/// command's).
pub async fn gateway(
    layout: &Layout,
    face: Face,
    upstream: SocketAddr,
    log: &Path,
    extra: &[&str],
) -> anyhow::Result<Proc> {
    let client = match face {
        Face::AgUi => "ag-ui",
        Face::Hai => "hai",
        Face::AapDelta | Face::AapMessage => "aap",
    };
    let program = std::env::var("BENCH_GATEWAY").unwrap_or_else(|_| GATEWAY.to_string());
    let mut cmd = layout.command(1, &program);
    cmd.args(["serve", "--listen", "127.0.0.1:0"]);
    if client == "aap" {
        // An AAP face holds a session per stream, and its defaults (100 sessions and 64 MiB
        // of history per caller, 10,000 sessions) guard against one hostile caller; the
        // bench's one anonymous caller opens thousands of streams at once.
        let config = log.with_file_name("gateway-aap.toml");
        std::fs::write(
            &config,
            format!(
                "[limits]\nheartbeat_interval = \"1s\"\n\n[[routes]]\npath = \"/\"\n\
                 client = \"aap\"\nupstream = \"http://{upstream}/\"\n\
                 upstream_dialect = \"ag-ui\"\n\n[routes.aap]\nname = \"bench\"\n\n\
                 [sessions]\nmax_sessions = 1000000\nmax_sessions_per_principal = 1000000\n\
                 max_total_bytes = 17179869184\nmax_bytes_per_principal = 17179869184\n"
            ),
        )
        .with_context(|| format!("write {}", config.display()))?;
        cmd.arg("--config").arg(&config);
    } else {
        cmd.args(["--client", client])
            .arg("--upstream")
            .arg(format!("http://{upstream}/"))
            .args(["--upstream-dialect", "ag-ui", "--heartbeat-interval", "1s"]);
    }
    cmd.args(extra);
    spawn(cmd, "gateway", Some(log)).await
}

async fn spawn(mut cmd: Command, what: &str, log: Option<&Path>) -> anyhow::Result<Proc> {
    cmd.stdout(Stdio::piped()).stdin(Stdio::null());
    match log {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("open {}", path.display()))?;
            cmd.stderr(file);
        }
        None => {
            cmd.stderr(Stdio::inherit());
        }
    }
    let mut child = cmd.spawn().with_context(|| format!("start {what}"))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow!("{what}: no stdout"))?;
    match announced(BufReader::new(stdout), what).await {
        Ok((addr, reader)) => Ok(Proc {
            addr,
            child,
            _stdout: Some(reader),
        }),
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(e)
        }
    }
}

/// nginx's version, or `None` when it is not installed.
pub fn nginx_version() -> Option<String> {
    let out = std::process::Command::new("nginx")
        .arg("-v")
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stderr).trim().to_string();
    Some(text.trim_start_matches("nginx version: ").to_string())
}

/// Starts nginx (one worker, no master) on CPU 1 as a plain streaming proxy to the mock.
pub async fn nginx(layout: &Layout, upstream: SocketAddr, dir: &Path) -> anyhow::Result<Proc> {
    let prefix: PathBuf = dir.join("nginx");
    std::fs::create_dir_all(prefix.join("logs"))?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let p = prefix.display();
    // Two sockets per stream (client and upstream), as the gateway holds them, up to the
    // open-file limit. nginx wants more connection slots than that: with as many slots as
    // descriptors it ran out at 9,950 streams ("worker_connections are not enough") and closed
    // some; the slots are preallocated, which only raises its RSS at rest.
    // Its access log stays on, as nginx ships: the gateway logs each request's end at its
    // default level too, and each line is part of what a request costs.
    let files = crate::memory::fd_limit();
    let connections = files * 2;
    let conf = format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\nworker_rlimit_nofile {files};\n\
         pid {p}/nginx.pid;\nerror_log {p}/logs/error.log warn;\n\
         events {{ worker_connections {connections}; }}\n\
         http {{\n  access_log {p}/logs/access.log combined;\n  client_body_temp_path {p}/client_body;\n\
         \x20 proxy_temp_path {p}/proxy;\n  fastcgi_temp_path {p}/fastcgi;\n\
         \x20 uwsgi_temp_path {p}/uwsgi;\n  scgi_temp_path {p}/scgi;\n\
         \x20 upstream mock {{ server {upstream}; keepalive 256; }}\n\
         \x20 server {{\n    listen 127.0.0.1:{port};\n    location / {{\n\
         \x20     proxy_pass http://mock;\n      proxy_buffering off;\n\
         \x20     proxy_request_buffering off;\n      proxy_http_version 1.1;\n\
         \x20     proxy_set_header Connection \"\";\n      proxy_read_timeout 3600s;\n\
         \x20     gzip off;\n    }}\n  }}\n}}\n"
    );
    let conf_path = prefix.join("nginx.conf");
    std::fs::write(&conf_path, conf)?;
    let mut cmd = layout.command(1, "nginx");
    cmd.arg("-p")
        .arg(&prefix)
        .arg("-e")
        .arg(prefix.join("logs/error.log"))
        .arg("-c")
        .arg(&conf_path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let child = cmd.spawn().context("start nginx")?;
    let mut proc = Proc {
        addr: format!("127.0.0.1:{port}").parse()?,
        child,
        _stdout: None,
    };
    let addr = proc.addr;
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return Ok(proc);
        }
        if let Some(status) = proc.child.try_wait()? {
            bail!("nginx exited: {status} (see {p}/logs/error.log)");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("nginx did not listen on {addr}")
}

/// A tracer (strace, perf) attached to a running process.
pub struct Tracer {
    child: Child,
    what: String,
}

impl Drop for Tracer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Tracer {
    /// Starts `program args` (which attach to a process) and gives it `settle` to attach.
    pub async fn attach(
        program: &str,
        args: &[String],
        settle: Duration,
    ) -> anyhow::Result<Tracer> {
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("start {program}"))?;
        let mut tracer = Tracer {
            child,
            what: program.to_string(),
        };
        tokio::time::sleep(settle).await;
        if let Some(status) = tracer.child.try_wait()? {
            let mut err = String::new();
            if let Some(mut stderr) = tracer.child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut stderr, &mut err);
            }
            bail!("{program} exited at once ({status}): {}", err.trim());
        }
        Ok(tracer)
    }

    /// SIGINT, then waits (up to `patience`) for the tracer to write its output and exit.
    pub async fn finish(mut self, patience: Duration) -> anyhow::Result<()> {
        let pid = libc::pid_t::try_from(self.child.id()).context("pid")?;
        // SAFETY: kill(2) on our own child's pid; no memory is shared.
        if unsafe { libc::kill(pid, libc::SIGINT) } != 0 {
            bail!(
                "SIGINT to {}: {}",
                self.what,
                std::io::Error::last_os_error()
            );
        }
        let deadline = std::time::Instant::now() + patience;
        loop {
            if let Some(status) = self.child.try_wait()? {
                use std::os::unix::process::ExitStatusExt as _;
                // strace exits 130 on SIGINT, perf re-raises it.
                let interrupted =
                    status.code() == Some(130) || status.signal() == Some(libc::SIGINT);
                if !status.success() && !interrupted {
                    let mut err = String::new();
                    if let Some(mut stderr) = self.child.stderr.take() {
                        let _ = std::io::Read::read_to_string(&mut stderr, &mut err);
                    }
                    // Worth a look, not a failure of the phase.
                    println!("  {} ended with {status}: {}", self.what, err.trim());
                }
                return Ok(());
            }
            if std::time::Instant::now() > deadline {
                bail!("{} did not exit within {patience:?} of SIGINT", self.what);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// A file name for a comparator's label: `gateway ag-ui→hai` → `gateway-ag-ui-hai`.
pub fn slug(label: &str) -> String {
    let mut out = String::new();
    for c in label.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}
