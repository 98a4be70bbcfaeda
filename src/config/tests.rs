use super::*;
use crate::dialect::agui::{ProtocolVersion, ReaderOptions, Timestamps, UnknownFields};
use crate::dialect::Dialect;
use toml::Spanned;

fn file(text: &str) -> Result<Config, ConfigError> {
    // Tests run in parallel: each call writes its own directory.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("dp-config-{}-{call}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("dialect-proxy.toml");
    std::fs::write(&path, text).unwrap();
    let result = load(Some(&path), &Overrides::default());
    std::fs::remove_dir_all(&dir).unwrap();
    result
}

fn flags(upstream: &str) -> Overrides {
    Overrides {
        upstream: Some(upstream.into()),
        ..Overrides::default()
    }
}

#[test]
fn durations() {
    assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
    assert_eq!(parse_duration("15s").unwrap(), Duration::from_secs(15));
    assert_eq!(parse_duration("15").unwrap(), Duration::from_secs(15));
    assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
    assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
    for bad in ["", "s", "-1s", "0s", "0.0000001ms", "10 parsecs", "1d"] {
        assert!(parse_duration(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn single_route_flags() {
    let mut o = flags("http://127.0.0.1:9000/agent");
    o.limits.idle_timeout = Some(Spanned::new(0..0, "2s".into()));
    let c = load(None, &o).unwrap();
    assert_eq!(c.listen.to_string(), DEFAULT_LISTEN);
    assert_eq!(c.routes.len(), 1);
    let r = &c.routes[0];
    assert_eq!(
        (r.client, r.upstream_dialect),
        (Dialect::AgUi, Dialect::AgUi)
    );
    assert_eq!(r.limits.idle_timeout, Duration::from_secs(2));
    assert_eq!(r.limits.heartbeat_interval, DEFAULT_HEARTBEAT_INTERVAL);
    assert!(c.route("/anything/at/all").is_some());
    assert_eq!(
        load(None, &flags(BUILTIN_DEMO)).unwrap().routes[0].upstream,
        Upstream::BuiltinDemo
    );
}

#[test]
fn flag_mode_needs_an_upstream_and_known_dialects() {
    let err = load(None, &Overrides::default()).unwrap_err().to_string();
    assert!(err.contains("--upstream"), "{err}");
    let mut o = flags("http://x:1/");
    o.upstream_dialect = Some("agui2".into());
    let err = load(None, &o).unwrap_err().to_string();
    assert!(
        err.contains("--upstream-dialect") && err.contains("agui2"),
        "{err}"
    );
    let err = load(None, &flags("ftp://x/")).unwrap_err().to_string();
    assert!(err.contains("not an http:// or https:// URL"), "{err}");
}

#[test]
fn a_file_with_several_routes() {
    let c = file(
        r#"
listen = "0.0.0.0:9999"
drain_timeout = "5s"

[limits]
idle_timeout = "600s"

[[routes]]
path = "/agents/a"
client = "ag-ui"
upstream = "http://127.0.0.1:9001/run"

[[routes]]
path = "/"
client = "ag-ui"
upstream = "builtin:demo"
upstream_dialect = "ag-ui"
unknown_fields = "drop"
[routes.agui]
timestamps = "passthrough"
system_exception = "passthrough"
content_parts = "legacy_binary"
protocol_version = "1.1"
[routes.limits]
heartbeat_interval = "1s"
max_event_bytes = 4096
"#,
    )
    .unwrap();
    assert_eq!(c.listen.port(), 9999);
    assert_eq!(c.drain_timeout, Duration::from_secs(5));
    let a = c.route("/agents/a").unwrap();
    assert_eq!(a.limits.idle_timeout, Duration::from_secs(600));
    assert!(matches!(a.upstream, Upstream::Url(_)));
    // Segment boundaries: /agents/ab is not under /agents/a.
    assert_eq!(c.route("/agents/ab").unwrap().path, "/");
    assert_eq!(c.route("/agents/a/sub").unwrap().path, "/agents/a");
    let root = c.route("/other").unwrap();
    assert_eq!(root.limits.max_event_bytes, 4096);
    assert_eq!(root.limits.heartbeat_interval, Duration::from_secs(1));
    assert_eq!(root.unknown_fields, UnknownFields::Drop);
    assert_eq!(root.reader.timestamps, Timestamps::Passthrough);
    assert!(root.reader.system_exception_passthrough && !root.reader.drop_unrooted_patches);
    assert!(root.request_profile.legacy_binary_parts && !root.request_profile.tool_content_as_text);
    assert_eq!(root.protocol_version, ProtocolVersion::V1_1);
    assert_eq!(a.reader, ReaderOptions::default());
    assert_eq!(
        a.protocol_version,
        ProtocolVersion::V1_0,
        "1.0 unless a route says 1.1"
    );
}

#[test]
fn every_problem_is_reported_with_line_column_and_key() {
    let err = file(
        r#"[[routes]]
path = "agents"
client = "ag-ui"
upstream = "http://127.0.0.1:9001/"
upstream_dialect = "agui2"

[[routes]]
path = "/b"
client = "ag-ui"
upstream = "http://127.0.0.1:9001/"
[routes.limits]
idle_timeout = "forever"
[routes.agui]
tool_content = "text"
protocol_version = "2.0"
"#,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(":5:20: routes[0].upstream_dialect: unknown dialect \"agui2\""),
        "{err}"
    );
    assert!(err.contains(":2:8: routes[0].path"), "{err}");
    assert!(
        err.contains(":12:16: routes[1].limits.idle_timeout"),
        "{err}"
    );
    assert!(err.contains(":14:16: routes[1].agui.tool_content: unknown value \"text\" (expected parts or string)"), "{err}");
    assert!(
        err.contains(
            "routes[1].agui.protocol_version: unknown value \"2.0\" (expected 1.0 or 1.1)"
        ),
        "{err}"
    );
}

#[test]
fn aap_upstream_tables_are_read_and_checked() {
    let config = file(
        "[[routes]]\npath = \"/a\"\nclient = \"ag-ui\"\nupstream = \"http://x:1/v1\"\nupstream_dialect = \"aap\"\n[routes.aap_upstream]\nagent = \"support\"\nstream_mode = \"message\"\nhitl = \"interrupt\"\nunconfirmable = \"error\"\nhistory_divergence = \"reject\"\non_session_lost = \"error\"\ncontext = \"drop\"\nlimit_stops = \"run_error\"\napi_key = \"k\"\noptions = { model = \"fast\" }\ntools = [{ name = \"web_fetch\", trust = true }]\n",
    )
    .unwrap();
    let up = config.routes[0].aap_upstream.as_ref().unwrap();
    assert_eq!(up.agent.as_deref(), Some("support"));
    assert!(!up.fork_on_divergence && !up.recreate_lost_sessions && !up.context_as_system);
    assert_eq!(up.api_key.as_deref(), Some("k"));
    assert_eq!(up.options["model"], "fast");
    assert_eq!(up.tools.as_ref().unwrap()[0].name, "web_fetch");
    let err = file(
        "[[routes]]\npath = \"/a\"\nclient = \"ag-ui\"\nupstream = \"http://x:1/v1\"\nupstream_dialect = \"aap\"\n[routes.aap_upstream]\nstream_mode = \"fast\"\nhistory_divergence = \"maybe\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("stream_mode") && err.contains("history_divergence"),
        "{err}"
    );
    let err = file(
        "[[routes]]\npath = \"/a\"\nclient = \"ag-ui\"\nupstream = \"http://x:1/v1\"\n[routes.aap_upstream]\nagent = \"x\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("aap_upstream"), "{err}");
}

#[test]
fn unknown_keys_and_missing_routes_are_errors() {
    let err = file("listen = \"127.0.0.1:1\"\nlisten_port = 3\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("listen_port") && err.contains("line 2"),
        "{err}"
    );
    let err = file("listen = \"127.0.0.1:1\"\n").unwrap_err().to_string();
    assert!(err.contains("no [[routes]]"), "{err}");
}

#[test]
fn every_dialect_pair_loads_and_each_aap_side_gets_its_table() {
    // An AAP face in front of an AAP agent: `--agent-name` names both the face's agent and the
    // agent it runs on.
    let mut o = flags("http://x:1/v1");
    o.upstream_dialect = Some("aap".into());
    o.client = Some("aap".into());
    o.agent_name = Some("demo".into());
    let config = load(None, &o).unwrap_or_else(|e| panic!("aap/aap: {e}"));
    let route = &config.routes[0];
    assert_eq!(route.aap.as_ref().unwrap().name, "demo");
    assert_eq!(
        route.aap_upstream.as_ref().unwrap().agent.as_deref(),
        Some("demo")
    );
    // AG-UI and HAI clients in front of an AAP agent, which `--agent-name` names.
    for client in ["ag-ui", "hai"] {
        let mut o = flags("http://x:1/v1");
        o.client = Some(client.into());
        o.upstream_dialect = Some("aap".into());
        o.agent_name = Some("support".into());
        let config = load(None, &o).unwrap_or_else(|e| panic!("{client}: {e}"));
        let up = config.routes[0].aap_upstream.as_ref().unwrap();
        assert_eq!(up.agent.as_deref(), Some("support"));
        assert!(up.fork_on_divergence && up.recreate_lost_sessions);
    }
    // An AAP face needs its agent's name.
    let mut o = flags("http://x:1/");
    o.client = Some("aap".into());
    let err = load(None, &o).unwrap_err().to_string();
    assert!(err.contains("--agent-name"), "{err}");
    o.agent_name = Some("demo".into());
    o.aap_api_keys = Some(" k1, ,k2 ".into());
    let config = load(None, &o).unwrap();
    let agent = config.routes[0].aap.as_ref().unwrap();
    assert_eq!(agent.name, "demo");
    assert_eq!(agent.api_keys, ["k1", "k2"]);
    // HAI in either seat is built.
    for (client, upstream) in [("hai", "ag-ui"), ("ag-ui", "hai"), ("hai", "hai")] {
        let mut o = flags("http://x:1/");
        o.client = Some(client.into());
        o.upstream_dialect = Some(upstream.into());
        let config = load(None, &o).unwrap_or_else(|e| panic!("{client}/{upstream}: {e}"));
        assert_eq!(config.routes[0].client.as_str(), client);
    }
    // The demo agent only speaks AG-UI.
    let mut o = flags("builtin:demo");
    o.upstream_dialect = Some("hai".into());
    let err = load(None, &o).unwrap_err().to_string();
    assert!(err.contains("demo agent speaks ag-ui"), "{err}");
}

#[test]
fn hai_route_options_parse_and_bad_values_name_their_line() {
    let config = file(
        "[[routes]]\npath = \"/chat\"\nclient = \"hai\"\nupstream = \"builtin:demo\"\n\
         [routes.hai]\ndelta_encoding = \"plain_text\"\ntool_args = \"stream\"\n\
         snapshot_name = \"MESSAGES_SNAPSHOT\"\nrun_ids = false\ncollaboration = \"subagent\"\n",
    )
    .unwrap();
    let hai = &config.routes[0].hai;
    use crate::dialect::hai::{Collaboration, DeltaEncoding, SnapshotName, ToolArgsEncoding};
    assert_eq!(hai.writer.delta_encoding, DeltaEncoding::PlainText);
    assert_eq!(hai.writer.tool_args, ToolArgsEncoding::Stream);
    assert_eq!(hai.writer.snapshot_name, SnapshotName::Plural);
    assert!(!hai.writer.run_ids);
    assert_eq!(hai.collaboration, Collaboration::Subagent);
    let err = file(
        "[[routes]]\npath = \"/chat\"\nclient = \"hai\"\nupstream = \"builtin:demo\"\n\
         [routes.hai]\ndelta_encoding = \"base64\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(":6:18: routes[0].hai.delta_encoding: unknown value \"base64\""),
        "{err}"
    );
}

#[test]
fn shipped_configs_are_valid() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    for dir in ["deploy", "examples"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "toml") {
                let text = std::fs::read_to_string(&path).unwrap();
                if text.contains("\napi_keys_env") {
                    // Keys from the environment: tests/it/shipped_configs.rs loads these in a
                    // process of their own with the variables set (and without, to see them
                    // refused); setting them here would leak into every other test.
                    continue;
                }
                load(Some(&path), &Overrides::default())
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                checked += 1;
            }
        }
    }
    assert!(checked >= 1, "expected at least one shipped config");
}

