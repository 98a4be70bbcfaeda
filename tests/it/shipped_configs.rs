//! Every configuration a user may copy — the TOML blocks of the README, the files under
//! `deploy/`, the image's config and the ConfigMaps of the Kubernetes manifests — loads without
//! a problem, and the compiled-in mapping tables are the files in `mappings/`.

use std::path::Path;

use dialect_proxy::config::{load, Overrides};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn check_toml(text: &str, origin: &str) {
    let path = std::env::temp_dir().join(format!(
        "dp-shipped-{}-{}.toml",
        std::process::id(),
        origin.replace(['/', ' '], "_")
    ));
    std::fs::write(&path, text).unwrap();
    let result = load(Some(&path), &Overrides::default());
    std::fs::remove_file(&path).unwrap();
    if let Err(e) = result {
        panic!("{origin}: {e}");
    }
}

#[test]
fn readme_config_blocks_load() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let blocks: Vec<&str> = readme
        .split("```toml\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .collect();
    assert!(!blocks.is_empty(), "the README shows a config file");
    // The listener certificate the examples name, made for the test where they expect it.
    let pki = crate::support::tls::Pki::new();
    let leaf = pki.server("readme", &["localhost"]);
    for (i, block) in blocks.iter().enumerate() {
        let block = block
            .replace(
                "/etc/dialect-proxy/tls.crt",
                &leaf.cert.display().to_string(),
            )
            .replace(
                "/etc/dialect-proxy/tls.key",
                &leaf.key.display().to_string(),
            );
        check_toml(&block, &format!("README block {i}"));
    }
}

/// The config the image bakes in and those the Kubernetes manifests mount.
const DEPLOYED_CONFIGS: &[&str] = &[
    "deploy/image.toml",
    "deploy/kubernetes/base/dialect-proxy.toml",
    "deploy/kubernetes/overlays/aap-store/dialect-proxy.toml",
];

/// The `[routes.auth] api_keys_env` of every route; panics on a route without one.
fn key_variables(origin: &str, text: &str) -> Vec<String> {
    let config: toml::Value = toml::from_str(text).unwrap();
    let routes = config["routes"].as_array().unwrap();
    assert!(!routes.is_empty(), "{origin}: no route");
    let mut vars: Vec<String> = routes
        .iter()
        .map(|route| {
            let var = route
                .get("auth")
                .and_then(|auth| auth.get("api_keys_env"))
                .and_then(|v| v.as_str());
            var.unwrap_or_else(|| panic!("{origin}: route {} takes no key", route["path"]))
                .to_string()
        })
        .collect();
    vars.sort();
    vars.dedup();
    vars
}

/// `dialect-proxy check` on `path` with exactly the environment `vars` (set to a key).
fn check_with_keys(path: &Path, vars: &[&String]) -> std::process::Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_dialect-proxy"));
    cmd.env_clear().args(["check", "--config"]).arg(path);
    for var in vars {
        cmd.env(var, "key-for-check");
    }
    cmd.output().unwrap()
}

/// Each deployed config loads with the keys its pod gets from Secrets, and without any one of
/// them refuses to load: an unconfigured image never serves a route openly.
#[test]
fn deployed_configs_load_with_their_keys_and_refuse_without() {
    for origin in DEPLOYED_CONFIGS {
        let path = root().join(origin);
        let text = std::fs::read_to_string(&path).unwrap();
        let vars = key_variables(origin, &text);
        let all: Vec<&String> = vars.iter().collect();
        let ok = check_with_keys(&path, &all);
        assert!(
            ok.status.success(),
            "{origin}: {}",
            String::from_utf8_lossy(&ok.stderr)
        );
        for missing in &vars {
            let others: Vec<&String> = vars.iter().filter(|v| *v != missing).collect();
            let out = check_with_keys(&path, &others);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{origin} loaded without {missing}");
            assert!(
                stderr.contains(&format!("the environment variable {missing} is not set")),
                "{origin}: {stderr}"
            );
        }
    }
}

/// The ConfigMap of the Kubernetes base is the image's own config.
#[test]
fn kubernetes_base_mounts_the_image_config() {
    let image = std::fs::read_to_string(root().join("deploy/image.toml")).unwrap();
    let base =
        std::fs::read_to_string(root().join("deploy/kubernetes/base/dialect-proxy.toml")).unwrap();
    assert_eq!(image, base);
}

#[test]
fn check_command_accepts_the_deploy_config_and_reports_bad_ones() {
    let bin = env!("CARGO_BIN_EXE_dialect-proxy");
    let ok = std::process::Command::new(bin)
        .args(["check", "--config"])
        .arg(root().join("deploy/dialect-proxy.toml"))
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(String::from_utf8_lossy(&ok.stdout).contains("ok (3 route(s)"));

    let bad = std::env::temp_dir().join(format!("dp-bad-{}.toml", std::process::id()));
    std::fs::write(
        &bad,
        "[[routes]]\npath = \"/a\"\nclient = \"agui2\"\nupstream = \"http://x:1/\"\n",
    )
    .unwrap();
    let out = std::process::Command::new(bin)
        .args(["check", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    std::fs::remove_file(&bad).unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(":3:10: routes[0].client: unknown dialect \"agui2\""),
        "{stderr}"
    );
}
