"""Checks rendered Kubernetes manifests (kustomize output) beyond their schema.

Usage: check_manifests.py --binary PATH RENDERED.yaml...
       check_manifests.py --self-test

For every pod template (Deployment, StatefulSet, DaemonSet, Job, CronJob, Pod):
- Pod Security "restricted": every container, init containers included, has
  allowPrivilegeEscalation false and capabilities.drop containing ALL, adds no capability but
  NET_BIND_SERVICE, is not privileged; runAsNonRoot is true and seccompProfile is RuntimeDefault
  (or Localhost) at pod or container level, and no container runs as user 0; no hostNetwork,
  hostPID, hostIPC, hostPort or hostPath, and only the volume types the profile allows.
- The sidecar recipe: the gateway runs as a native sidecar (restartPolicy Always), the agent's
  preStop drains it, terminationGracePeriodSeconds exceeds the config's drain_timeout, and the
  Prometheus annotations name the admin port.
Every ConfigMap's dialect-proxy.toml is loaded by `dialect-proxy check`, with the environment
the gateway container gets (Secret values replaced by placeholders).
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

import yaml

GATEWAY = "dialect-proxy"
CONFIG_KEY = "dialect-proxy.toml"
ADMIN_PORT = 9901
DRAIN_COMMAND = ["/opt/dialect-proxy/dialect-proxy", "drain", "--admin", f"127.0.0.1:{ADMIN_PORT}"]
ALLOWED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret",
}
ALLOWED_CAPABILITIES = {"NET_BIND_SERVICE"}
ALLOWED_SECCOMP = {"RuntimeDefault", "Localhost"}


def pod_spec(doc):
    """The pod spec and template metadata of a workload, or (None, None)."""
    kind = doc.get("kind")
    spec = doc.get("spec") or {}
    if kind == "Pod":
        return spec, doc.get("metadata") or {}
    if kind == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob"):
        template = spec.get("template") or {}
        return template.get("spec") or {}, template.get("metadata") or {}
    return None, None


def restricted_problems(name, spec):
    """What makes this pod spec fail the restricted profile."""
    problems = []
    pod_sc = spec.get("securityContext") or {}
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            problems.append(f"{name}: {field} is set")
    for volume in spec.get("volumes") or []:
        kinds = set(volume) - {"name"}
        for kind in kinds - ALLOWED_VOLUMES:
            problems.append(f"{name}: volume {volume.get('name')!r} is a {kind} volume")
    if pod_sc.get("runAsUser") == 0:
        problems.append(f"{name}: the pod runs as user 0")
    containers = [("initContainers", c) for c in spec.get("initContainers") or []]
    containers += [("containers", c) for c in spec.get("containers") or []]
    if not containers:
        problems.append(f"{name}: no container")
    for group, c in containers:
        where = f"{name}: {group}[{c.get('name')}]"
        sc = c.get("securityContext") or {}
        if sc.get("privileged"):
            problems.append(f"{where}: privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{where}: allowPrivilegeEscalation is not false")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            problems.append(f"{where}: capabilities.drop lacks ALL")
        for cap in set(caps.get("add") or []) - ALLOWED_CAPABILITIES:
            problems.append(f"{where}: adds capability {cap}")
        non_root = sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))
        if non_root is not True:
            problems.append(f"{where}: runAsNonRoot is not true (pod or container)")
        if sc.get("runAsUser", pod_sc.get("runAsUser")) == 0:
            problems.append(f"{where}: runs as user 0")
        seccomp = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
        if seccomp not in ALLOWED_SECCOMP:
            problems.append(f"{where}: seccompProfile is {seccomp!r}, not RuntimeDefault")
        for port in c.get("ports") or []:
            if port.get("hostPort"):
                problems.append(f"{where}: hostPort {port['hostPort']}")
    return problems


def seconds(duration):
    """A config duration such as "30s", "2m" or "500ms", in seconds."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h)", duration.strip())
    if not m:
        raise ValueError(f"unreadable duration {duration!r}")
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def drain_timeout(config_text):
    m = re.search(r'^drain_timeout\s*=\s*"([^"]+)"', config_text, re.MULTILINE)
    return seconds(m.group(1)) if m else 30.0


