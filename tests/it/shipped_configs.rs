//! Every configuration a user may copy — the TOML blocks of the README, the files under
//! `deploy/`, the ConfigMap of the Kubernetes sidecar — loads without a problem, and the
//! compiled-in mapping tables are the files in `mappings/`.

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

#[test]
fn sidecar_configmap_loads() {
    let yaml = std::fs::read_to_string(root().join("deploy/kubernetes/sidecar.yaml")).unwrap();
    let start = yaml
        .find("dialect-proxy.toml: |")
        .expect("the ConfigMap holds the config");
    let toml: String = yaml[start..]
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("    ") || l.trim().is_empty())
        .map(|l| format!("{}\n", l.get(4..).unwrap_or("")))
        .collect();
    assert!(toml.contains("[[routes]]"));
    check_toml(&toml, "sidecar ConfigMap");
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
