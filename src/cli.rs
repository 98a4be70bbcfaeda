//! The command line (DESIGN.md, "Command line"): `serve`, `translate`, `check`, `demo-agent`,
//! and the operator's `drain` and `install` ([`ops`]).
//! Flags override the environment (`DIALECT_PROXY_*`), which overrides the config file.

mod ops;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{bail, Context};
use bytes::BytesMut;
use clap::{Args, Parser, Subcommand};

use crate::adapters::aap_client::planner::resolve_hitl;
use crate::config::aap_client::HitlStyle;
use crate::config::{self, Overrides, RawLimits};
use crate::dialect::aap::read::ReadOptions;
use crate::dialect::aap::types::StreamMode;
use crate::dialect::confirm::DEFAULT_TOOL;
use crate::dialect::hai::{DeltaEncoding, ToolArgsEncoding};
use crate::dialect::Dialect;
use crate::dialect::{read_request, CodecOptions};
use crate::event::RunIds;
use crate::mapping::Mappings;
use crate::pipeline::{Pipeline, PipelineSpec};
use crate::telemetry::LogFormat;

#[derive(Debug, Parser)]
#[command(
    name = "dialect-proxy",
    version,
    about = "A streaming gateway that translates AG-UI, HAI and AAP event by event"
)]
pub struct Cli {
    /// Log format on stderr: text (one line per event, values escaped) or json (one object per
    /// line).
    #[arg(
        long,
        global = true,
        env = "DIALECT_PROXY_LOG_FORMAT",
        value_enum,
        default_value_t = LogFormat::Text
    )]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the gateway. SIGTERM drains it and exits; SIGHUP re-reads its configuration.
    Serve(Box<ServeArgs>),
    /// Translate a recorded SSE stream (a file or stdin) from one dialect to another, through the
    /// same code as the proxy.
    Translate(TranslateArgs),
    /// Validate a config file and the mapping tables, reporting every problem.
    Check(CheckArgs),
    /// Run the built-in scripted AG-UI 1.0 demo agent.
    DemoAgent(DemoArgs),
    /// Drain a running gateway through its admin listener (POST /drain): it stops accepting,
    /// and this returns once its open streams have ended or its drain_timeout has passed. For
    /// a pod's preStop hook.
    Drain(DrainArgs),
    /// Copy this executable to DIR/dialect-proxy (for another container's preStop hook).
    Install(InstallArgs),
}

#[derive(Debug, Args)]
struct DrainArgs {
    /// The gateway's admin address (host:port), as given to --admin-listen.
    #[arg(long, env = "DIALECT_PROXY_ADMIN")]
    admin: String,
    /// Give up waiting after this long.
    #[arg(long, default_value = "120s")]
    timeout: String,
}

#[derive(Debug, Args)]
struct InstallArgs {
    /// The directory to copy the executable into.
    dir: PathBuf,
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// TOML config file with several routes.
    #[arg(long, env = "DIALECT_PROXY_CONFIG")]
    config: Option<PathBuf>,
    /// Also reload the configuration when the config file's content changes (checked every
    /// 2s), as on SIGHUP.
    #[arg(long, env = "DIALECT_PROXY_WATCH_CONFIG")]
    watch_config: bool,
    /// Address to listen on [default: 127.0.0.1:8080].
    #[arg(long, env = "DIALECT_PROXY_LISTEN")]
    listen: Option<String>,
    /// Admin listener for /metrics, /live and /ready (off unless given).
    #[arg(long, env = "DIALECT_PROXY_ADMIN_LISTEN")]
    admin_listen: Option<String>,
    /// PEM certificate chain: the listener speaks HTTPS (h2 and http/1.1 by ALPN) with
    /// --tls-key; both files are re-read when they change [default: plaintext].
    #[arg(long, env = "DIALECT_PROXY_TLS_CERT")]
    tls_cert: Option<String>,
    /// PEM private key of --tls-cert.
    #[arg(long, env = "DIALECT_PROXY_TLS_KEY")]
    tls_key: Option<String>,
    /// Dialect of the clients (single-route mode) [default: ag-ui].
    #[arg(long, env = "DIALECT_PROXY_CLIENT")]
    client: Option<String>,
    /// Upstream URL, or builtin:demo for the in-process demo agent (single-route mode).
    #[arg(long, env = "DIALECT_PROXY_UPSTREAM")]
    upstream: Option<String>,
    /// Dialect of the upstream (single-route mode) [default: ag-ui].
    #[arg(long, env = "DIALECT_PROXY_UPSTREAM_DIALECT")]
    upstream_dialect: Option<String>,
    /// Agent name announced by an AAP face.
    #[arg(long, env = "DIALECT_PROXY_AGENT_NAME")]
    agent_name: Option<String>,
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    limits: LimitArgs,
}