def sidecar_problems(name, spec, meta, configs):
    """What breaks the sidecar recipe (native sidecar, drain before the agent stops)."""
    problems = []
    inits = {c.get("name"): c for c in spec.get("initContainers") or []}
    gateway = inits.get(GATEWAY)
    if gateway is None:
        return [f"{name}: no init container named {GATEWAY}"]
    if gateway.get("restartPolicy") != "Always":
        problems.append(f"{name}: {GATEWAY} is not a native sidecar (restartPolicy: Always)")
    order = list(inits)
    installer = [n for n, c in inits.items() if (c.get("args") or [])[:1] == ["install"]]
    if not installer or order.index(installer[0]) > order.index(GATEWAY):
        problems.append(f"{name}: no `install` init container before {GATEWAY}")
    for c in spec.get("containers") or []:
        pre_stop = (c.get("lifecycle") or {}).get("preStop") or {}
        command = (pre_stop.get("exec") or {}).get("command")
        if command != DRAIN_COMMAND:
            problems.append(f"{name}: containers[{c.get('name')}] has no preStop drain")
    annotations = meta.get("annotations") or {}
    expected = {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(ADMIN_PORT),
        "prometheus.io/path": "/metrics",
    }
    for key, value in expected.items():
        if annotations.get(key) != value:
            problems.append(f"{name}: annotation {key} is not {value!r}")
    ports = {p.get("name"): p.get("containerPort") for p in gateway.get("ports") or []}
    if ports.get("admin") != ADMIN_PORT:
        problems.append(f"{name}: {GATEWAY} has no port admin {ADMIN_PORT}")
    for probe, path in (("livenessProbe", "/live"), ("readinessProbe", "/ready")):
        get = (gateway.get(probe) or {}).get("httpGet") or {}
        if get.get("path") != path or get.get("port") not in ("admin", ADMIN_PORT):
            problems.append(f"{name}: {GATEWAY} {probe} is not {path} on the admin port")
    limits = (gateway.get("resources") or {}).get("limits") or {}
    if "memory" not in limits:
        problems.append(f"{name}: {GATEWAY} has no memory limit")
    config_map = next(
        (v["configMap"]["name"] for v in spec.get("volumes") or [] if "configMap" in v), None
    )
    if config_map not in configs:
        problems.append(f"{name}: mounts no ConfigMap with {CONFIG_KEY}")
    else:
        grace = spec.get("terminationGracePeriodSeconds", 30)
        drain = drain_timeout(configs[config_map])
        if grace <= drain + 5:
            problems.append(
                f"{name}: terminationGracePeriodSeconds {grace} leaves no margin over "
                f"drain_timeout {drain:g}s"
            )
    return problems


def gateway_env(spec):
    """The environment the gateway container gets; Secret values become placeholders."""
    inits = {c.get("name"): c for c in spec.get("initContainers") or []}
    env = {}
    for var in (inits.get(GATEWAY) or {}).get("env") or []:
        if "value" in var:
            env[var["name"]] = str(var["value"])
        elif "valueFrom" in var:
            env[var["name"]] = "placeholder-key-for-check"
    return env


def check_config(binary, origin, text, env):
    """`dialect-proxy check` on one ConfigMap's config, with the pod's environment only."""
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(text)
        path = f.name
    try:
        run_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env}
        out = subprocess.run(
            [binary, "check", "--config", path], env=run_env, capture_output=True, text=True
        )
    finally:
        os.unlink(path)
    if out.returncode != 0:
        return [f"{origin}: dialect-proxy check failed:\n{out.stderr.strip()}"]
    print(f"  {origin}: {out.stdout.strip()}")
    return []


def check_documents(docs, origin, binary=None):
    problems = []
    configs = {
        d["metadata"]["name"]: d["data"][CONFIG_KEY]
        for d in docs
        if d.get("kind") == "ConfigMap" and CONFIG_KEY in (d.get("data") or {})
    }
    workloads = 0
    for doc in docs:
        spec, meta = pod_spec(doc)
        if spec is None:
            continue
        workloads += 1
        name = f"{origin}: {doc['kind']}/{doc['metadata']['name']}"
        problems += restricted_problems(name, spec)
        problems += sidecar_problems(name, spec, meta, configs)
        if binary is not None:
            for volume in spec.get("volumes") or []:
                cm = (volume.get("configMap") or {}).get("name")
                if cm in configs:
                    origin = f"{name} ConfigMap/{cm}"
                    problems += check_config(binary, origin, configs[cm], gateway_env(spec))
        if spec.get("automountServiceAccountToken") is not False:
            problems.append(f"{name}: automountServiceAccountToken is not false")
    if workloads == 0:
        problems.append(f"{origin}: no workload")
    return problems