#[test]
fn aap_routes_describe_their_agent_and_bad_entries_name_their_key() {
    let config = file(
        "[[routes]]\npath = \"/aap\"\nclient = \"aap\"\nupstream = \"builtin:demo\"\n\
         [routes.aap]\nname = \"a\"\nversion = \"1.2.3\"\nresult_encoding = \"word\"\n\
         [[routes.aap.options]]\ntype = \"select\"\nname = \"model\"\ndefault = \"fast\"\noptions = [\"fast\", \"slow\"]\n\
         [[routes.aap.tools]]\nname = \"web_fetch\"\ndescription = \"Fetch\"\n\
         [[routes]]\npath = \"/aap\"\nclient = \"aap\"\nupstream = \"builtin:demo\"\n[routes.aap]\nname = \"b\"\n\
         [sessions]\nmax_sessions = 5\npage_size = 2\nidle_timeout = \"1h\"\n",
    )
    .unwrap();
    let a = config.routes[0].aap.as_ref().unwrap();
    assert_eq!((a.name.as_str(), a.version.as_str()), ("a", "1.2.3"));
    assert_eq!(
        a.result_encoding,
        crate::dialect::confirm::ResultEncoding::Word
    );
    assert_eq!(
        a.options[0].options.as_deref(),
        Some(&["fast".to_owned(), "slow".to_owned()][..])
    );
    assert_eq!(
        a.tools[0].parameters,
        serde_json::json!({"type":"object","properties":{}})
    );
    assert_eq!(config.sessions.max_sessions, 5);
    assert_eq!(config.sessions.page_size, 2);
    assert_eq!(config.sessions.idle_timeout, Duration::from_secs(3600));

    for (text, needle) in [
        // a select whose default is not among its values
        ("[routes.aap]\nname = \"a\"\n[[routes.aap.options]]\ntype = \"select\"\nname = \"m\"\ndefault = \"x\"\noptions = [\"y\"]\n", "routes[0].aap.options[0].options"),
        // a tool without its description
        ("[routes.aap]\nname = \"a\"\n[[routes.aap.tools]]\nname = \"t\"\n", "routes[0].aap.tools[0]"),
        ("[routes.aap]\nresult_encoding = \"yes\"\nname = \"a\"\n", "routes[0].aap.result_encoding"),
        ("[routes.aap]\ntitle = \"no name\"\n", "routes[0].aap.name"),
    ] {
        let err = file(&format!(
            "[[routes]]\npath = \"/aap\"\nclient = \"aap\"\nupstream = \"builtin:demo\"\n{text}"
        ))
        .unwrap_err()
        .to_string();
        assert!(err.contains(needle), "{needle}: {err}");
    }
    // Two agents of one name, or an AAP face sharing its path with another dialect.
    let err = file(
        "[[routes]]\npath = \"/x\"\nclient = \"aap\"\nupstream = \"builtin:demo\"\n[routes.aap]\nname = \"a\"\n\
         [[routes]]\npath = \"/x\"\nclient = \"aap\"\nupstream = \"builtin:demo\"\n[routes.aap]\nname = \"a\"\n\
         [[routes]]\npath = \"/y\"\nclient = \"aap\"\nupstream = \"builtin:demo\"\n[routes.aap]\nname = \"b\"\n\
         [[routes]]\npath = \"/y\"\nclient = \"ag-ui\"\nupstream = \"builtin:demo\"\n\
         [[routes]]\npath = \"/z\"\nclient = \"hai\"\nupstream = \"builtin:demo\"\n[routes.aap]\nname = \"c\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("serve the agent \"a\""), "{err}");
    assert!(err.contains("/y is both an AAP face"), "{err}");
    assert!(
        err.contains("routes[4].aap: only a route with client = \"aap\""),
        "{err}"
    );
}

