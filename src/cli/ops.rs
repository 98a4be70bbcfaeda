//! The operator's commands around a running gateway: `drain` (the client of the admin's
//! `POST /drain`, for a pod's `preStop` hook), `install` (a copy of this executable for another
//! container to run `drain` with), and configuration reloads on SIGHUP or when the config file
//! changes.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use http::{Request, Uri};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use sha2::{Digest, Sha256};

use crate::config::{self, Overrides};
use crate::server::Reloader;
use crate::telemetry::metrics::Metrics;

/// How often a watched config file is read for changes.
const WATCH_INTERVAL: Duration = Duration::from_secs(2);

/// `dialect-proxy drain --admin ADDR`: asks the gateway to drain and waits until it has.
pub async fn drain(admin: &str, timeout: Duration) -> anyhow::Result<()> {
    let base = if admin.contains("://") {
        admin.trim_end_matches('/').to_owned()
    } else {
        format!("http://{admin}")
    };
    let uri: Uri = format!("{base}/drain")
        .parse()
        .with_context(|| format!("{admin:?} is not an admin address (host:port)"))?;
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let request = Request::post(uri.clone())
        .body(Empty::new())
        .context("building the request")?;
    let response = tokio::time::timeout(timeout, async {
        let response = client.request(request).await?;
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        Ok::<_, anyhow::Error>((status, body))
    })
    .await
    .with_context(|| format!("{uri}: not drained within {}s", timeout.as_secs()))?
    .with_context(|| format!("POST {uri}"))?;
    let (status, body) = response;
    let text = String::from_utf8_lossy(&body);
    if !status.is_success() {
        bail!("POST {uri}: {status}: {}", text.trim());
    }
    println!("drained ({})", text.trim());
    Ok(())
}

/// `dialect-proxy install DIR`: copies the running executable to `DIR/dialect-proxy`, written
/// aside and renamed into place, so a reader never runs half a file.
pub fn install(dir: &Path) -> anyhow::Result<PathBuf> {
    let source = std::env::current_exe().context("locating the running executable")?;
    let target = dir.join("dialect-proxy");
    let partial = dir.join(".dialect-proxy.partial");
    std::fs::copy(&source, &partial)
        .with_context(|| format!("copying {} to {}", source.display(), partial.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("making {} executable", partial.display()))?;
    }
    std::fs::rename(&partial, &target)
        .with_context(|| format!("renaming {} to {}", partial.display(), target.display()))?;
    Ok(target)
}

/// What a reload needs: where the configuration comes from and where it goes.
#[derive(Clone)]
pub struct Reloads {
    pub file: Option<PathBuf>,
    pub overrides: Overrides,
    pub reloader: Reloader,
    pub metrics: Arc<Metrics>,
}

impl Reloads {
    /// Re-reads the configuration and applies it, or keeps the running one when it has a
    /// problem. Either way the outcome is logged and counted.
    pub async fn reload(&self, cause: &'static str) {
        let (file, overrides) = (self.file.clone(), self.overrides.clone());
        let loaded = tokio::task::spawn_blocking(move || config::load(file.as_deref(), &overrides))
            .await
            .map_err(|joined| joined.to_string())
            .and_then(|loaded| loaded.map_err(|problem| problem.to_string()));
        let config = match loaded {
            Ok(config) => config,
            Err(error) => {
                self.metrics.config_reload(false);
                tracing::error!(cause, %error, "configuration rejected; the running one stays");
                return;
            }
        };
        let routes = config.routes.len();
        let kept = self.reloader.apply(config);
        self.metrics.config_reload(true);
        tracing::info!(cause, routes, "configuration reloaded: new requests use it");
        if !kept.is_empty() {
            tracing::warn!(
                settings = %kept.join(", "),
                "changed settings take effect only at a restart; their running values stay"
            );
        }
    }

    /// Reloads on every SIGHUP, for as long as the returned future runs. The handler is in
    /// place when this returns (a SIGHUP before it would end the process).
    #[cfg(unix)]
    pub fn on_sighup(self) -> impl std::future::Future<Output = ()> {
        use tokio::signal::unix::{signal, SignalKind};
        let hangups = signal(SignalKind::hangup());
        async move {
            let mut hangups = match hangups {
                Ok(hangups) => hangups,
                Err(error) => {
                    tracing::warn!(%error, "SIGHUP handler unavailable; reloads need a restart");
                    return;
                }
            };
            while hangups.recv().await.is_some() {
                self.reload("SIGHUP").await;
            }
        }
    }

    /// Reloads whenever the config file's content changes from `seen` (checked every two
    /// seconds; a Kubernetes ConfigMap volume swaps its files this way), for as long as the
    /// task runs. `seen` is the [`file_digest`] taken before the running configuration was
    /// loaded, so a change made while the gateway started is not missed.
    pub async fn watch(self, mut seen: Option<[u8; 32]>) {
        let Some(file) = self.file.clone() else {
            return;
        };
        let mut ticks = tokio::time::interval(WATCH_INTERVAL);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let path = file.clone();
            let now = tokio::task::spawn_blocking(move || file_digest(&path))
                .await
                .ok()
                .flatten();
            // A file that cannot be read for a moment (mid-swap) is no change.
            if now.is_some() && now != seen {
                seen = now;
                self.reload("config file changed").await;
            }
        }
    }
}

/// What identifies the content of `file`, or `None` when it cannot be read.
pub fn file_digest(file: &Path) -> Option<[u8; 32]> {
    let bytes = std::fs::read(file).ok()?;
    Some(Sha256::digest(&bytes).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_copies_this_executable_and_makes_it_runnable() {
        let dir = std::env::temp_dir().join(format!("dp-install-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let target = install(&dir).unwrap();
        let copied = std::fs::read(&target).unwrap();
        let original = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert!(copied == original, "a byte-for-byte copy");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&target).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o755);
        }
        assert!(!dir.join(".dialect-proxy.partial").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn install_into_a_missing_directory_is_an_error_naming_it() {
        let dir = std::env::temp_dir().join("dp-install-missing/nested");
        let error = install(&dir).unwrap_err();
        assert!(
            format!("{error:#}").contains("dp-install-missing"),
            "{error:#}"
        );
    }
}