#[derive(Debug, Args)]
struct CommonArgs {
    /// Directory with mapping tables overriding the compiled-in ones (agui-aliases.toml, …).
    #[arg(long, env = "DIALECT_PROXY_MAPPINGS")]
    mappings: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct LimitArgs {
    /// TCP connect timeout to the upstream [default: 5s].
    #[arg(long, env = "DIALECT_PROXY_CONNECT_TIMEOUT")]
    connect_timeout: Option<String>,
    /// Wait for the upstream's response headers [default: 60s].
    #[arg(long, env = "DIALECT_PROXY_HEADERS_TIMEOUT")]
    headers_timeout: Option<String>,
    /// Longest upstream silence mid-stream before the run fails [default: 300s].
    #[arg(long, env = "DIALECT_PROXY_IDLE_TIMEOUT")]
    idle_timeout: Option<String>,
    /// Downstream silence after which a `: ping` comment is sent [default: 15s].
    #[arg(long, env = "DIALECT_PROXY_HEARTBEAT_INTERVAL")]
    heartbeat_interval: Option<String>,
    /// Largest upstream event in bytes [default: 1048576].
    #[arg(long, env = "DIALECT_PROXY_MAX_EVENT_BYTES")]
    max_event_bytes: Option<u64>,
    /// How long open streams may run on after SIGTERM before they end with GATEWAY_SHUTDOWN
    /// [default: 30s].
    #[arg(long, env = "DIALECT_PROXY_DRAIN_TIMEOUT")]
    drain_timeout: Option<String>,
    /// How long a write to a client may stay blocked before the client counts as gone and its
    /// upstream is cancelled [default: 60s].
    #[arg(long, env = "DIALECT_PROXY_STALL_TIMEOUT")]
    stall_timeout: Option<String>,
    /// How long one stream may last before it ends with STREAM_DURATION_EXCEEDED (e.g. 30m;
    /// "off") [default: off].
    #[arg(long, env = "DIALECT_PROXY_MAX_STREAM_DURATION")]
    max_stream_duration: Option<String>,
    /// Upstream bytes one stream may carry before it ends with STREAM_BYTES_EXCEEDED (0: off)
    /// [default: off].
    #[arg(long, env = "DIALECT_PROXY_MAX_STREAM_BYTES")]
    max_stream_bytes: Option<u64>,
    /// Largest request body in bytes [default: 8388608].
    #[arg(long, env = "DIALECT_PROXY_MAX_REQUEST_BYTES")]
    max_request_bytes: Option<u64>,
    /// Requests answered at once, streams included; more get 503 OVERLOADED with Retry-After
    /// [default: 10000].
    #[arg(long, env = "DIALECT_PROXY_MAX_STREAMS")]
    max_streams: Option<u64>,
    /// Bytes of all request bodies being read at once; a body that would pass it gets 503
    /// OVERLOADED with Retry-After [default: 67108864].
    #[arg(long, env = "DIALECT_PROXY_MAX_BUFFERED_REQUEST_BYTES")]
    max_buffered_request_bytes: Option<u64>,
    /// A connection that sends no complete request head within this is closed [default: 10s].
    #[arg(long, env = "DIALECT_PROXY_REQUEST_HEADER_TIMEOUT")]
    request_header_timeout: Option<String>,
    /// Client connections open at once; more wait in the listen backlog [default: 10000].
    #[arg(long, env = "DIALECT_PROXY_MAX_CONNECTIONS")]
    max_connections: Option<u64>,
    /// The largest HTTP/1.1 request head (request line and headers); a larger one is refused
    /// with 431 [default: 8192; at least 8192].
    #[arg(long, env = "DIALECT_PROXY_MAX_REQUEST_HEAD_BYTES")]
    max_request_head_bytes: Option<u64>,
    /// Requests one client connection may carry, then `Connection: close` (HTTP/1.1) or GOAWAY
    /// (HTTP/2); 0: no limit [default: 1000].
    #[arg(long, env = "DIALECT_PROXY_MAX_REQUESTS_PER_CONNECTION")]
    max_requests_per_connection: Option<u64>,
}

#[derive(Debug, Args)]
struct TranslateArgs {
    /// Dialect of the recorded stream.
    #[arg(long)]
    from: Dialect,
    /// Dialect to write.
    #[arg(long)]
    to: Dialect,
    /// The recorded SSE stream; stdin when absent or `-`.
    file: Option<PathBuf>,
    /// The RunAgentInput the stream answered (for its thread and run ids).
    #[arg(long)]
    request: Option<PathBuf>,
    /// Thread id when no request is given.
    #[arg(long, default_value = "thread")]
    thread_id: String,
    /// Run id when no request is given.
    #[arg(long, default_value = "run")]
    run_id: String,
    /// Largest event in bytes.
    #[arg(long, default_value_t = config::DEFAULT_MAX_EVENT_BYTES as u64)]
    max_event_bytes: u64,
    /// HAI output: business delta encoding (json_string, object, plain_text).
    #[arg(long, default_value = "json_string")]
    hai_delta_encoding: DeltaEncoding,
    /// HAI output: tool arguments (whole_json_string, object, stream).
    #[arg(long, default_value = "whole_json_string")]
    hai_tool_args: ToolArgsEncoding,
    /// AAP output: the turn's stream mode (delta, message, none).
    #[arg(long, default_value = "delta", value_parser = ["delta", "message", "none"])]
    aap_stream: String,
    /// AAP output: the session's client tools, comma-separated (their calls stop the turn with
    /// `tool_use` for the client to run); the request's tools when a request is given.
    #[arg(long, value_delimiter = ',')]
    aap_client_tools: Vec<String>,
    /// AAP input: how permissions reach the client (auto, interrupt, confirm_tool); with AAP
    /// output, auto shows them as the agent's own calls awaiting `tool_permission`.
    #[arg(long, default_value = "auto")]
    aap_hitl: HitlStyle,
    /// AAP input: the body is a `none` turn's JSON rather than SSE.
    #[arg(long)]
    aap_json: bool,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Debug, Args)]