fn flag_error(o: &Overrides) -> String {
    load(None, o).unwrap_err().to_string()
}

#[test]
fn several_problems_are_reported_at_once_each_at_its_place() {
    let err = file(
        "listen = 5\nadmin_listen = \"localhost\"\ncolour = \"blue\"\n\
         [[routes]]\npath = \"/a\"\nclient = \"ag-ui\"\nupstream = 9001\n\
         [[routes]]\npath = \"/b\"\nclient = \"hai\"\nupstream = \"builtin:demo\"\nkeep_upstream_run_ids = \"yes\"\n\
         [[routes]]\npath = \"/c\"\nclient = \"ag-ui\"\nupstream = \"builtin:demo\"\nshape = \"round\"\n\
         [[routes]]\nclient = \"ag-ui\"\nupstream = \"builtin:demo\"\n\
         [[routes]]\npath = \"/e\"\nclient = \"agui2\"\nupstream = \"builtin:demo\"\n",
    )
    .unwrap_err()
    .to_string();
    for expected in [
        ":1:10: listen: invalid type: integer `5`, expected a string\n  line 1 | listen = 5\n         |          ^\n",
        ":2:16: admin_listen: \"localhost\" is not an address like 127.0.0.1:9901",
        ":3:1: colour: unknown field `colour`, expected one of `listen`,",
        ":7:12: routes[0].upstream: invalid type: integer `9001`, expected a string",
        ":12:25: routes[1].keep_upstream_run_ids: invalid type: string \"yes\", expected a boolean",
        ":17:1: routes[2].shape: unknown field `shape`",
        ":18:1: routes[3]: missing field `path`",
        ":23:10: routes[4].client: unknown dialect \"agui2\"",
    ] {
        assert!(err.contains(expected), "{expected}\n---\n{err}");
    }
    // In file order, one problem per line (a TOML error also shows its line).
    let firsts: Vec<&str> = err.lines().filter(|l| !l.starts_with("  ")).collect();
    assert_eq!(firsts.len(), 8, "{err}");
    let lines: Vec<usize> = firsts
        .iter()
        .map(|l| l.split(':').nth(1).and_then(|n| n.parse().ok()).unwrap())
        .collect();
    assert!(lines.windows(2).all(|w| w[0] < w[1]), "{lines:?}");
}

#[test]
fn listen_from_the_file_is_checked_at_its_place() {
    let routes = "[[routes]]\npath = \"/\"\nclient = \"ag-ui\"\nupstream = \"builtin:demo\"\n";
    let err = file(&format!(
        "listen = \"nowhere\"\nadmin_listen = \"127.0.0.1\"\n{routes}"
    ))
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(":1:10: listen: \"nowhere\" is not an address like 127.0.0.1:8080"),
        "{err}"
    );
    assert!(
        err.contains(":2:16: admin_listen: \"127.0.0.1\" is not an address like 127.0.0.1:9901"),
        "{err}"
    );
    // A dotted key makes a table without a span of its own; its values keep theirs.
    let err = file(&format!("{routes}limits.idle_timeout = \"soon\"\n"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(":5:23: routes[0].limits.idle_timeout"),
        "{err}"
    );
    // A syntax error ends the reading, at its place.
    let err = file("listen = \"127.0.0.1:1\n").unwrap_err().to_string();
    assert!(err.contains("dialect-proxy.toml:1:"), "{err}");
    assert!(err.contains("  line 1 | listen = \"127.0.0.1:1"), "{err}");
}

#[test]
fn two_routes_on_one_path_are_a_conflict_unless_they_form_one_aap_face() {
    let route = |path: &str, client: &str| {
        format!(
            "[[routes]]\npath = \"{path}\"\nclient = \"{client}\"\nupstream = \"builtin:demo\"\n"
        )
    };
    let err = file(&format!(
        "{}{}{}",
        route("/a", "ag-ui"),
        route("/b", "ag-ui"),
        route("/a/", "hai")
    ))
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(":10:8: routes[2].path: two routes on /a would take the same requests; give them different paths (the other is routes[0], "),
        "{err}"
    );
    assert!(err.ends_with("dialect-proxy.toml:2:8)"), "{err}");
    let err = file(&format!("{}{}", route("/", "ag-ui"), route("/", "ag-ui")))
        .unwrap_err()
        .to_string();
    assert!(err.contains("routes[1].path: two routes on /"), "{err}");
    // AAP routes on one path serving different agents are one face.
    let aap = |name: &str| format!("{}[routes.aap]\nname = \"{name}\"\n", route("/v1", "aap"));
    let config = file(&format!("{}{}", aap("a"), aap("b"))).unwrap();
    assert_eq!(config.routes.len(), 2);
    // Distinct paths, and nested ones, are fine.
    let config = file(&format!("{}{}", route("/a", "ag-ui"), route("/a/b", "hai"))).unwrap();
    assert_eq!(config.route("/a/b/c").unwrap().client, Dialect::Hai);
}

#[test]
fn flag_problems_are_reported_under_the_flag_name() {
    assert_eq!(
        flag_error(&flags("ftp://x/")),
        "flags: --upstream: \"ftp://x/\" is not an http:// or https:// URL, or builtin:demo"
    );
    let mut o = flags("builtin:demo");
    o.listen = Some("nowhere".into());
    o.admin_listen = Some("127.0.0.1".into());
    o.drain_timeout = Some("soon".into());
    o.limits.idle_timeout = Some(Spanned::new(0..0, "forever".into()));
    o.client = Some("agui2".into());
    let err = flag_error(&o);
    for expected in [
        "flags: --listen: \"nowhere\" is not an address like 127.0.0.1:8080",
        "flags: --admin-listen: \"127.0.0.1\" is not an address",
        "flags: --drain-timeout: invalid duration \"soon\"",
        "flags: --idle-timeout: invalid duration \"forever\"",
        "flags: --client: unknown dialect \"agui2\"",
    ] {
        assert!(err.contains(expected), "{expected}\n---\n{err}");
    }
    assert!(!err.contains("flags:1:1"), "{err}");
}

