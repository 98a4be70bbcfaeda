//! Checks of the bodies the gateway sends an AAP agent (`aap.md` §2.1, §4, §5, §6.4).
//!
//! Two levels: a *fatal* problem makes the body invalid (the agent answers 400
//! `{"error": <the first problem>}`); a *strict* problem is accepted on the wire, as the
//! lenient reference SDK would, but the gateway should never cause it. Both are recorded as
//! violations by the server.

use serde_json::{Map, Value};

/// What `GET /meta` says about one agent.
#[derive(Clone, Debug, Default)]
pub(super) struct AgentSpec {
    pub name: String,
    pub server_tools: Vec<String>,
    /// `(name, type)` of each option.
    pub options: Vec<(String, String)>,
    /// The declared stream modes; `None` when there is no `stream` key (⇒ only `none`).
    pub stream: Option<Vec<String>>,
    pub image_http: bool,
    pub image_data: bool,
    pub client_tools: bool,
}

impl AgentSpec {
    /// True if `mode` (`delta`/`message`/`none`) is declared.
    pub fn supports_stream(&self, mode: &str) -> bool {
        match &self.stream {
            None => mode == "none",
            Some(modes) => modes.iter().any(|m| m == mode),
        }
    }

    fn option_type(&self, name: &str) -> Option<&str> {
        self.options
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.as_str())
    }
}

/// The agents of a `GET /meta` document.
pub(super) fn agent_specs(meta: &Value) -> Vec<AgentSpec> {
    let names = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect()
    };
    meta["agents"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|agent| {
            let caps = &agent["capabilities"];
            AgentSpec {
                name: agent["name"].as_str().unwrap_or_default().to_owned(),
                server_tools: names(&agent["tools"]),
                options: agent["options"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|o| {
                        Some((
                            o["name"].as_str()?.to_owned(),
                            o["type"].as_str()?.to_owned(),
                        ))
                    })
                    .collect(),
                stream: caps["stream"]
                    .as_object()
                    .map(|modes| modes.keys().cloned().collect()),
                image_http: caps["image"]["http"].is_object(),
                image_data: caps["image"]["data"].is_object(),
                client_tools: caps["application"]["tools"].is_object(),
            }
        })
        .collect()
}

/// The problems found in one body.
#[derive(Clone, Debug, Default)]
pub(super) struct Problems {
    pub fatal: Vec<String>,
    pub strict: Vec<String>,
}

struct Checker<'a> {
    spec: Option<&'a AgentSpec>,
    confirm_tools: &'a [String],
    problems: Problems,
}

/// Checks a `POST /sessions` body against the agents of `/meta`.
pub(super) fn check_create(
    body: &Value,
    specs: &[AgentSpec],
    confirm_tools: &[String],
) -> Problems {
    let name = body["agent"]["name"].as_str().unwrap_or_default();
    let spec = specs.iter().find(|s| s.name == name);
    let mut c = Checker {
        spec,
        confirm_tools,
        problems: Problems::default(),
    };
    let Some(object) = body.as_object() else {
        c.fatal("the body is not a JSON object".into());
        return c.problems;
    };
    c.keys(object, "", &["agent", "messages", "tools"]);
    match object.get("agent") {
        Some(agent) => c.agent(agent, "agent", true),
        None => c.fatal("agent is required".into()),
    }
    if !name.is_empty() && spec.is_none() {
        c.strict(format!("agent.name {name:?} is not an agent of /meta"));
    }
    if let Some(messages) = object.get("messages") {
        match messages.as_array() {
            Some(list) => {
                for (i, m) in list.iter().enumerate() {
                    c.message(m, &format!("messages[{i}]"), &HISTORY_ROLES);
                }
            }
            None => c.fatal("messages must be an array".into()),
        }
    }
    if let Some(tools) = object.get("tools") {
        c.tool_specs(tools, "tools");
    }
    c.problems
}

/// Checks a `POST /sessions/:id/turns` body; `spec` is the session's agent.
pub(super) fn check_turn(
    body: &Value,
    spec: Option<&AgentSpec>,
    confirm_tools: &[String],
) -> Problems {
    let mut c = Checker {
        spec,
        confirm_tools,
        problems: Problems::default(),
    };
    let Some(object) = body.as_object() else {
        c.fatal("the body is not a JSON object".into());
        return c.problems;
    };
    c.keys(object, "", &["agent", "stream", "messages", "tools"]);
    match object.get("messages").map(|m| m.as_array()) {
        None => c.fatal("messages is required".into()),
        Some(None) => c.fatal("messages must be an array".into()),
        Some(Some(list)) if list.is_empty() => c.fatal("messages must not be empty".into()),
        Some(Some(list)) => {
            for (i, m) in list.iter().enumerate() {
                c.message(m, &format!("messages[{i}]"), &TURN_ROLES);
            }
        }
    }
    match object.get("stream") {
        None => {
            if spec.is_some_and(|s| !s.supports_stream("none")) {
                c.strict("no stream (none), but capabilities.stream does not declare none".into());
            }
        }
        Some(Value::String(mode)) => {
            if !matches!(mode.as_str(), "delta" | "message" | "none") {
                c.strict(format!("stream {mode:?} is not delta/message/none"));
            } else if spec.is_some_and(|s| !s.supports_stream(mode)) {
                c.strict(format!(
                    "stream {mode:?} is not declared in capabilities.stream"
                ));
            }
        }
        Some(other) => c.fatal(format!("stream must be a string, got {other}")),
    }
    if let Some(agent) = object.get("agent") {
        c.agent(agent, "agent", false);
    }
    if let Some(tools) = object.get("tools") {
        c.tool_specs(tools, "tools");
    }
    c.problems
}