struct CheckArgs {
    /// Config file to validate.
    #[arg(long, env = "DIALECT_PROXY_CONFIG")]
    config: Option<PathBuf>,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Debug, Args)]
struct DemoArgs {
    /// Address to listen on.
    #[arg(
        long,
        default_value = "127.0.0.1:9090",
        env = "DIALECT_PROXY_DEMO_LISTEN"
    )]
    listen: SocketAddr,
    /// Delay between events (e.g. 40ms, 0ms).
    #[arg(long, default_value = "40ms")]
    pace: String,
}

fn spanned(value: Option<String>) -> Option<toml::Spanned<String>> {
    value.map(|v| toml::Spanned::new(0..0, v))
}

impl LimitArgs {
    fn raw(self) -> RawLimits {
        RawLimits {
            connect_timeout: spanned(self.connect_timeout),
            headers_timeout: spanned(self.headers_timeout),
            idle_timeout: spanned(self.idle_timeout),
            heartbeat_interval: spanned(self.heartbeat_interval),
            max_event_bytes: self.max_event_bytes.map(|v| toml::Spanned::new(0..0, v)),
            max_request_bytes: self.max_request_bytes.map(|v| toml::Spanned::new(0..0, v)),
            max_stream_duration: spanned(self.max_stream_duration),
            max_stream_bytes: self.max_stream_bytes.map(|v| toml::Spanned::new(0..0, v)),
            max_streams: self.max_streams.map(|v| toml::Spanned::new(0..0, v)),
            max_buffered_request_bytes: self
                .max_buffered_request_bytes
                .map(|v| toml::Spanned::new(0..0, v)),
            request_header_timeout: spanned(self.request_header_timeout),
            max_connections: self.max_connections.map(|v| toml::Spanned::new(0..0, v)),
            max_request_head_bytes: self
                .max_request_head_bytes
                .map(|v| toml::Spanned::new(0..0, v)),
            max_requests_per_connection: self
                .max_requests_per_connection
                .map(|v| toml::Spanned::new(0..0, v)),
        }
    }
}