#[test]
fn the_flags_route_is_built_like_the_same_route_in_a_file() {
    let cases = [
        (
            "aap",
            "ag-ui",
            "builtin:demo",
            "[routes.aap]\nname = \"demo\"\n",
        ),
        (
            "ag-ui",
            "aap",
            "http://x:1/v1",
            "[routes.aap_upstream]\nagent = \"demo\"\n",
        ),
        ("hai", "ag-ui", "http://x:1/", ""),
    ];
    for (client, upstream_dialect, upstream, table) in cases {
        let mut o = flags(upstream);
        o.client = Some(client.into());
        o.upstream_dialect = Some(upstream_dialect.into());
        o.agent_name = Some("demo".into());
        o.aap_api_keys = Some("k1".into());
        let from_flags = load(None, &o).unwrap_or_else(|e| panic!("{client}: {e}"));
        let text = format!(
            "[[routes]]\npath = \"/\"\nclient = \"{client}\"\nupstream = \"{upstream}\"\n\
             upstream_dialect = \"{upstream_dialect}\"\n{table}"
        );
        let dir = std::env::temp_dir().join(format!("dp-same-{}-{client}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("dialect-proxy.toml");
        std::fs::write(&path, text).unwrap();
        let env_only = Overrides {
            aap_api_keys: Some("k1".into()),
            ..Overrides::default()
        };
        let from_file = load(Some(&path), &env_only);
        std::fs::remove_dir_all(&dir).unwrap();
        let from_file = from_file.unwrap_or_else(|e| panic!("{client}: {e}"));
        assert_eq!(
            format!("{:?}", from_flags.routes),
            format!("{:?}", from_file.routes),
            "{client} -> {upstream_dialect}"
        );
    }
    // The file's checks apply to the flags' route: an AAP face needs a name, under the flag's.
    let mut o = flags("builtin:demo");
    o.client = Some("aap".into());
    o.agent_name = Some("  ".into());
    assert_eq!(
        flag_error(&o),
        "flags: --agent-name: an AAP face needs its agent's name"
    );
    let err = file(
        "[[routes]]\npath = \"/\"\nclient = \"aap\"\nupstream = \"builtin:demo\"\n[routes.aap]\nname = \"  \"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(":6:8: routes[0].aap.name: an AAP face needs its agent's name"),
        "{err}"
    );
    // And the file's route-level checks name the route.
    let err = file(
        "[[routes]]\npath = \"/\"\nclient = \"ag-ui\"\nupstream = \"builtin:demo\"\nupstream_dialect = \"hai\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(":1:1: routes[0]: the built-in demo agent speaks ag-ui, not hai"),
        "{err}"
    );
    let mut o = flags("builtin:demo");
    o.upstream_dialect = Some("hai".into());
    assert!(flag_error(&o).starts_with("flags: route: the built-in demo agent speaks ag-ui"));
}

#[test]
fn a_mappings_directory_overrides_the_builtin_table() {
    let dir = std::env::temp_dir().join(format!("dp-mappings-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join(crate::mapping::AGUI_ALIASES_FILE),
        "[roles]\nrobot = \"assistant\"\n",
    )
    .unwrap();
    let m = load_mappings(&dir).unwrap();
    assert!(m.agui.keys.is_empty());
    assert!(m.agui.roles.contains_key("robot"));
    // A bad table is one more problem of the config that names the directory.
    std::fs::write(
        dir.join(crate::mapping::HAI_TABLES_FILE),
        "[events]\nFOO = \"BAR\"\n",
    )
    .unwrap();
    let o = Overrides {
        mappings: Some(dir.clone()),
        ..flags("http://x:1/")
    };
    let err = load(None, &o).unwrap_err().to_string();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        err.ends_with("hai.toml: events.FOO: unknown HAI event type \"BAR\""),
        "{err}"
    );
    // A directory without the file keeps the default.
    let m = load_mappings(Path::new("/nonexistent-dir")).unwrap();
    assert!(!m.agui.keys.is_empty());
}

// ---------------------------------------------------------------- TLS

/// A directory with PEM files made for the test: `ca.pem`, `cert.pem` + `key.pem` (signed by
/// the CA), and `other-key.pem` (belongs to no certificate here). Removed on drop.
struct Pems(std::path::PathBuf);

impl Pems {
    fn new() -> Pems {
        static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("dp-config-pem-{}-{call}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
        std::fs::write(dir.join("cert.pem"), cert.pem()).unwrap();
        std::fs::write(dir.join("key.pem"), key.serialize_pem()).unwrap();
        let other = rcgen::KeyPair::generate().unwrap();
        std::fs::write(dir.join("other-key.pem"), other.serialize_pem()).unwrap();
        Pems(dir)
    }

    /// The path of one file, as a TOML string's content.
    fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for Pems {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn https_route(tls: &str) -> String {
    format!("[[routes]]\npath = \"/\"\nclient = \"ag-ui\"\nupstream = \"https://127.0.0.1:9443/agent\"\n{tls}")
}

#[test]
fn https_upstreams_take_a_tls_table_and_share_files_by_value() {
    let pems = Pems::new();
    let c = file(&format!(
        "{}[routes.tls]\nca_file = \"{}\"\nclient_cert = \"{}\"\nclient_key = \"{}\"\n\
         [[routes]]\npath = \"/system\"\nclient = \"ag-ui\"\nupstream = \"https://example.com/agent\"\n\
         [[routes]]\npath = \"/plain\"\nclient = \"ag-ui\"\nupstream = \"http://127.0.0.1:9001/agent\"\n",
        https_route(""),
        pems.path("ca.pem"),
        pems.path("cert.pem"),
        pems.path("key.pem"),
    ))
    .unwrap();
    let tls = c.route("/").unwrap().tls.as_ref().unwrap();
    assert_eq!(tls.files.ca_file, Some(pems.0.join("ca.pem")));
    assert_eq!(tls.files.client_key, Some(pems.0.join("key.pem")));
    assert!(tls.config.client_auth_cert_resolver.has_certs());
    let system = c.route("/system").unwrap().tls.as_ref().unwrap();
    assert_eq!(system.files, crate::tls::ClientFiles::default());
    assert!(!system.config.client_auth_cert_resolver.has_certs());
    assert!(c.route("/plain").unwrap().tls.is_none());
    assert!(c.tls.is_none(), "the listener stays plaintext");
    // The flags' route reaches an https upstream with the system roots.
    let flags_route = load(None, &flags("https://example.com/agent")).unwrap();
    assert!(flags_route.routes[0].tls.is_some());
}

#[test]
fn routes_tls_problems_are_reported_at_their_keys() {
    let pems = Pems::new();
    // client_cert without client_key, and a CA file that is not there.
    let err = file(&https_route(&format!(
        "[routes.tls]\nca_file = \"{}\"\nclient_cert = \"{}\"\n",
        pems.path("missing.pem"),
        pems.path("cert.pem"),
    )))
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(":6:11: routes[0].tls.ca_file: cannot read ") && err.contains("missing.pem"),
        "{err}"
    );
    assert!(
        err.contains(
            ":7:15: routes[0].tls.client_cert: is given without client_key; give both or neither"
        ),
        "{err}"
    );
    let err = file(&https_route(&format!(
        "[routes.tls]\nclient_key = \"{}\"\n",
        pems.path("key.pem")
    )))
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(":6:14: routes[0].tls.client_key: is given without client_cert"),
        "{err}"
    );
    // A key that does not belong to the certificate; a key file that holds a certificate.
    let err = file(&https_route(&format!(
        "[routes.tls]\nclient_cert = \"{}\"\nclient_key = \"{}\"\n",
        pems.path("cert.pem"),
        pems.path("other-key.pem"),
    )))
    .unwrap_err()
    .to_string();
    assert!(err.contains(":7:14: routes[0].tls.client_key: "), "{err}");
    assert!(err.contains("other-key.pem"), "{err}");
    let err = file(&https_route(&format!(
        "[routes.tls]\nca_file = \"{}\"\nclient_cert = \"{}\"\nclient_key = \"{}\"\n",
        pems.path("key.pem"),
        pems.path("cert.pem"),
        pems.path("cert.pem"),
    )))
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(":6:11: routes[0].tls.ca_file: ") && err.contains("holds no PEM certificate"),
        "{err}"
    );
    assert!(
        err.contains(":8:14: routes[0].tls.client_key: ")
            && err.contains("holds no PEM private key"),
        "{err}"
    );
    // An unknown key in the table, and a table on a plain http upstream.
    let err = file(&https_route("[routes.tls]\nverify = false\n"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("routes[0].tls.verify: unknown field `verify`"),
        "{err}"
    );
    let err = file(
        "[[routes]]\npath = \"/\"\nclient = \"ag-ui\"\nupstream = \"http://127.0.0.1:1/\"\n[routes.tls]\nca_file = \"x.pem\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(":1:1: routes[0].tls: only an https:// upstream has a [routes.tls] table"),
        "{err}"
    );
}

#[test]
fn listener_tls_is_read_from_the_file_or_the_flags() {
    let pems = Pems::new();
    let routes = "[[routes]]\npath = \"/\"\nclient = \"ag-ui\"\nupstream = \"builtin:demo\"\n";
    let c = file(&format!(
        "tls_cert = \"{}\"\ntls_key = \"{}\"\n{routes}",
        pems.path("cert.pem"),
        pems.path("key.pem")
    ))
    .unwrap();
    let tls = c.tls.unwrap();
    assert_eq!(tls.cert_file, pems.0.join("cert.pem"));
    assert_eq!(
        tls.config.alpn_protocols,
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    );
    let mut o = flags("builtin:demo");
    o.tls_cert = Some(pems.path("cert.pem"));
    o.tls_key = Some(pems.path("key.pem"));
    assert!(load(None, &o).unwrap().tls.is_some());
}

#[test]
fn listener_tls_problems_are_reported_at_their_keys() {
    let pems = Pems::new();
    let routes = "[[routes]]\npath = \"/\"\nclient = \"ag-ui\"\nupstream = \"builtin:demo\"\n";
    let err = file(&format!(
        "listen = \"127.0.0.1:1\"\ntls_cert = \"{}\"\n{routes}",
        pems.path("cert.pem")
    ))
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(":2:12: tls_cert: is given without tls_key; give both or neither"),
        "{err}"
    );
    // Unreadable files, each at its own place.
    let err = file(&format!(
        "tls_cert = \"{}\"\ntls_key = \"{}\"\n{routes}",
        pems.path("missing-cert.pem"),
        pems.path("missing-key.pem")
    ))
    .unwrap_err()
    .to_string();
    assert!(err.contains(":1:12: tls_cert: cannot read "), "{err}");
    assert!(err.contains(":2:11: tls_key: cannot read "), "{err}");
    assert!(err.contains("missing-key.pem"), "{err}");
    // A key that belongs to another certificate.
    let err = file(&format!(
        "tls_cert = \"{}\"\ntls_key = \"{}\"\n{routes}",
        pems.path("cert.pem"),
        pems.path("other-key.pem")
    ))
    .unwrap_err()
    .to_string();
    assert!(err.contains(":2:11: tls_key: "), "{err}");
    // The flags are named as flags.
    let mut o = flags("builtin:demo");
    o.tls_key = Some(pems.path("key.pem"));
    assert_eq!(
        flag_error(&o),
        "flags: --tls-key: is given without tls_cert; give both or neither"
    );
    o.tls_cert = Some(pems.path("nothing.pem"));
    let err = flag_error(&o);
    assert!(err.starts_with("flags: --tls-cert: cannot read "), "{err}");
}
#[test]
fn session_quotas_have_defaults_and_are_read_and_checked_at_their_place() {
    let route = "[[routes]]\npath = \"/aap\"\nclient = \"aap\"\nupstream = \"builtin:demo\"\n\
                 [routes.aap]\nname = \"a\"\n";
    let defaults = file(route).unwrap().sessions;
    assert_eq!(defaults.max_sessions_per_principal, 100);
    assert_eq!(defaults.max_total_bytes, 256 << 20);
    assert_eq!(defaults.max_bytes_per_principal, 64 << 20);

    let set = file(&format!(
        "{route}[sessions]\nmax_sessions_per_principal = 3\nmax_total_bytes = 1048576\n\
         max_bytes_per_principal = 2048\n"
    ))
    .unwrap()
    .sessions;
    assert_eq!(set.max_sessions_per_principal, 3);
    assert_eq!(set.max_total_bytes, 1 << 20);
    assert_eq!(set.max_bytes_per_principal, 2048);
    assert_eq!(
        set.max_sessions, 10_000,
        "the other keys keep their defaults"
    );

    let err = file(&format!(
        "{route}[sessions]\nmax_sessions_per_principal = 0\nmax_total_bytes = 10\n\
         max_bytes_per_principal = 100\n"
    ))
    .unwrap_err()
    .to_string();
    for expected in [
        ":8:30: sessions.max_sessions_per_principal: must be at least 1",
        ":9:19: sessions.max_total_bytes: must be at least 1024",
        ":10:27: sessions.max_bytes_per_principal: must be at least 1024",
    ] {
        assert!(err.contains(expected), "{expected}\n---\n{err}");
    }
    let err = file(&format!("{route}[sessions]\nmax_sessions_per_user = 3\n"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(":8:1: sessions.max_sessions_per_user: unknown field"),
        "{err}"
    );
}

#[test]
fn trusted_proxies_and_route_forwarding_are_read() {
    let c = file(
        r#"trusted_proxies = ["127.0.0.1", "10.0.0.0/8", "192.168.1.7/24", "2001:db8::/32"]

[[routes]]
path = "/a"
client = "ag-ui"
upstream = "http://127.0.0.1:9001/"
forward_cookies = true
forward_headers = ["X-Tenant", "authorization"]

[[routes]]
path = "/b"
client = "ag-ui"
upstream = "http://127.0.0.1:9001/"
"#,
    )
    .unwrap();
    let trusted = |ip: &str| c.trusted_proxies.contains(ip.parse().unwrap());
    assert!(trusted("127.0.0.1"));
    assert!(!trusted("127.0.0.2"));
    assert!(trusted("10.200.3.4"));
    assert!(trusted("192.168.1.200"), "a range written with host bits");
    assert!(!trusted("192.168.2.1"));
    assert!(trusted("2001:db8:1::5"));
    assert!(trusted("::ffff:10.1.1.1"), "an IPv4-mapped peer");
    assert!(!trusted("::1"));
    let a = c.route("/a").unwrap();
    assert!(a.forwarding.forward_cookies);
    assert_eq!(
        a.forwarding.forward_headers,
        Some(vec![
            http::HeaderName::from_static("x-tenant"),
            http::header::AUTHORIZATION
        ])
    );
    let b = c.route("/b").unwrap();
    assert_eq!(b.forwarding, Forwarding::default());
    assert!(!b.forwarding.forward_cookies);
    assert!(b.forwarding.forward_headers.is_none());
    // Nothing is trusted unless configured, in a file or from flags.
    let c = load(None, &flags("http://127.0.0.1:9001/")).unwrap();
    assert!(c.trusted_proxies.is_empty());
    assert!(!c.trusted_proxies.contains("127.0.0.1".parse().unwrap()));
    assert_eq!(c.routes[0].forwarding, Forwarding::default());
}

#[test]
fn bad_forwarding_entries_name_their_line_and_key() {
    let err = file(
        r#"trusted_proxies = ["10.0.0.0/33", "localhost", "::1"]

[[routes]]
path = "/a"
client = "ag-ui"
upstream = "http://127.0.0.1:9001/"
forward_headers = ["x-ok", "bad header", "Cookie"]
"#,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(
            ":1:20: trusted_proxies[0]: \"10.0.0.0/33\" is not an IP address or a CIDR range"
        ),
        "{err}"
    );
    assert!(
        err.contains(":1:35: trusted_proxies[1]: \"localhost\""),
        "{err}"
    );
    assert!(!err.contains("trusted_proxies[2]"), "{err}");
    assert!(
        err.contains(":7:28: routes[0].forward_headers[1]: \"bad header\" is not a header name"),
        "{err}"
    );
    assert!(
        err.contains(
            ":7:42: routes[0].forward_headers[2]: cookies are forwarded by forward_cookies = true"
        ),
        "{err}"
    );
    let err = file(
        "trusted_proxies = \"10.0.0.0/8\"\n[[routes]]\npath = \"/\"\nclient = \"ag-ui\"\nupstream = \"builtin:demo\"\nforward_cookies = \"yes\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains(":1:19: trusted_proxies:"), "{err}");
    assert!(err.contains("routes[0].forward_cookies"), "{err}");
}

/// One AG-UI route with `tables` below it.
fn route_with(tables: &str) -> Result<Config, ConfigError> {
    file(&format!(
        "[[routes]]\npath = \"/a\"\nclient = \"ag-ui\"\nupstream = \"http://x:1/\"\n{tables}"
    ))
}

/// A file in its own temporary directory, removed when dropped.
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn new(name: &str, text: &str) -> TempFile {
        static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("dp-auth-{}-{call}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        TempFile(path)
    }

    fn path(&self) -> String {
        self.0.display().to_string()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The public P-256 key of RFC 7517 appendix A.1.
const JWKS: &str = r#"{"keys":[{"kty":"EC","crv":"P-256","kid":"k1",
    "x":"MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4",
    "y":"4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM"}]}"#;

#[test]
fn cors_rules_are_read_and_bad_origins_name_their_place() {
    let c = route_with(
        "[routes.cors]\nallow_origins = [\"https://app.example\", \"http://localhost:3000\"]\n\
         expose_headers = [\"Retry-After\"]\nallow_credentials = true\nmax_age = \"10m\"\n",
    )
    .unwrap();
    let cors = c.routes[0].cors.as_ref().unwrap();
    assert_eq!(
        cors.allow_origins,
        AllowedOrigins::List(vec![
            http::HeaderValue::from_static("https://app.example"),
            http::HeaderValue::from_static("http://localhost:3000"),
        ])
    );
    assert_eq!(cors.allow_headers.len(), DEFAULT_ALLOW_HEADERS.len());
    assert_eq!(cors.expose_headers, [http::header::RETRY_AFTER]);
    assert!(cors.allow_credentials);
    assert_eq!(cors.max_age, Some(Duration::from_secs(600)));
    let c = route_with("[routes.cors]\nallow_origins = [\"*\"]\nmax_age = 60\n").unwrap();
    let cors = c.routes[0].cors.as_ref().unwrap();
    assert_eq!(cors.allow_origins, AllowedOrigins::Any);
    assert_eq!(cors.max_age, Some(Duration::from_secs(60)));

    // "*" with credentials, a malformed origin, a bad header name: each at its place.
    let err = route_with("[routes.cors]\nallow_origins = [\"*\"]\nallow_credentials = true\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(":6:17: routes[0].cors.allow_origins: \"*\" cannot be combined with allow_credentials = true"),
        "{err}"
    );
    let err = route_with(
        "[routes.cors]\nallow_origins = [\"https://app.example/\", \"https://ok.example\"]\n\
         allow_headers = [\"x bad\"]\nmax_age = -1\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(
            ":6:18: routes[0].cors.allow_origins: \"https://app.example/\" is not an origin"
        ),
        "{err}"
    );
    assert!(
        err.contains("routes[0].cors.allow_headers: \"x bad\" is not a header name"),
        "{err}"
    );
    assert!(
        err.contains("routes[0].cors.max_age: must not be negative"),
        "{err}"
    );
    assert!(!err.contains("ok.example"), "{err}");
    let err = route_with("[routes.cors]\nallow_origins = []\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("list at least one origin"), "{err}");
}

#[test]
fn jwt_needs_exactly_one_key_source_and_a_readable_jwks_file() {
    let jwks = TempFile::new("jwks.json", JWKS);
    let c = route_with(&format!(
        "[routes.auth]\napi_keys = [\"s3cret\"]\n\
         jwt = {{ jwks_file = \"{}\", issuer = \"https://idp.example\", audience = \"gw\" }}\n",
        jwks.path()
    ))
    .unwrap();
    let auth = c.routes[0].auth.as_ref().unwrap();
    assert_eq!(auth.api_keys, [Secret::new("s3cret")]);
    assert!(
        !format!("{auth:?}").contains("s3cret"),
        "Debug shows no key"
    );
    assert_eq!(auth.jwt.len(), 1);
    assert_eq!(auth.jwt[0].issuer, "https://idp.example");
    assert_eq!(auth.jwt[0].audience, "gw");
    assert!(matches!(&auth.jwt[0].jwks, Jwks::File { keys, .. } if keys.keys.len() == 1));
    let c = route_with(
        "[routes.auth.jwt]\njwks_url = \"http://127.0.0.1:8080/jwks\"\nissuer = \"i\"\naudience = \"a\"\n",
    )
    .unwrap();
    assert!(
        matches!(&c.routes[0].auth.as_ref().unwrap().jwt[0].jwks, Jwks::Url { uri, tls: None } if uri == "http://127.0.0.1:8080/jwks")
    );
    // Plain http elsewhere would let anyone on the path serve their own keys.
    let err = route_with(
        "[routes.auth.jwt]\njwks_url = \"http://idp:8080/jwks\"\nissuer = \"i\"\naudience = \"a\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(
            "routes[0].auth.jwt.jwks_url: \"http://idp:8080/jwks\": keys fetched over plain http"
        ),
        "{err}"
    );
    // https, with extra roots; a ca_file on an http URL, or one that is not PEM, is a problem.
    let pems = Pems::new();
    let c = route_with(&format!(
        "[routes.auth.jwt]\njwks_url = \"https://idp.example/jwks\"\nca_file = \"{}\"\nissuer = \"i\"\naudience = \"a\"\n",
        pems.path("ca.pem")
    ))
    .unwrap();
    assert!(matches!(
        &c.routes[0].auth.as_ref().unwrap().jwt[0].jwks,
        Jwks::Url { uri, tls: Some(tls) }
            if uri == "https://idp.example/jwks" && tls.files.ca_file.is_some()
    ));
    let err = route_with(
        "[routes.auth.jwt]\njwks_url = \"http://localhost/jwks\"\nca_file = \"x.pem\"\nissuer = \"i\"\naudience = \"a\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("routes[0].auth.jwt.ca_file: only an https:// jwks_url takes a ca_file"),
        "{err}"
    );
    let err = route_with(&format!(
        "[routes.auth.jwt]\njwks_url = \"https://idp/jwks\"\nca_file = \"{}\"\nissuer = \"i\"\naudience = \"a\"\n",
        jwks.path()
    ))
    .unwrap_err()
    .to_string();
    assert!(err.contains("routes[0].auth.jwt.ca_file: "), "{err}");

    let both = route_with(&format!(
        "[routes.auth]\njwt = {{ jwks_file = \"{}\", jwks_url = \"http://idp/jwks\", issuer = \"i\", audience = \"a\" }}\n",
        jwks.path()
    ))
    .unwrap_err()
    .to_string();
    assert!(
        both.contains("routes[0].auth.jwt.jwks_url: give jwks_file or jwks_url, not both"),
        "{both}"
    );
    let neither = route_with("[routes.auth]\njwt = { issuer = \"i\", audience = \"a\" }\n")
        .unwrap_err()
        .to_string();
    assert!(
        neither.contains(":6:18: routes[0].auth.jwt: needs jwks_file or jwks_url"),
        "{neither}"
    );
    let unreadable = route_with(
        "[routes.auth]\njwt = { jwks_file = \"/nonexistent/jwks.json\", issuer = \"i\", audience = \"a\" }\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        unreadable.contains("routes[0].auth.jwt.jwks_file: /nonexistent/jwks.json: "),
        "{unreadable}"
    );
    let not_jwks = TempFile::new(
        "jwks.json",
        "{\"keys\": [{\"kty\": \"oct\", \"k\": \"c2VjcmV0\"}]}",
    );
    let err = route_with(&format!(
        "[routes.auth]\njwt = {{ jwks_file = \"{}\", issuer = \"i\", audience = \"a\" }}\n",
        not_jwks.path()
    ))
    .unwrap_err()
    .to_string();
    assert!(err.contains("holds no RSA, EC or OKP public key"), "{err}");
    // Issuer and audience are required; a JWKS URL is http:// or https://.
    let err = route_with("[routes.auth]\njwt = { jwks_url = \"ftp://idp/jwks\" }\n")
        .unwrap_err()
        .to_string();
    for needle in [
        "routes[0].auth.jwt.issuer: required",
        "routes[0].auth.jwt.audience: required",
        "routes[0].auth.jwt.jwks_url: \"ftp://idp/jwks\" is not an http:// or https:// URL",
    ] {
        assert!(err.contains(needle), "{needle}: {err}");
    }
}