const HISTORY_ROLES: [&str; 4] = ["system", "user", "assistant", "tool"];
const TURN_ROLES: [&str; 3] = ["user", "tool", "tool_permission"];

impl Checker<'_> {
    fn fatal(&mut self, problem: String) {
        self.problems.fatal.push(problem);
    }

    fn strict(&mut self, problem: String) {
        self.problems.strict.push(problem);
    }

    /// Keys the spec does not define.
    fn keys(&mut self, object: &Map<String, Value>, path: &str, allowed: &[&str]) {
        for key in object.keys().filter(|k| !allowed.contains(&k.as_str())) {
            let at = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            self.strict(format!("{at}: a key AAP v3 does not define here"));
        }
    }

    fn string<'v>(
        &mut self,
        object: &'v Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Option<&'v str> {
        match object.get(key) {
            Some(Value::String(s)) => Some(s),
            Some(other) => {
                self.fatal(format!("{path}.{key} must be a string, got {other}"));
                None
            }
            None => {
                self.fatal(format!("{path}.{key} is required"));
                None
            }
        }
    }

    fn call_id(&mut self, object: &Map<String, Value>, path: &str) {
        if let Some(id) = self.string(object, "toolCallId", path) {
            if id.is_empty() {
                self.fatal(format!("{path}.toolCallId is empty"));
            }
            if id.starts_with("confirm:") {
                self.strict(format!(
                    "{path}.toolCallId {id:?}: a gateway confirm id reached the agent"
                ));
            }
        }
    }

    fn tool_name(&mut self, name: &str, path: &str) {
        if self.confirm_tools.iter().any(|c| c == name) {
            self.strict(format!(
                "{path}: the confirm tool {name:?} reached the agent"
            ));
        }
    }

    /// `agent` of a create (`AgentConfig`, name required) or of a turn (no name).
    fn agent(&mut self, agent: &Value, path: &str, create: bool) {
        let Some(object) = agent.as_object() else {
            self.fatal(format!("{path} must be an object"));
            return;
        };
        if create {
            if let Some(name) = self.string(object, "name", path) {
                if name.is_empty() {
                    self.fatal(format!("{path}.name is empty"));
                }
            }
            self.keys(object, path, &["name", "tools", "options"]);
        } else {
            self.keys(object, path, &["tools", "options"]);
        }
        if let Some(tools) = object.get("tools") {
            let Some(list) = tools.as_array() else {
                self.fatal(format!("{path}.tools must be an array"));
                return;
            };
            for (i, tool) in list.iter().enumerate() {
                let at = format!("{path}.tools[{i}]");
                let Some(t) = tool.as_object() else {
                    self.fatal(format!("{at} must be an object"));
                    continue;
                };
                self.keys(t, &at, &["name", "trust"]);
                if let Some(name) = self.string(t, "name", &at) {
                    self.tool_name(name, &at);
                    if self
                        .spec
                        .is_some_and(|s| !s.server_tools.iter().any(|n| n == name))
                    {
                        self.strict(format!("{at}: {name:?} is not a server tool of /meta"));
                    }
                }
                if t.get("trust").is_some_and(|v| !v.is_boolean()) {
                    self.fatal(format!("{at}.trust must be a boolean"));
                }
            }
        }
        if let Some(options) = object.get("options") {
            let Some(map) = options.as_object() else {
                self.fatal(format!("{path}.options must be an object"));
                return;
            };
            for (name, value) in map {
                let at = format!("{path}.options.{name}");
                let Some(value) = value.as_str() else {
                    self.fatal(format!("{at} must be a string, got {value}"));
                    continue;
                };
                match self.spec.map(|s| s.option_type(name)) {
                    Some(None) => self.strict(format!("{at}: not an option of /meta")),
                    Some(Some("secret")) if value == "***" => self.strict(format!(
                        "{at}: the redaction placeholder \"***\" sent as a secret value"
                    )),
                    _ => {}
                }
            }
        }
    }

    /// `ToolSpec[]` (client tools).
    fn tool_specs(&mut self, tools: &Value, path: &str) {
        let Some(list) = tools.as_array() else {
            self.fatal(format!("{path} must be an array"));
            return;
        };
        if !list.is_empty() && self.spec.is_some_and(|s| !s.client_tools) {
            self.strict(format!(
                "{path}: client tools sent, but capabilities.application.tools is not declared"
            ));
        }
        for (i, tool) in list.iter().enumerate() {
            let at = format!("{path}[{i}]");
            let Some(t) = tool.as_object() else {
                self.fatal(format!("{at} must be an object"));
                continue;
            };
            self.keys(t, &at, &["name", "title", "description", "parameters"]);
            if let Some(name) = self.string(t, "name", &at) {
                if name.is_empty() {
                    self.fatal(format!("{at}.name is empty"));
                }
                self.tool_name(name, &at);
            }
            self.string(t, "description", &at);
            if t.get("title").is_some_and(|v| !v.is_string()) {
                self.fatal(format!("{at}.title must be a string"));
            }
            match t.get("parameters") {
                Some(Value::Object(_)) => {}
                Some(other) => {
                    self.fatal(format!("{at}.parameters must be an object, got {other}"))
                }
                None => self.fatal(format!("{at}.parameters is required")),
            }
        }
    }

    /// One message whose role must be one of `roles`.
    fn message(&mut self, message: &Value, path: &str, roles: &[&str]) {
        let Some(object) = message.as_object() else {
            self.fatal(format!("{path} must be an object"));
            return;
        };
        let Some(role) = self.string(object, "role", path) else {
            return;
        };
        if !roles.contains(&role) {
            self.fatal(format!(
                "{path}.role {role:?} is not one of {}",
                roles.join("/")
            ));
            return;
        }
        match role {
            "system" => {
                self.keys(object, path, &["role", "content"]);
                self.string(object, "content", path);
            }
            "user" | "assistant" => {
                self.keys(object, path, &["role", "content"]);
                self.content(object.get("content"), &format!("{path}.content"), role);
            }
            "tool" => {
                self.keys(object, path, &["role", "toolCallId", "content"]);
                self.call_id(object, path);
                self.content(object.get("content"), &format!("{path}.content"), role);
            }
            "tool_permission" => {
                self.keys(object, path, &["role", "toolCallId", "granted", "reason"]);
                self.call_id(object, path);
                if !object.get("granted").is_some_and(Value::is_boolean) {
                    self.fatal(format!("{path}.granted must be a boolean"));
                }
                if object.get("reason").is_some_and(|r| !r.is_string()) {
                    self.fatal(format!("{path}.reason must be a string"));
                }
            }
            _ => unreachable!("roles are checked above"),
        }
    }

    /// `string | ContentBlock[]`, with the block types `role` may carry.
    fn content(&mut self, content: Option<&Value>, path: &str, role: &str) {
        let blocks = match content {
            Some(Value::String(_)) => return,
            Some(Value::Array(blocks)) => blocks,
            Some(other) => {
                self.fatal(format!("{path} must be a string or blocks, got {other}"));
                return;
            }
            None => {
                self.fatal(format!("{path} is required"));
                return;
            }
        };
        let allowed: &[&str] = match role {
            "assistant" => &["text", "thinking", "tool_use"],
            _ => &["text", "image"],
        };
        for (i, block) in blocks.iter().enumerate() {
            let at = format!("{path}[{i}]");
            let Some(b) = block.as_object() else {
                self.fatal(format!("{at} must be an object"));
                continue;
            };
            let Some(kind) = self.string(b, "type", &at) else {
                continue;
            };
            match kind {
                "text" => {
                    self.keys(b, &at, &["type", "text"]);
                    self.string(b, "text", &at);
                }
                "thinking" => {
                    self.keys(b, &at, &["type", "thinking"]);
                    self.string(b, "thinking", &at);
                }
                "tool_use" => {
                    self.keys(b, &at, &["type", "toolCallId", "name", "input"]);
                    self.call_id(b, &at);
                    if let Some(name) = self.string(b, "name", &at) {
                        self.tool_name(name, &at);
                    }
                    if !b.get("input").is_some_and(Value::is_object) {
                        self.fatal(format!("{at}.input must be an object"));
                    }
                }
                "image" => {
                    self.keys(b, &at, &["type", "url"]);
                    if let Some(url) = self.string(b, "url", &at) {
                        self.image(url, &at);
                    }
                }
                other => {
                    self.fatal(format!("{at}.type {other:?} is not a content block type"));
                    continue;
                }
            }
            if !allowed.contains(&kind) {
                self.strict(format!("{at}: a {kind} block in a {role} message"));
            }
        }
    }

    fn image(&mut self, url: &str, path: &str) {
        let Some(spec) = self.spec else {
            return;
        };
        if url.starts_with("https://") {
            if !spec.image_http {
                self.strict(format!(
                    "{path}: an https image, but capabilities.image.http is not declared"
                ));
            }
        } else if url.starts_with("data:") {
            if !spec.image_data {
                self.strict(format!(
                    "{path}: a data: image, but capabilities.image.data is not declared"
                ));
            }
        } else {
            self.strict(format!(
                "{path}: image url {url:?} is neither https:// nor data:"
            ));
        }
    }
}