/// Entry point of the binary.
pub fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let telemetry = crate::telemetry::init(cli.log_format);
    let (runtime, scheduler) = runtime().context("could not start the async runtime")?;
    let result = match cli.command {
        // The server runs as a task on the runtime's workers, not on this thread (with more
        // than one CPU; on one, the runtime has this thread alone): the
        // connections its accept loop spawns then start on the worker that accepted them,
        // without waking another thread (one wake-up and two context switches per connection
        // less; a first event reaches a new client sooner).
        Command::Serve(args) => runtime.block_on(async {
            tracing::info!(scheduler, "async runtime");
            match tokio::spawn(serve(*args)).await {
                Ok(served) => served,
                Err(joined) if joined.is_panic() => std::panic::resume_unwind(joined.into_panic()),
                Err(joined) => Err(anyhow::anyhow!("the server task was cancelled: {joined}")),
            }
        }),
        Command::Translate(args) => translate(args),
        Command::Check(args) => check(args),
        Command::DemoAgent(args) => runtime.block_on(demo_agent(args)),
        Command::Drain(args) => runtime.block_on(drain(args)),
        Command::Install(args) => ops::install(&args.dir).map(|path| {
            println!("installed {}", path.display());
        }),
    };
    // The last spans reach the collector, within a bound, before the process exits.
    telemetry.shutdown();
    // Whatever is still running (a connection past the drain grace, a file read) must not hold
    // the exit: the drain has bounded everything that mattered.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    result
}

/// The async runtime: one thread when the process may use one CPU (a sidecar's usual limit;
/// `available_parallelism` reads the affinity mask and the cgroup quota), else a worker per
/// CPU. On one CPU the work-stealing scheduler only adds bookkeeping to every wake-up: under
/// callgrind, 10 streams of 305 one-chunk events cost 7,067 instructions per event with it and
/// 6,782 on the current-thread scheduler.
/// Returns it with its scheduler's name, for the log.
fn runtime() -> std::io::Result<(tokio::runtime::Runtime, &'static str)> {
    let one_cpu = std::thread::available_parallelism().is_ok_and(|n| n.get() == 1);
    let (mut builder, scheduler) = if one_cpu {
        (
            tokio::runtime::Builder::new_current_thread(),
            "current-thread",
        )
    } else {
        (tokio::runtime::Builder::new_multi_thread(), "multi-thread")
    };
    Ok((builder.enable_all().build()?, scheduler))
}