#[test]
fn an_auth_table_names_a_credential_and_its_environment_variables_are_set() {
    let err = route_with("[routes.auth]\n").unwrap_err().to_string();
    assert!(err.contains("routes[0].auth: names no credential"), "{err}");
    let err = route_with("[routes.auth]\napi_keys_env = \"DIALECT_PROXY_TEST_SURELY_UNSET\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("routes[0].auth.api_keys_env: the environment variable DIALECT_PROXY_TEST_SURELY_UNSET is not set"),
        "{err}"
    );
    let err = route_with("[routes.auth]\napi_keys = [\" \"]\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("routes[0].auth.api_keys: an API key must not be empty"),
        "{err}"
    );
}

#[test]
fn upstream_auth_takes_one_source_and_the_client_credential_rule_is_read() {
    let token = TempFile::new("token", "t0\n");
    let both = route_with(&format!(
        "[routes.upstream_auth]\nbearer_env = \"PATH\"\nbearer_file = \"{}\"\n",
        token.path()
    ))
    .unwrap_err()
    .to_string();
    assert!(
        both.contains(
            ":7:15: routes[0].upstream_auth.bearer_file: give bearer_env or bearer_file, not both"
        ),
        "{both}"
    );
    let err = route_with("[routes.upstream_auth]\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("routes[0].upstream_auth: needs bearer_env or bearer_file"),
        "{err}"
    );
    let err =
        route_with("[routes.upstream_auth]\nbearer_env = \"DIALECT_PROXY_TEST_SURELY_UNSET\"\n")
            .unwrap_err()
            .to_string();
    assert!(
        err.contains("routes[0].upstream_auth.bearer_env: the environment variable"),
        "{err}"
    );
    let err = route_with("[routes.upstream_auth]\nbearer_file = \"/nonexistent/token\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("routes[0].upstream_auth.bearer_file: /nonexistent/token: "),
        "{err}"
    );

    let c = route_with(&format!(
        "forward_authorization = true\n[routes.upstream_auth]\nbearer_file = \"{}\"\n",
        token.path()
    ))
    .unwrap();
    let r = &c.routes[0];
    assert!(r.forward_authorization);
    assert_eq!(r.upstream_auth, Some(UpstreamBearer::File(token.0.clone())));
    let c = route_with("[routes.upstream_auth]\nbearer_env = \"PATH\"\n").unwrap();
    assert!(matches!(
        &c.routes[0].upstream_auth,
        Some(UpstreamBearer::Token(_))
    ));
    assert!(!c.routes[0].forward_authorization);
    // An AAP upstream's own api_key and upstream_auth would both set Authorization.
    let err = file(
        "[[routes]]\npath = \"/a\"\nclient = \"ag-ui\"\nupstream = \"http://x:1/\"\n\
         upstream_dialect = \"aap\"\n[routes.aap_upstream]\napi_key = \"k\"\n\
         [routes.upstream_auth]\nbearer_env = \"PATH\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(
            "routes[0].upstream_auth: the route already sends [routes.aap_upstream] api_key"
        ),
        "{err}"
    );
}

