//! A real Redis Cluster of three masters for tests: `redis-server` processes in cluster mode on
//! free ports in one directory, without persistence, joined by `redis-cli --cluster create`;
//! stopped and restarted (each node keeps its `nodes-<port>.conf`, so the cluster forms again),
//! and killed and removed on drop. Forming one takes about two seconds, so tests that leave it
//! as they found it share one ([`RedisCluster::shared`]).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use super::server::{free_port, launch, scratch_dir};

/// A certificate, its key and the CA that signed it, as files.
pub struct Tls {
    pub cert: String,
    pub key: String,
    pub ca: String,
}

pub struct RedisCluster {
    /// The nodes' client ports; the first is the seed the store is given.
    pub ports: [u16; 3],
    /// Their cluster bus ports.
    buses: [u16; 3],
    dir: PathBuf,
    password: Option<String>,
    tls: Option<Tls>,
    /// Each node's process, by its place in `ports`, while it runs.
    children: [Option<Child>; 3],
}

/// How long a cluster may take to form (or form again).
const FORMING: Duration = Duration::from_secs(30);

impl RedisCluster {
    pub fn start() -> RedisCluster {
        RedisCluster::start_with(None, None)
    }

    /// The cluster every test that leaves it as it found it uses: started by the first, and
    /// stopped once no test holds it (a test that comes later starts another).
    pub fn shared() -> Arc<RedisCluster> {
        static SHARED: Mutex<Weak<RedisCluster>> = Mutex::new(Weak::new());
        let mut shared = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(cluster) = shared.upgrade() {
            return cluster;
        }
        let cluster = Arc::new(RedisCluster::start());
        *shared = Arc::downgrade(&cluster);
        cluster
    }

    /// A cluster whose nodes want `password`, or speak TLS only.
    pub fn start_with(password: Option<&str>, tls: Option<Tls>) -> RedisCluster {
        let mut ports = Vec::new();
        while ports.len() < 6 {
            let port = free_port();
            if !ports.contains(&port) {
                ports.push(port);
            }
        }
        let mut cluster = RedisCluster {
            ports: [ports[0], ports[1], ports[2]],
            buses: [ports[3], ports[4], ports[5]],
            dir: scratch_dir("cluster"),
            password: password.map(str::to_owned),
            tls,
            children: [None, None, None],
        };
        for node in 0..3 {
            cluster.launch(node);
        }
        let mut create = vec!["--cluster".to_owned(), "create".to_owned()];
        create.extend(cluster.ports.iter().map(|p| format!("127.0.0.1:{p}")));
        create.extend(
            ["--cluster-replicas", "0", "--cluster-yes"]
                .iter()
                .map(|s| s.to_string()),
        );
        let out = cluster
            .cli_command(&create)
            .output()
            .expect("redis-cli runs");
        assert!(
            out.status.success(),
            "redis-cli --cluster create: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        cluster.wait_formed();
        cluster
    }

    /// The seed node's URL.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://127.0.0.1:{}", self.ports[0])
    }

    /// Starts node `node` (its place in `ports`) and waits until it answers.
    fn launch(&mut self, node: usize) {
        assert!(self.children[node].is_none(), "already running");
        let (port, bus) = (self.ports[node], self.buses[node]);
        let mut args: Vec<String> = [
            "--bind",
            "127.0.0.1",
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            &format!("nodes-{port}.conf"),
            "--cluster-port",
            &bus.to_string(),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            &self.dir.display().to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        match &self.tls {
            None => args.extend(["--port".into(), port.to_string()]),
            Some(tls) => args.extend(
                [
                    "--port",
                    "0",
                    "--tls-port",
                    &port.to_string(),
                    "--tls-cluster",
                    "yes",
                    "--tls-cert-file",
                    &tls.cert,
                    "--tls-key-file",
                    &tls.key,
                    "--tls-ca-cert-file",
                    &tls.ca,
                    "--tls-auth-clients",
                    "no",
                ]
                .iter()
                .map(|s| s.to_string()),
            ),
        }
        if let Some(password) = &self.password {
            args.extend(["--requirepass".into(), password.clone()]);
        }
        let child = launch(&args, &format!("node {port}"), || {
            self.cli(port, &["PING"]).trim() == "PONG"
        });
        self.children[node] = Some(child);
    }

    /// Waits until every node says the cluster is whole.
    fn wait_formed(&self) {
        let deadline = Instant::now() + FORMING;
        for port in self.ports {
            while !self
                .cli(port, &["CLUSTER", "INFO"])
                .contains("cluster_state:ok")
            {
                assert!(Instant::now() < deadline, "the cluster did not form");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// `redis-cli` with what it needs to reach a node (password, TLS) and `args`.
    fn cli_command(&self, args: &[String]) -> Command {
        let mut command = Command::new("redis-cli");
        if let Some(password) = &self.password {
            command.args(["--no-auth-warning", "-a", password]);
        }
        if let Some(tls) = &self.tls {
            command.args(["--tls", "--cacert", &tls.ca]);
        }
        command.args(args).stdin(Stdio::null());
        command
    }

    /// What node `port` answers to `args` (empty when it does not).
    pub fn cli(&self, port: u16, args: &[&str]) -> String {
        let mut all = vec!["-h".to_owned(), "127.0.0.1".into(), "-p".into()];
        all.push(port.to_string());
        all.extend(args.iter().map(|s| s.to_string()));
        self.cli_command(&all)
            .output()
            .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
            .unwrap_or_default()
    }

    /// The keys node `port` holds that start with `prefix`.
    pub fn keys(&self, port: u16, prefix: &str) -> Vec<String> {
        self.cli(port, &["--raw", "KEYS", &format!("{prefix}*")])
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// Kills every node (their data is gone: no persistence).
    pub fn stop(&mut self) {
        for node in 0..3 {
            self.stop_node(node);
        }
    }

    /// Kills node `node` (its place in `ports`); the others go on.
    pub fn stop_node(&mut self, node: usize) {
        if let Some(mut child) = self.children[node].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts every stopped node again, on the same ports and with the same configuration
    /// files, and waits until the cluster is whole again.
    pub fn restart(&mut self) {
        for node in 0..3 {
            if self.children[node].is_none() {
                self.launch(node);
            }
        }
        self.wait_formed();
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