async fn drain(args: DrainArgs) -> anyhow::Result<()> {
    let timeout = config::parse_duration(&args.timeout)
        .map_err(|problem| anyhow::anyhow!("--timeout: {problem}"))?;
    ops::drain(&args.admin, timeout).await
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let overrides = Overrides {
        listen: args.listen,
        admin_listen: args.admin_listen,
        client: args.client,
        upstream: args.upstream,
        upstream_dialect: args.upstream_dialect,
        agent_name: args.agent_name,
        mappings: args.common.mappings,
        drain_timeout: args.limits.drain_timeout.clone(),
        stall_timeout: args.limits.stall_timeout.clone(),
        tls_cert: args.tls_cert,
        tls_key: args.tls_key,
        limits: args.limits.raw(),
        // Keys are secrets: from the environment only, never a flag (visible in `ps`).
        aap_api_keys: std::env::var(config::AAP_API_KEYS_ENV).ok(),
    };
    // Taken before the configuration is read: a change in between is then seen as one.
    let watched = match (&args.config, args.watch_config) {
        (Some(file), true) => Some(ops::file_digest(file)),
        (None, true) => {
            tracing::warn!("--watch-config without --config: there is no file to watch");
            None
        }
        _ => None,
    };
    let config = config::load(args.config.as_deref(), &overrides)?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("could not listen on {}", config.listen))?;
    let addr = listener.local_addr()?;
    for route in &config.routes {
        tracing::info!(path = %route.path, client = %route.client, upstream = ?route.upstream, upstream_dialect = %route.upstream_dialect, "route");
    }
    let shared = crate::server::Shared::new();
    let admin = match config.admin_listen {
        Some(admin_addr) => {
            let admin_listener = tokio::net::TcpListener::bind(admin_addr)
                .await
                .with_context(|| format!("could not listen on {admin_addr} (admin)"))?;
            let bound = admin_listener.local_addr()?;
            tracing::info!(addr = %bound, "admin listener: /metrics /live /ready");
            Some((
                bound,
                tokio::spawn(crate::server::admin::serve_admin(
                    admin_listener,
                    shared.clone(),
                )),
            ))
        }
        None => None,
    };
    let scheme = if config.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let metrics = std::sync::Arc::clone(&shared.metrics);
    let store = crate::session::open(&config.store, config.sessions, metrics.store_observer())
        .await
        .context("could not open the session store")?;
    let server = crate::server::Server::new(config, listener, shared, store);
    let reloads = ops::Reloads {
        file: args.config.clone(),
        overrides,
        reloader: server.reloader(),
        metrics,
    };
    let mut reloading = Vec::new();
    #[cfg(unix)]
    reloading.push(tokio::spawn(reloads.clone().on_sighup()));
    if let Some(seen) = watched {
        reloading.push(tokio::spawn(reloads.watch(seen)));
    }
    let shutdown = shutdown_signal();
    announce(scheme, addr, admin.as_ref().map(|(a, _)| *a))?;
    server.run(shutdown).await?;
    for task in reloading {
        task.abort();
    }
    if let Some((_, task)) = admin {
        task.abort();
    }
    Ok(())
}

/// The one line tests and operators read to learn the bound address (`https://` with TLS).
fn announce(scheme: &str, addr: SocketAddr, admin: Option<SocketAddr>) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "dialect-proxy listening on {scheme}://{addr}")?;
    if let Some(admin) = admin {
        writeln!(stdout, "dialect-proxy admin on http://{admin}")?;
    }
    stdout.flush()?;
    Ok(())
}

/// Resolves on SIGTERM or Ctrl-C. The handlers are in place when this returns, so a signal
/// that arrives before the server polls the future still drains it.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
    let ctrl_c = tokio::signal::ctrl_c();
    async move {
        #[cfg(unix)]
        {
            let mut term = match term {
                Ok(term) => term,
                Err(error) => {
                    tracing::warn!(%error, "SIGTERM handler unavailable; only Ctrl-C stops the server");
                    let _ = ctrl_c.await;
                    return;
                }
            };
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = ctrl_c.await;
    }
}