#[test]
fn an_aap_face_folds_its_keys_into_auth_and_its_routes_share_it() {
    let c = file(
        "[[routes]]\npath = \"/aap\"\nclient = \"aap\"\nupstream = \"builtin:demo\"\n\
         [routes.aap]\nname = \"a\"\napi_keys = [\"k1\"]\n\
         [[routes]]\npath = \"/aap\"\nclient = \"aap\"\nupstream = \"builtin:demo\"\n\
         [routes.aap]\nname = \"b\"\n\
         [routes.auth]\napi_keys = [\"k2\"]\n\
         [routes.cors]\nallow_origins = [\"https://app.example\"]\n",
    )
    .unwrap();
    for route in &c.routes {
        let auth = route.auth.as_ref().unwrap();
        assert_eq!(
            auth.api_keys,
            [Secret::new("k1"), Secret::new("k2")],
            "{}",
            route.aap.as_ref().unwrap().name
        );
        assert!(route.cors.is_some());
    }
    let err = file(
        "[[routes]]\npath = \"/aap\"\nclient = \"aap\"\nupstream = \"builtin:demo\"\n\
         [routes.aap]\nname = \"a\"\n[routes.cors]\nallow_origins = [\"https://a.example\"]\n\
         [[routes]]\npath = \"/aap\"\nclient = \"aap\"\nupstream = \"builtin:demo\"\n\
         [routes.aap]\nname = \"b\"\n[routes.cors]\nallow_origins = [\"https://b.example\"]\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(
            ":10:8: routes[1].cors: the routes of the AAP face /aap have different [routes.cors]"
        ),
        "{err}"
    );
    // The environment's keys too, in flags mode.
    let mut o = flags("builtin:demo");
    o.client = Some("aap".into());
    o.agent_name = Some("demo".into());
    o.aap_api_keys = Some("e1,e2".into());
    let c = load(None, &o).unwrap();
    let auth = c.routes[0].auth.as_ref().unwrap();
    assert_eq!(auth.api_keys, [Secret::new("e1"), Secret::new("e2")]);
    assert!(load(None, &flags("builtin:demo")).unwrap().routes[0]
        .auth
        .is_none());
}