GOOD = """
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg}
data:
  dialect-proxy.toml: |
    drain_timeout = "30s"
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: ok}
spec:
  template:
    metadata:
      annotations: {prometheus.io/scrape: "true", prometheus.io/port: "9901", prometheus.io/path: /metrics}
    spec:
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 45
      securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
      initContainers:
        - name: install-drain
          args: [install, /opt/dialect-proxy]
          securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
        - name: dialect-proxy
          restartPolicy: Always
          ports: [{name: admin, containerPort: 9901}]
          livenessProbe: {httpGet: {path: /live, port: admin}}
          readinessProbe: {httpGet: {path: /ready, port: admin}}
          resources: {limits: {memory: 256Mi}}
          securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
      containers:
        - name: agent
          lifecycle: {preStop: {exec: {command: [/opt/dialect-proxy/dialect-proxy, drain, --admin, "127.0.0.1:9901"]}}}
          securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL], add: [NET_BIND_SERVICE]}}
      volumes:
        - {name: config, configMap: {name: cfg}}
"""

# Each breaks one rule of GOOD; the check must report every one.
BREAKAGES = {
    "privileged": ("drop: [ALL]}}\n      containers", "drop: [ALL]}, privileged: true}\n      containers"),
    "escalation": ("{allowPrivilegeEscalation: false, capabilities: {drop: [ALL], add", "{capabilities: {drop: [ALL], add"),
    "no drop ALL": ("drop: [ALL], add: [NET_BIND_SERVICE]", "drop: [], add: [NET_BIND_SERVICE]"),
    "added capability": ("add: [NET_BIND_SERVICE]", "add: [NET_ADMIN]"),
    "root": ("runAsNonRoot: true, runAsUser: 65532", "runAsUser: 0"),
    "no seccomp": (", seccompProfile: {type: RuntimeDefault}", ""),
    "unconfined": ("type: RuntimeDefault", "type: Unconfined"),
    "hostNetwork": ("automountServiceAccountToken: false", "automountServiceAccountToken: false\n      hostNetwork: true"),
    "hostPath": ("- {name: config, configMap: {name: cfg}}", "- {name: config, configMap: {name: cfg}}\n        - {name: h, hostPath: {path: /}}"),
    "token": ("automountServiceAccountToken: false", "automountServiceAccountToken: true"),
    "not a sidecar": ("restartPolicy: Always", "restartPolicy: OnFailure"),
    "no preStop": ("lifecycle: {preStop: {exec: {command: [/opt/dialect-proxy/dialect-proxy, drain, --admin, \"127.0.0.1:9901\"]}}}", "image: x"),
    "short grace": ("terminationGracePeriodSeconds: 45", "terminationGracePeriodSeconds: 30"),
    "no scrape": ('prometheus.io/scrape: "true"', 'prometheus.io/scrape: "false"'),
}


def self_test():
    good = list(yaml.safe_load_all(GOOD))
    problems = check_documents(good, "good")
    if problems:
        sys.exit("self-test: the good manifest was rejected:\n" + "\n".join(problems))
    for label, (old, new) in BREAKAGES.items():
        if old not in GOOD:
            sys.exit(f"self-test: breakage {label!r} does not apply")
        bad = list(yaml.safe_load_all(GOOD.replace(old, new, 1)))
        if not check_documents(bad, label):
            sys.exit(f"self-test: a manifest with {label!r} passed")
    print(f"  self-test: the good manifest passes, {len(BREAKAGES)} broken ones fail")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--self-test", action="store_true")
    parser.add_argument("--binary", help="dialect-proxy, for `check` on the ConfigMaps")
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    if args.self_test:
        self_test()
    problems = []
    for path in args.files:
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        problems += check_documents(docs, path, args.binary)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        sys.exit(1)
    for path in args.files:
        print(f"  {path}: restricted profile and sidecar recipe hold")


if __name__ == "__main__":
    main()
