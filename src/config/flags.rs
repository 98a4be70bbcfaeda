//! Settings from flags and the environment ([`Overrides`]), and the single route the flags
//! describe, written as the file would write it: it goes through the same builder as a
//! `[[routes]]` entry, so every check applies to both.

use std::path::PathBuf;

use toml::Spanned;

use super::aap_client::RawAapUpstream;
use super::aap_face::RawAap;
use super::limits::RawLimits;
use super::routes::RawRoute;
use crate::dialect::Dialect;

/// Settings from flags or the environment; `None` means "not given".
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub listen: Option<String>,
    pub admin_listen: Option<String>,
    pub client: Option<String>,
    pub upstream: Option<String>,
    pub upstream_dialect: Option<String>,
    pub agent_name: Option<String>,
    pub mappings: Option<PathBuf>,
    pub drain_timeout: Option<String>,
    pub stall_timeout: Option<String>,
    /// The listener's certificate chain and key (PEM paths), `--tls-cert`/`--tls-key`.
    pub tls_cert: Option<String>,
    pub tls_key: Option<String>,
    pub limits: RawLimits,
    /// API keys for every AAP face, from [`super::AAP_API_KEYS_ENV`] (comma-separated).
    pub aap_api_keys: Option<String>,
}

impl Overrides {
    /// Some single-route flag is given (`--upstream`, `--client`).
    pub(super) fn names_a_route(&self) -> bool {
        self.upstream.is_some() || self.client.is_some()
    }

    /// The route of `--client`, `--upstream`, `--upstream-dialect` and `--agent-name` at `/`;
    /// `None` without `--upstream`. `--agent-name` names the agent of an AAP face
    /// (`[routes.aap] name`) or of an AAP upstream (`[routes.aap_upstream] agent`).
    pub(super) fn route(&self) -> Option<RawRoute> {
        let given = |text: &str| Spanned::new(0..0, text.to_owned());
        let is_aap = |dialect: &Option<String>| {
            dialect.as_deref().and_then(|d| d.parse::<Dialect>().ok()) == Some(Dialect::Aap)
        };
        Some(RawRoute {
            path: given("/"),
            client: given(self.client.as_deref().unwrap_or("ag-ui")),
            upstream: given(self.upstream.as_deref()?),
            upstream_dialect: self.upstream_dialect.as_deref().map(given),
            limits: RawLimits::default(),
            keep_upstream_run_ids: false,
            forward_cookies: false,
            forward_headers: None,
            unknown_fields: None,
            agui: Default::default(),
            hai: Default::default(),
            tls: None,
            aap: is_aap(&self.client).then(|| {
                let mut aap = RawAap::default();
                aap.name = self.agent_name.as_deref().map(given);
                aap
            }),
            aap_upstream: is_aap(&self.upstream_dialect).then(|| {
                let mut upstream = RawAapUpstream::default();
                upstream.agent = self.agent_name.clone();
                upstream
            }),
            cors: None,
            auth: None,
            forward_authorization: false,
            upstream_auth: None,
        })
    }
}