/// `text` as a config file, with `overrides` (flags) over it.
fn file_with(text: &str, overrides: &Overrides) -> Result<Config, ConfigError> {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("dp-admission-{}-{call}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("dialect-proxy.toml");
    std::fs::write(&path, text).unwrap();
    let result = load(Some(&path), overrides);
    std::fs::remove_dir_all(&dir).unwrap();
    result
}

#[test]
fn admission_limits_default_then_file_then_flags() {
    let c = load(None, &flags(BUILTIN_DEMO)).unwrap();
    assert_eq!(c.admission, Admission::default());
    assert_eq!(c.admission.max_streams, 10_000);
    assert_eq!(c.admission.max_buffered_request_bytes, 64 << 20);
    assert_eq!(c.admission.request_header_timeout, Duration::from_secs(10));
    assert_eq!(c.admission.max_connections, 10_000);
    assert_eq!(c.admission.max_request_head_bytes, 8192);
    assert_eq!(
        c.admission.max_requests_per_connection,
        std::num::NonZeroU64::new(1_000)
    );
    assert_eq!(c.routes[0].limits.max_streams, None);

    let text = "[limits]\nmax_streams = 100\nmax_buffered_request_bytes = 1048576\n\
                request_header_timeout = \"2s\"\nmax_connections = 50\n\
                max_request_head_bytes = 32768\nmax_requests_per_connection = 0\n\
                [[routes]]\npath = \"/a\"\nclient = \"ag-ui\"\nupstream = \"builtin:demo\"\n\
                [routes.limits]\nmax_streams = 5\n\
                [[routes]]\npath = \"/b\"\nclient = \"ag-ui\"\nupstream = \"builtin:demo\"\n";
    let c = file(text).unwrap();
    assert_eq!(
        c.admission,
        Admission {
            max_streams: 100,
            max_buffered_request_bytes: 1 << 20,
            request_header_timeout: Duration::from_secs(2),
            max_connections: 50,
            max_request_head_bytes: 32 * 1024,
            max_requests_per_connection: None,
        }
    );
    assert_eq!(c.route("/a").unwrap().limits.max_streams, Some(5));
    // The global cap is the gateway's, not a default every route inherits.
    assert_eq!(c.route("/b").unwrap().limits.max_streams, None);

    let mut o = Overrides::default();
    o.limits.max_streams = Some(Spanned::new(0..0, 7));
    o.limits.request_header_timeout = Some(Spanned::new(0..0, "500ms".into()));
    o.limits.max_request_head_bytes = Some(Spanned::new(0..0, 16384));
    o.limits.max_requests_per_connection = Some(Spanned::new(0..0, 50));
    let c = file_with(text, &o).unwrap();
    assert_eq!(
        c.admission.max_requests_per_connection,
        std::num::NonZeroU64::new(50)
    );
    assert_eq!(c.admission.max_request_head_bytes, 16384);
    assert_eq!(c.admission.max_streams, 7);
    assert_eq!(
        c.admission.request_header_timeout,
        Duration::from_millis(500)
    );
    assert_eq!(c.admission.max_connections, 50, "from the file");
    assert_eq!(c.route("/a").unwrap().limits.max_streams, Some(5));
}

#[test]
fn stream_bounds_are_off_by_default_global_in_limits_and_a_route_may_change_or_lift_them() {
    let c = load(None, &flags(BUILTIN_DEMO)).unwrap();
    assert_eq!(c.routes[0].limits.max_stream_duration, None);
    assert_eq!(c.routes[0].limits.max_stream_bytes, None);

    let route = |path: &str, limits: &str| {
        format!(
            "[[routes]]\npath = \"{path}\"\nclient = \"ag-ui\"\nupstream = \"builtin:demo\"\n{limits}"
        )
    };
    let text = format!(
        "[limits]\nmax_stream_duration = \"30m\"\nmax_stream_bytes = 1000000\n{}{}{}",
        route("/a", ""),
        route(
            "/b",
            "[routes.limits]\nmax_stream_duration = \"90s\"\nmax_stream_bytes = 5000\n"
        ),
        route(
            "/c",
            "[routes.limits]\nmax_stream_duration = \"off\"\nmax_stream_bytes = 0\n"
        ),
    );
    let c = file(&text).unwrap();
    let limits = |path: &str| c.route(path).unwrap().limits;
    assert_eq!(
        limits("/a").max_stream_duration,
        Some(Duration::from_secs(1800))
    );
    assert_eq!(limits("/a").max_stream_bytes, Some(1_000_000));
    assert_eq!(
        limits("/b").max_stream_duration,
        Some(Duration::from_secs(90))
    );
    assert_eq!(limits("/b").max_stream_bytes, Some(5000));
    assert_eq!(limits("/c").max_stream_duration, None);
    assert_eq!(limits("/c").max_stream_bytes, None);

    let mut o = Overrides::default();
    o.limits.max_stream_duration = Some(Spanned::new(0..0, "10s".into()));
    o.limits.max_stream_bytes = Some(Spanned::new(0..0, 777));
    let c = file_with(&route("/a", ""), &o).unwrap();
    let limits = c.route("/a").unwrap().limits;
    assert_eq!(limits.max_stream_duration, Some(Duration::from_secs(10)));
    assert_eq!(limits.max_stream_bytes, Some(777));

    let err = file(&route(
        "/a",
        "[routes.limits]\nmax_stream_duration = \"forever\"\n",
    ))
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(":6:23: routes[0].limits.max_stream_duration: invalid duration")
            && err.contains("or \"off\""),
        "{err}"
    );
}