fn translate(args: TranslateArgs) -> anyhow::Result<()> {
    let mappings = match &args.common.mappings {
        Some(dir) => config::load_mappings(dir)?,
        None => Mappings::builtin(),
    };
    let mut codecs = CodecOptions {
        mappings,
        ..CodecOptions::default()
    };
    codecs.hai.writer.delta_encoding = args.hai_delta_encoding;
    codecs.hai.writer.tool_args = args.hai_tool_args;
    let (ids, tools, request) = match &args.request {
        Some(path) => {
            let body =
                std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            // The request is the client's, so it is read in the output dialect.
            let mut new_id = || uuid::Uuid::new_v4().to_string();
            let input = read_request(args.to, &body, &codecs, &mut new_id)
                .map_err(|f| anyhow::anyhow!("{}: {}", path.display(), f.message))?;
            let tools = input.tools.iter().map(|t| t.name.clone()).collect();
            let ids = RunIds {
                thread_id: input.thread_id.clone(),
                run_id: input.run_id.clone(),
            };
            (ids, tools, Some(input))
        }
        None => {
            let ids = RunIds {
                thread_id: args.thread_id,
                run_id: args.run_id,
            };
            (ids, Vec::new(), None)
        }
    };
    codecs.aap.turn.mode = StreamMode::from_wire(Some(&args.aap_stream));
    codecs.aap.turn.client_tools = if args.aap_client_tools.is_empty() {
        tools.clone()
    } else {
        args.aap_client_tools
    };
    let request = request.unwrap_or_default();
    codecs.aap.read = if args.to == Dialect::Aap && args.aap_hitl == HitlStyle::Auto {
        // An AAP client in front of an AAP agent, as the AAP face runs one: its tools are its
        // own, and the agent's permission requests reach it as the agent made them.
        ReadOptions::for_aap_client(codecs.aap.turn.client_tools.clone(), Default::default())
    } else {
        ReadOptions {
            client_tools: tools
                .iter()
                .filter(|t| *t != DEFAULT_TOOL)
                .cloned()
                .collect(),
            hitl: resolve_hitl(
                args.aap_hitl,
                DEFAULT_TOOL,
                &request,
                args.to == Dialect::AgUi,
            ),
            ..ReadOptions::default()
        }
    };
    codecs.tools = tools;
    let mut spec = PipelineSpec::new(args.from, args.to, ids);
    spec.options.clock = crate::http::clock::WALL;
    spec.codecs = codecs;
    if args.aap_json {
        spec.options.framing = crate::sse::Framing::Json;
    }
    spec.options.max_event_bytes = usize::try_from(args.max_event_bytes).unwrap_or(usize::MAX);
    let mut pipeline = Pipeline::new(spec)?;
    let mut input: Box<dyn Read> = match args.file.as_deref() {
        None => Box::new(std::io::stdin().lock()),
        Some(p) if p.as_os_str() == "-" => Box::new(std::io::stdin().lock()),
        Some(p) => {
            Box::new(std::fs::File::open(p).with_context(|| format!("opening {}", p.display()))?)
        }
    };
    let mut stdout = std::io::stdout().lock();
    if let Some(opening) = pipeline.opening() {
        stdout.write_all(opening)?;
    }
    let mut out = BytesMut::new();
    pipeline.begin(&mut out);
    stdout.write_all(&out)?;
    out.clear();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = input.read(&mut chunk).context("reading the stream")?;
        if n == 0 {
            pipeline.end(&mut out);
        } else {
            pipeline.push(&chunk[..n], &mut out);
        }
        stdout.write_all(&out)?;
        out.clear();
        if n == 0 || pipeline.is_finished() {
            break;
        }
    }
    stdout.flush()?;
    let stats = pipeline.stats();
    tracing::info!(
        events_in = stats.events_in,
        events_out = stats.events_out,
        fixups = stats.fixups,
        dropped = stats.dropped,
        "translated"
    );
    Ok(())
}

fn check(args: CheckArgs) -> anyhow::Result<()> {
    match args.config {
        Some(path) => {
            let overrides = Overrides {
                mappings: args.common.mappings.clone(),
                ..Overrides::default()
            };
            let config = config::load(Some(&path), &overrides)?;
            println!(
                "{}: ok ({} route(s), listen {})",
                path.display(),
                config.routes.len(),
                config.listen
            );
        }
        None => {
            if let Some(dir) = &args.common.mappings {
                config::load_mappings(dir)?;
            }
            println!("mappings: ok");
        }
    }
    Ok(())
}

async fn demo_agent(args: DemoArgs) -> anyhow::Result<()> {
    let pace = config::parse_duration(&args.pace).or_else(|e| {
        if args
            .pace
            .trim_start_matches('0')
            .trim_end_matches("ms")
            .is_empty()
        {
            Ok(std::time::Duration::ZERO)
        } else {
            bail!(e)
        }
    })?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("could not listen on {}", args.listen))?;
    let addr = listener.local_addr()?;
    let mut stdout = std::io::stdout().lock();
    writeln!(
        stdout,
        "dialect-proxy demo agent listening on http://{addr}"
    )?;
    stdout.flush()?;
    drop(stdout);
    tokio::select! {
        served = crate::demo::serve(listener, pace) => served?,
        () = shutdown_signal() => {}
    }
    Ok(())
}