#[test]
fn server_wide_admission_keys_in_a_route_are_problems_at_their_place() {
    let err = file(
        "[[routes]]\npath = \"/a\"\nclient = \"ag-ui\"\nupstream = \"builtin:demo\"\n\
         [routes.limits]\nmax_streams = 3\nmax_connections = 10\n\
         max_buffered_request_bytes = 1048576\nrequest_header_timeout = \"1s\"\n\
         max_request_head_bytes = 9000\nmax_requests_per_connection = 5\n",
    )
    .unwrap_err()
    .to_string();
    for expected in [
        ":7:19: routes[0].limits.max_connections: is server-wide: set it in [limits]",
        ":8:30: routes[0].limits.max_buffered_request_bytes: is server-wide",
        ":9:26: routes[0].limits.request_header_timeout: is server-wide",
        ":10:26: routes[0].limits.max_request_head_bytes: is server-wide",
        ":11:31: routes[0].limits.max_requests_per_connection: is server-wide",
    ] {
        assert!(err.contains(expected), "{expected}\n---\n{err}");
    }
    assert!(!err.contains("max_streams"), "valid in a route: {err}");
    assert_eq!(err.lines().count(), 5, "{err}");
}

#[test]
fn bad_admission_values_are_reported_at_their_place_and_under_their_flag() {
    let routes = "[[routes]]\npath = \"/\"\nclient = \"ag-ui\"\nupstream = \"builtin:demo\"\n";
    let err = file(&format!(
        "[limits]\nmax_streams = 0\nmax_buffered_request_bytes = 5000000000\n\
         request_header_timeout = \"soon\"\nmax_connections = 0\n\
         max_request_head_bytes = 4096\n{routes}\
         [routes.limits]\nmax_streams = 0\n"
    ))
    .unwrap_err()
    .to_string();
    for expected in [
        ":2:15: limits.max_streams: must be at least 1",
        ":3:30: limits.max_buffered_request_bytes: must be between 64 and 4294967295 bytes",
        ":4:26: limits.request_header_timeout: invalid duration \"soon\"",
        ":5:19: limits.max_connections: must be at least 1",
        ":6:26: limits.max_request_head_bytes: must be between 8192 and 1048576 bytes",
        ":12:15: routes[0].limits.max_streams: must be at least 1",
    ] {
        assert!(err.contains(expected), "{expected}\n---\n{err}");
    }
    let mut o = flags(BUILTIN_DEMO);
    o.limits.max_streams = Some(Spanned::new(0..0, 0));
    o.limits.max_buffered_request_bytes = Some(Spanned::new(0..0, 10));
    o.limits.request_header_timeout = Some(Spanned::new(0..0, "never".into()));
    o.limits.max_connections = Some(Spanned::new(0..0, 0));
    o.limits.max_request_head_bytes = Some(Spanned::new(0..0, 1 << 30));
    let err = flag_error(&o);
    for expected in [
        "flags: --max-streams: must be at least 1",
        "flags: --max-buffered-request-bytes: must be between 64 and 4294967295 bytes",
        "flags: --request-header-timeout: invalid duration \"never\"",
        "flags: --max-connections: must be at least 1",
        "flags: --max-request-head-bytes: must be between 8192 and 1048576 bytes",
    ] {
        assert!(err.contains(expected), "{expected}\n---\n{err}");
    }
}

#[test]
fn the_session_store_is_chosen_with_its_own_keys_and_others_are_refused() {
    use crate::session::{Backend, RedisSettings};
    let route = "[[routes]]\npath = \"/aap\"\nclient = \"aap\"\nupstream = \"builtin:demo\"\n[routes.aap]\nname = \"a\"\n";
    let config = file(route).unwrap();
    assert_eq!(config.store.backend, Backend::Memory);
    assert_eq!(config.store.timeout, Duration::from_secs(5));

    let config = file(&format!(
        "{route}[sessions]\nstore = \"file\"\npath = \"/var/lib/dp\"\nstore_timeout = \"2s\"\n"
    ))
    .unwrap();
    assert_eq!(
        config.store.backend,
        Backend::File {
            path: "/var/lib/dp".into()
        }
    );
    assert_eq!(config.store.timeout, Duration::from_secs(2));

    let config = file(&format!(
        "{route}[sessions]\nstore = \"redis\"\nurl = \"rediss://u@redis:6380/2\"\npassword_env = \"RP\"\nkey_prefix = \"dp:\"\nlock_ttl = \"3s\"\n"
    ))
    .unwrap();
    assert_eq!(
        config.store.backend,
        Backend::Redis(RedisSettings {
            url: "rediss://u@redis:6380/2".into(),
            password_env: Some("RP".into()),
            key_prefix: "dp:".into(),
            lock_ttl: Duration::from_secs(3),
            cluster: false,
        })
    );

    let config = file(&format!(
        "{route}[sessions]\nstore = \"redis\"\nurl = \"redis://node-1:7000\"\ncluster = true\n"
    ))
    .unwrap();
    match config.store.backend {
        Backend::Redis(redis) => {
            assert!(redis.cluster);
            assert_eq!(redis.url, "redis://node-1:7000");
        }
        other => panic!("{other:?}"),
    }

    for (text, needle) in [
        ("store = \"disk\"\n", "sessions.store"),
        ("store = \"file\"\n", "sessions.path"),
        ("store = \"redis\"\n", "sessions.url"),
        (
            "store = \"redis\"\nurl = \"http://redis:6379\"\n",
            "sessions.url",
        ),
        (
            "store = \"redis\"\nurl = \"redis://r\"\nkey_prefix = \"{x}\"\n",
            "sessions.key_prefix",
        ),
        (
            "store = \"file\"\npath = \"d\"\nurl = \"redis://r\"\n",
            "sessions.url",
        ),
        ("url = \"redis://r\"\n", "sessions.url"),
        (
            "store = \"redis\"\nurl = \"redis://r\"\npath = \"d\"\n",
            "sessions.path",
        ),
        (
            "store = \"redis\"\nurl = \"redis://r\"\nlock_ttl = \"0s\"\n",
            "sessions.lock_ttl",
        ),
        ("cluster = true\n", "sessions.cluster"),
        (
            "store = \"file\"\npath = \"d\"\ncluster = false\n",
            "sessions.cluster",
        ),
        (
            "store = \"redis\"\nurl = \"redis://r\"\ncluster = \"yes\"\n",
            "cluster",
        ),
    ] {
        let err = file(&format!("{route}[sessions]\n{text}"))
            .unwrap_err()
            .to_string();
        assert!(err.contains(needle), "{text}: {err}");
    }
}
