"""Static checks of deploy/: every manifest parses and the pieces agree with each other and with mastwatch.

Nothing here runs docker or kubectl; a broken file, a port that drifts from deploy/mastwatch.yaml or a collector
pipeline that stops routing by traceID fails these tests.
"""

from __future__ import annotations

import json
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from mastwatch.config import load
from mastwatch.dashboards import rules
from tests.conftest import installed

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = None

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "kubernetes"
COMPOSE = DEPLOY / "compose"
CH = DEPLOY / "clickhouse"
IMAGE_CONFIG = "/etc/mastwatch/mastwatch.yaml"
LOADBALANCING = {"loadbalancing", "load_balancing"}  # the exporter's type, old and new name
# Graceful stop: gRPC grace 5s + processor drain 30s + store flush join 60s (service.py, processor.py, store).
SHUTDOWN_BUDGET_S = 95

YAML_FILES = sorted([*DEPLOY.rglob("*.yaml"), *DEPLOY.rglob("*.yml")])
XML_FILES = sorted(DEPLOY.rglob("*.xml"))


def _docs(path: Path) -> list:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]


def _port(endpoint: str) -> int:
    return int(str(endpoint).rpartition(":")[2])


def _seconds(value: str) -> float:
    m = re.fullmatch(r"(\d+)(s|m)", value)
    assert m, value
    return int(m.group(1)) * (60 if m.group(2) == "m" else 1)


@pytest.fixture(scope="module")
def config():
    return load(str(DEPLOY / "mastwatch.yaml"), environ={})


@pytest.fixture(scope="module")
def ports(config) -> dict[str, int]:
    return {"otlp-grpc": _port(config.receiver.grpc.endpoint), "otlp-http": _port(config.receiver.http.endpoint),
            "metrics": _port(config.exporters.prometheus.endpoint)}


@pytest.fixture(scope="module")
def k8s() -> dict[tuple[str, str], dict]:
    objects = {}
    for path in sorted(K8S.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            for doc in _docs(path):
                objects[(doc["kind"], doc["metadata"]["name"])] = doc
    return objects


@pytest.fixture(scope="module")
def compose() -> dict:
    return _docs(COMPOSE / "compose.yaml")[0]


def _mastwatch_services(compose: dict) -> dict[str, dict]:
    """The replicas: the mastwatch image running its default command (serve)."""
    return {name: s for name, s in compose["services"].items() if "command" not in s
            and isinstance(s.get("build"), dict) and s["build"].get("dockerfile") == "deploy/Dockerfile"}


def _compose_env(environment: dict, **variables: str) -> dict[str, str]:
    """A service's environment as the container sees it, ${VAR:-default} substituted from `variables`."""
    def substitute(value: str) -> str:
        return re.sub(r"\$\{(\w+):-([^}]*)\}", lambda m: variables.get(m.group(1), m.group(2)), str(value))

    return {key: substitute(value) for key, value in environment.items()}


def _config_in(service: dict, **variables: str):
    """The mastwatch configuration a compose service runs with."""
    env = _compose_env(service["environment"], **variables)
    mounts = dict(v.split(":")[:2][::-1] for v in service["volumes"])
    path = COMPOSE / mounts[env.pop("MASTWATCH_CONFIG")]
    return load(str(path), environ=env)


def _container(doc: dict) -> dict:
    containers = doc["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def _dockerfile() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", (DEPLOY / "Dockerfile").read_text(encoding="utf-8"))
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return [(ln.split(None, 1)[0].upper(), ln.split(None, 1)[1]) for ln in lines]


def healthcheck() -> list[str]:
    """The image's HEALTHCHECK command (run against a server in tests/test_security.py)."""
    (arg,) = [arg for instr, arg in _dockerfile() if instr == "HEALTHCHECK"]
    return json.loads(arg.split(" CMD ", 1)[1])


# --- every file parses -------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", YAML_FILES, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_yaml_parses(path):
    docs = _docs(path)
    assert docs, f"{path} is empty"
    if path.parent == K8S and path.name != "kustomization.yaml":
        for doc in docs:
            assert {"apiVersion", "kind", "metadata"} <= doc.keys() and doc["metadata"].get("name")
            assert "namespace" not in doc["metadata"], "manifests must stay namespace-agnostic"


@pytest.mark.parametrize("path", XML_FILES, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_xml_parses(path):
    assert ET.parse(path).getroot().tag == "clickhouse"


def test_expected_files_exist():
    assert len(YAML_FILES) >= 10 and len(XML_FILES) >= 4
    for rel in ("Dockerfile", "README.md", "mastwatch.yaml", "compose/compose.yaml", "compose/otelcol.yaml",
                "compose/prometheus.yml", "kubernetes/kustomization.yaml", "kubernetes/servicemonitor.yaml"):
        assert (DEPLOY / rel).is_file(), rel


def test_readme_describes_every_file():
    readme = (DEPLOY / "README.md").read_text(encoding="utf-8")
    for path in sorted(p for p in DEPLOY.rglob("*") if p.is_file() and p.name != "README.md"):
        assert path.name in readme, f"deploy/README.md does not mention {path.relative_to(DEPLOY)}"
    assert "test_deploy.py" in readme


# --- mastwatch configurations ------------------------------------------------------------------------------

def test_production_config(config):
    for endpoint in (config.receiver.grpc.endpoint, config.receiver.http.endpoint,
                     config.exporters.prometheus.endpoint):
        assert endpoint.startswith("0.0.0.0:")
    assert config.receiver.grpc.enabled and config.receiver.http.enabled
    assert config.exporters.store.enabled and config.exporters.store.path == "/data"


def test_configmap_config_loads_and_matches(k8s, config, tmp_path):
    data = k8s[("ConfigMap", "mastwatch-config")]["data"]
    (tmp_path / "mastwatch.yaml").write_text(data["mastwatch.yaml"], encoding="utf-8")
    assert load(str(tmp_path / "mastwatch.yaml"), environ={}) == config


# --- collector gateways ------------------------------------------------------------------------------------

def _collector_configs(k8s) -> dict[str, dict]:
    return {"compose": _docs(COMPOSE / "otelcol.yaml")[0],
            "kubernetes": yaml.safe_load(k8s[("ConfigMap", "otel-collector-config")]["data"]["otelcol.yaml"])}


def _check_collector(cfg: dict) -> dict:
    """Pipelines reference defined components; traces go only to loadbalancing exporters by traceID."""
    kinds = {"receivers": cfg.get("receivers") or {}, "processors": cfg.get("processors") or {},
             "exporters": cfg.get("exporters") or {}}
    service = cfg["service"]
    assert set(service.get("extensions", [])) <= set(cfg.get("extensions") or {})
    lb = {name: c for name, c in kinds["exporters"].items() if name.split("/")[0] in LOADBALANCING}
    assert lb, "no loadbalancing exporter"
    traces = [p for name, p in service["pipelines"].items() if name.split("/")[0] == "traces"]
    assert traces, "no traces pipeline"
    for pipeline in service["pipelines"].values():
        assert pipeline.get("receivers") and pipeline.get("exporters")
        for kind, defined in kinds.items():
            missing = set(pipeline.get(kind) or []) - set(defined)
            assert not missing, f"pipeline uses undefined {kind}: {missing}"
    for pipeline in traces:
        assert set(pipeline["exporters"]) <= set(lb), "traces must only leave through the loadbalancing exporter"
    for exporter in lb.values():
        assert exporter["routing_key"] == "traceID"
        assert "otlp" in exporter["protocol"] and "endpoint" not in (exporter["protocol"]["otlp"] or {})
        assert len(exporter["resolver"]) == 1, "configure exactly one resolver"
    assert len(lb) == 1
    return next(iter(lb.values()))


@pytest.mark.parametrize("where", ["compose", "kubernetes"])
def test_collector_routes_by_trace_id(where, k8s):
    _check_collector(_collector_configs(k8s)[where])


def test_compose_collector_targets_every_replica(k8s, compose, ports):
    lb = _check_collector(_collector_configs(k8s)["compose"])
    hostnames = lb["resolver"]["static"]["hostnames"]
    assert {h.rpartition(":")[0] for h in hostnames} == set(_mastwatch_services(compose))
    assert {_port(h) for h in hostnames} == {ports["otlp-grpc"]}


def test_k8s_collector_resolves_headless_service(k8s, ports):
    lb = _check_collector(_collector_configs(k8s)["kubernetes"])
    resolver = lb["resolver"]["k8s"]
    name, _, namespace = resolver["service"].partition(".")
    svc = k8s[("Service", name)]
    assert svc["spec"]["clusterIP"] == "None"
    assert resolver["ports"] == [ports["otlp-grpc"]]
    assert ports["otlp-grpc"] in {p["port"] for p in svc["spec"]["ports"]}
    env = {e["name"]: e for e in _container(k8s[("Deployment", "otel-collector")]).get("env", [])}
    for var in re.findall(r"\$\{env:(\w+)\}", namespace):
        assert env[var]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"


def test_k8s_resolver_rbac(k8s):
    spec = k8s[("Deployment", "otel-collector")]["spec"]["template"]["spec"]
    account = spec["serviceAccountName"]
    assert ("ServiceAccount", account) in k8s
    bindings = [b for (kind, _), b in k8s.items() if kind == "RoleBinding"
                and {"kind": "ServiceAccount", "name": account} in [
                    {k: s[k] for k in ("kind", "name")} for s in b["subjects"]]]
    assert bindings
    role = k8s[("Role", bindings[0]["roleRef"]["name"])]
    granted = {(group, res, verb) for rule in role["rules"] for group in rule["apiGroups"]
               for res in rule["resources"] for verb in rule["verbs"]}
    for verb in ("get", "list", "watch"):
        assert ("discovery.k8s.io", "endpointslices", verb) in granted
        assert ("", "endpoints", verb) in granted


# --- ports and wiring --------------------------------------------------------------------------------------

def test_dockerfile(config, ports):
    instructions = _dockerfile()
    get = lambda name: [arg for instr, arg in instructions if instr == name]  # noqa: E731
    assert get("FROM") == ["python:3.11-slim AS build", "python:3.11-slim"]
    assert any("gcc" in arg for arg in get("RUN")), "the build stage compiles the C decoder"
    assert {int(p) for arg in get("EXPOSE") for p in arg.split()} == set(ports.values())
    assert get("VOLUME")[-1] == config.exporters.store.path
    assert get("USER")[-1].split(":")[0] not in ("root", "0")
    assert json.loads(get("ENTRYPOINT")[-1]) == ["mastwatch"]
    assert json.loads(get("CMD")[-1]) == ["serve", "--config", IMAGE_CONFIG]
    assert healthcheck()[0] == "python" and "MASTWATCH_HEALTH_URL=http://127.0.0.1:9464/healthz" in get("ENV")
    copies = [arg.split() for arg in get("COPY") if not arg.startswith("--from")]
    assert ["deploy/mastwatch.yaml", IMAGE_CONFIG] in copies
    if tomllib is None:
        return
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["scripts"]["mastwatch"]
    copied = {src.rstrip("/") for args in copies for src in args[:-1]}
    roots = {d.split("/")[0] for d in pyproject["tool"]["setuptools"]["package-dir"].values()}
    assert roots | {"pyproject.toml", "setup.py", pyproject["project"]["readme"]} <= copied, \
        "the image must be built from every package directory, pyproject.toml, setup.py (the C extensions and " \
        "the compiled modules) and the readme"
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text(encoding="utf-8").split()
    assert all(f"!{src}" in ignore for src in copied if src != "deploy/mastwatch.yaml"), "copied, so not ignored"


def test_compose_ports_and_mounts(compose, ports, k8s):
    services = _mastwatch_services(compose)
    assert len(services) == 2
    for service in services.values():
        assert service["build"]["context"] == "../.."
        assert (COMPOSE / service["build"]["context"] / service["build"]["dockerfile"]).resolve() == \
            (DEPLOY / "Dockerfile").resolve()
        assert {int(p) for p in service["expose"]} == set(ports.values())
        assert f"../mastwatch.yaml:{IMAGE_CONFIG}:ro" in service["volumes"]
        assert any(v.endswith(":/data") for v in service["volumes"])
        assert _seconds(service["stop_grace_period"]) >= SHUTDOWN_BUDGET_S
    otelcol = compose["services"]["otelcol"]
    receivers = _collector_configs(k8s)["compose"]["receivers"]["otlp"]["protocols"]
    published = {int(p.split(":")[-1]) for p in otelcol["ports"]}
    assert published == {_port(receivers["grpc"]["endpoint"]), _port(receivers["http"]["endpoint"])}
    assert published == {ports["otlp-grpc"], ports["otlp-http"]}, "agents use the standard OTLP ports"
    for service in compose["services"].values():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (COMPOSE / source).exists(), volume


def test_prometheus_scrapes_metrics_port(compose, ports, config):
    prometheus = _docs(COMPOSE / "prometheus.yml")[0]
    jobs = {job["job_name"]: [t for sc in job["static_configs"] for t in sc["targets"]]
            for job in prometheus["scrape_configs"]}
    targets = jobs[config.rules.health.job]
    assert targets and {_port(t) for t in targets} == {ports["metrics"]}
    assert {t.rpartition(":")[0] for t in targets} == set(_mastwatch_services(compose))
    # the gateway's own metrics, where its telemetry reader serves them
    collector = yaml.safe_load((COMPOSE / "otelcol.yaml").read_text())
    reader = collector["service"]["telemetry"]["metrics"]["readers"][0]["pull"]["exporter"]["prometheus"]
    assert jobs[config.rules.health.gateway_job] == [f"otelcol:{reader['port']}"]
    assert str(reader["port"]) in compose["services"]["otelcol"]["expose"]


def test_k8s_statefulset(k8s, config, ports):
    sts = k8s[("StatefulSet", "mastwatch")]
    pod = sts["spec"]["template"]["spec"]
    container = _container(sts)
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == ports
    assert container["readinessProbe"]["tcpSocket"]["port"] == ports["otlp-http"]
    live = container["livenessProbe"]["httpGet"]
    assert (live["path"], live["port"]) == ("/healthz", ports["metrics"])  # no token needed
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    assert pod["terminationGracePeriodSeconds"] >= SHUTDOWN_BUDGET_S
    assert int(sts["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"]) == ports["metrics"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["data"] == config.exporters.store.path
    assert "data" in {t["metadata"]["name"] for t in sts["spec"]["volumeClaimTemplates"]}
    config_volume = next(v for v in pod["volumes"] if v["name"] == "config")
    assert "mastwatch.yaml" in k8s[("ConfigMap", config_volume["configMap"]["name"])]["data"]
    assert container["args"] == ["serve", "--config", f"{mounts['config']}/mastwatch.yaml"] == \
        ["serve", "--config", IMAGE_CONFIG]
    svc = k8s[("Service", sts["spec"]["serviceName"])]
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"].items() <= sts["spec"]["template"]["metadata"]["labels"].items()
    for port in svc["spec"]["ports"]:
        assert ports[port["targetPort"]] == port["port"]


def test_k8s_collector_wiring(k8s):
    deploy = k8s[("Deployment", "otel-collector")]
    container = _container(deploy)
    volume = next(v for v in deploy["spec"]["template"]["spec"]["volumes"] if v["name"] == "config")
    cm = k8s[("ConfigMap", volume["configMap"]["name"])]
    mount = next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == "config")
    (key,) = cm["data"]
    assert f"--config={mount}/{key}" in container["args"]
    cfg = yaml.safe_load(cm["data"][key])
    receiver_ports = {_port(p["endpoint"]) for p in cfg["receivers"]["otlp"]["protocols"].values()}
    container_ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert receiver_ports <= set(container_ports.values())
    health = _port(cfg["extensions"]["health_check"]["endpoint"])
    assert container["readinessProbe"]["httpGet"]["port"] == health
    metrics = cfg["service"]["telemetry"]["metrics"]["readers"][0]["pull"]["exporter"]["prometheus"]["port"]
    assert container_ports["metrics"] == metrics
    svc = k8s[("Service", "otel-collector")]
    assert svc["spec"]["selector"].items() <= deploy["spec"]["template"]["metadata"]["labels"].items()
    assert {container_ports[p["targetPort"]] for p in svc["spec"]["ports"]} == receiver_ports | {metrics}
    # the queue's directory is a writable volume (the root filesystem is read-only)
    queue_dir = cfg["extensions"]["file_storage/queue"]["directory"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in deploy["spec"]["template"]["spec"]["volumes"]}
    assert "emptyDir" in volumes[mounts[queue_dir]] or "persistentVolumeClaim" in volumes[mounts[queue_dir]]


def test_servicemonitor(k8s, ports, config):
    monitor, gateway = _docs(K8S / "servicemonitor.yaml")
    assert monitor["kind"] == gateway["kind"] == "ServiceMonitor"
    svc = k8s[("Service", "mastwatch-headless")]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    by_name = {p["name"]: p["port"] for p in svc["spec"]["ports"]}
    for endpoint in monitor["spec"]["endpoints"]:
        assert by_name[endpoint["port"]] == ports["metrics"] and endpoint["path"] == "/metrics"
        # mastwatch's own `service` label (the agents') must survive the Operator's target labels
        assert endpoint["honorLabels"] is True
    collector = k8s[("Service", "otel-collector")]
    assert gateway["spec"]["selector"]["matchLabels"].items() <= collector["metadata"]["labels"].items()
    assert collector["metadata"]["labels"][gateway["spec"]["jobLabel"]] == config.rules.health.gateway_job
    assert {e["port"] for e in gateway["spec"]["endpoints"]} <= {p["name"] for p in collector["spec"]["ports"]}


def test_kustomization_lists_manifests():
    kustomization = _docs(K8S / "kustomization.yaml")[0]
    resources = kustomization["resources"]
    assert len(resources) == len(set(resources))
    for resource in resources:
        assert (K8S / resource).is_file(), resource
    optional = {"kustomization.yaml", "servicemonitor.yaml", rules.PROMETHEUS_RULE, "mastwatch-alertmanagerconfig.yaml"}
    assert {p.name for p in K8S.glob("*.yaml")} - optional == set(resources)
    for name in optional - {"kustomization.yaml"}:
        assert name in (K8S / "kustomization.yaml").read_text(encoding="utf-8")


# --- ClickHouse ---------------------------------------------------------------------------------------------

def test_clickhouse_cluster():
    root = ET.parse(CH / "config.d" / "cluster.xml").getroot()
    (cluster,) = list(root.find("remote_servers"))
    shards = cluster.findall("shard")
    assert len(shards) == 2
    for shard in shards:
        assert shard.findtext("internal_replication") == "true"
        assert len(shard.findall("replica")) == 2
    hosts = [r.findtext("host") for r in cluster.iter("replica")]
    assert len(set(hosts)) == 4
    assert "{shard}" in root.findtext("default_replica_path") and root.findtext("default_replica_name") == "{replica}"
    macros = ET.parse(CH / "config.d" / "macros.xml").getroot().find("macros")
    assert macros.findtext("cluster") == cluster.tag and macros.findtext("replica") in hosts
    assert macros.findtext("shard")
    keeper = ET.parse(CH / "keeper.xml").getroot().find("keeper_server")
    raft = {s.findtext("hostname") for s in keeper.find("raft_configuration").findall("server")}
    nodes = root.find("zookeeper").findall("node")
    assert {n.findtext("host") for n in nodes} == raft and len(raft) % 2 == 1
    assert {n.findtext("port") for n in nodes} == {keeper.findtext("tcp_port")}


def test_clickhouse_user(compose):
    user = ET.parse(CH / "users.d" / "mastwatch.xml").getroot().find("users/mastwatch")
    assert user is not None
    password = user.find("password")
    assert password is not None and password.get("from_env")
    assert password.get("from_env") in compose["services"]["clickhouse"]["environment"]
    grants = " ".join(q.text for q in user.find("grants").findall("query"))
    assert "ON mastwatch.*" in grants and "INSERT" in grants


# --- Grafana and the rules ----------------------------------------------------------------------------------

def _mounts(service: dict) -> dict[str, str]:
    """container path -> volume or host path"""
    return {v.split(":")[1]: v.split(":")[0] for v in service.get("volumes", [])}


def test_compose_generates_dashboards_and_rules_for_grafana_and_prometheus(compose, config):
    services = compose["services"]
    job = services["mastwatch-config"]
    assert job["build"] == services["mastwatch-1"]["build"] and job["image"] == services["mastwatch-1"]["image"]
    assert job["restart"] == "no" and job["entrypoint"] == ["sh", "-c"]
    (command,) = job["command"]
    outs = dict(re.findall(r"mastwatch (dashboards|rules) --out (\S+)", command))
    assert set(outs) == {"dashboards", "rules"} and "&&" in command
    job_mounts = _mounts(job)
    generated = _config_in(job)
    # Prometheus loads the rules file from the volume the job wrote it into, and scrapes the job the rules name.
    prometheus = services["prometheus"]
    prometheus_yml = _docs(COMPOSE / "prometheus.yml")[0]
    (rule_file,) = prometheus_yml["rule_files"]
    rules_dir, _, name = rule_file.rpartition("/")
    assert name == rules.FILENAME and _mounts(prometheus)[rules_dir] == job_mounts[outs["rules"]]
    assert [j["job_name"] for j in prometheus_yml["scrape_configs"]] == [generated.rules.health.job,
                                                                          generated.rules.health.gateway_job]
    # Grafana reads the provisioning files and the dashboards from the volume the job wrote them into.
    grafana = services["grafana"]
    assert grafana["image"].startswith("grafana/grafana:")
    assert "grafana-clickhouse-datasource" in grafana["environment"]["GF_PLUGINS_PREINSTALL"].split(",")
    (grafana_dir,) = [path for path, source in _mounts(grafana).items() if source == job_mounts[outs["dashboards"]]]
    assert grafana["environment"]["GF_PATHS_PROVISIONING"] == f"{grafana_dir}/provisioning"
    assert generated.dashboards.path == f"{grafana_dir}/dashboards"
    assert generated.dashboards.prometheus_url == f"http://prometheus:{_port(prometheus['ports'][0])}"
    clickhouse = services["clickhouse"]
    assert generated.dashboards.clickhouse_host == "clickhouse"
    assert f"127.0.0.1:{generated.dashboards.clickhouse_port}:{generated.dashboards.clickhouse_port}" in \
        clickhouse["ports"]
    assert "MASTWATCH_CLICKHOUSE_PASSWORD" in grafana["environment"]
    for dependant in (prometheus, grafana):
        assert dependant["depends_on"]["mastwatch-config"] == {"condition": "service_completed_successfully"}
    assert {"prometheus-rules", "grafana-files"} <= set(compose["volumes"])


def test_compose_replicas_write_to_clickhouse_when_asked(compose, config):
    users = ET.parse(CH / "users.d" / "mastwatch.xml").getroot().find("users")
    clickhouse = compose["services"]["clickhouse"]
    for replica in _mastwatch_services(compose).values():
        default = _config_in(replica)  # by default: the embedded store in the volume, as in the image
        assert default.exporters.store.engine == "chdb" and default.exporters.store.path == config.exporters.store.path
        assert (default.receiver, default.processor) == (config.receiver, config.processor)
        store = _config_in(replica, MASTWATCH_STORE_ENGINE="clickhouse").exporters.store
        assert store.engine == "clickhouse" and store.url == "http://clickhouse:8123"
        assert "127.0.0.1:8123:8123" in clickhouse["ports"] and users.find(store.user) is not None
        assert store.password.get_secret_value() == _compose_env(clickhouse["environment"])[
            "MASTWATCH_CLICKHOUSE_PASSWORD"]


def test_compose_prometheus_config_loads_the_generated_rules(tmp_path, config):
    promtool = installed("promtool")
    prometheus_yml = _docs(COMPOSE / "prometheus.yml")[0]
    written = rules.write(config, tmp_path / "rules")
    prometheus_yml["rule_files"] = [str(written)]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(prometheus_yml))
    result = subprocess.run([promtool, "check", "config", str(tmp_path / "prometheus.yml")], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0 and "SUCCESS" in result.stdout, result.stdout + result.stderr


def test_k8s_prometheus_rule_is_generated_from_the_production_config(config, tmp_path):
    written = rules.write(config, tmp_path, operator=True)
    committed = K8S / rules.PROMETHEUS_RULE
    assert committed.read_text() == written.read_text(), \
        "regenerate: mastwatch rules --config deploy/mastwatch.yaml --prometheus-rule --out deploy/kubernetes"
    rule = _docs(committed)[0]
    assert rule["spec"] == rules.rules(config) and rule["kind"] == "PrometheusRule"
    monitor = _docs(K8S / "servicemonitor.yaml")[0]
    service = _docs(K8S / "mastwatch-service.yaml")[0]
    assert service["metadata"]["labels"][monitor["spec"]["jobLabel"]] == config.rules.health.job


# Settings the Collector documents for what the gateway configs use (the loadbalancing exporter's Config and the
# OTLP exporter, queue, retry, k8s resolver, file_storage and telemetry settings they embed). A misspelt or moved
# key fails here instead of at the Collector's start.
COLLECTOR_SETTINGS = {
    "loadbalancing": {"routing_key", "routing_attributes", "timeout", "retry_on_failure", "sending_queue", "protocol",
                      "resolver"},
    "otlp": {"endpoint", "tls", "timeout", "sending_queue", "retry_on_failure", "compression", "headers",
             "keepalive", "balancer_name", "auth", "write_buffer_size", "read_buffer_size", "wait_for_ready"},
    "sending_queue": {"enabled", "num_consumers", "queue_size", "storage", "sizer", "block_on_overflow",
                      "wait_for_result", "batch"},
    "retry_on_failure": {"enabled", "initial_interval", "randomization_factor", "multiplier", "max_interval",
                         "max_elapsed_time"},
    "resolver": {"static", "dns", "k8s", "aws_cloud_map"},
    "k8s": {"service", "ports", "timeout", "return_hostnames"},
    "static": {"hostnames"},
    "file_storage": {"directory", "timeout", "create_directory", "compaction", "fsync", "directory_permissions"},
    "metrics": {"level", "readers", "views"},
}


def _gateway_configs(k8s) -> dict[str, dict]:
    cm = k8s[("ConfigMap", "otel-collector-config")]
    return {"compose": yaml.safe_load((COMPOSE / "otelcol.yaml").read_text()),
            "k8s": yaml.safe_load(next(iter(cm["data"].values())))}


@pytest.mark.parametrize("where", ["compose", "k8s"])
def test_gateway_lets_backpressure_through_and_keeps_what_it_accepted(where, k8s):
    """Retries and a persistent queue above the per-replica exporters (a batch is routed again when its replica
    goes away), none in them (their queue would acknowledge agents before mastwatch accepts; their retries would
    stick to a replica that is gone); a full queue holds the agents back rather than dropping."""
    cfg = _gateway_configs(k8s)[where]
    (name,) = set(cfg["exporters"]) & LOADBALANCING
    lb = cfg["exporters"][name]
    queue, retry = lb["sending_queue"], lb["retry_on_failure"]
    assert queue["enabled"] and queue["block_on_overflow"] is True
    assert queue["storage"] in cfg["service"]["extensions"] and queue["storage"].startswith("file_storage")
    assert retry["enabled"] and _seconds_or_zero(retry["max_elapsed_time"]) == 0
    otlp = lb["protocol"]["otlp"]
    assert otlp["sending_queue"] == {"enabled": False} and otlp["retry_on_failure"] == {"enabled": False}
    assert "endpoint" not in otlp
    assert not any(p.startswith("batch") for p in cfg["service"]["pipelines"]["traces"].get("processors", []))
    for section, keys in (("loadbalancing", lb), ("otlp", otlp), ("sending_queue", queue),
                          ("retry_on_failure", retry), ("resolver", lb["resolver"]),
                          ("file_storage", cfg["extensions"][queue["storage"]]),
                          ("metrics", cfg["service"]["telemetry"]["metrics"])):
        unknown = set(keys) - COLLECTOR_SETTINGS[section]
        assert not unknown, f"{where}: {section}: {unknown}"
    for kind, resolver in lb["resolver"].items():
        assert set(resolver) <= COLLECTOR_SETTINGS[kind]


def _seconds_or_zero(value) -> float:
    return 0 if value in (0, "0", "0s") else _seconds(value)


def test_k8s_gateway_rings_on_stable_pod_names(k8s):
    """With return_hostnames the ring is keyed by the StatefulSet's pod names, which the headless Service's
    endpoints carry because the StatefulSet names it as its serviceName; a rollout that gives pods new IPs moves no
    traceID to another replica."""
    resolver = _gateway_configs(k8s)["k8s"]["exporters"]["loadbalancing"]["resolver"]["k8s"]
    assert resolver["return_hostnames"] is True
    service = resolver["service"].split(".")[0]
    assert k8s[("StatefulSet", "mastwatch")]["spec"]["serviceName"] == service
    assert k8s[("Service", service)]["spec"]["clusterIP"] == "None"


def test_kubernetes_manifests_match_the_api_schemas():
    """Every manifest of a built-in kind against the Kubernetes API's schema (strict: unknown fields fail)."""
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    checked = 0
    for path in sorted(K8S.glob("*.yaml")):
        for doc in _docs(path):
            if doc["apiVersion"].startswith(("monitoring.coreos.com", "kustomize.config")):
                continue  # custom resources: no schema in the API's
            kubernetes_validate.validate(doc, "1.33.0", strict=True)
            checked += 1
    assert checked >= 8


def test_compose_file_matches_the_compose_spec():
    jsonschema = pytest.importorskip("jsonschema")
    builtin = pytest.importorskip("check_jsonschema.builtin_schemas")
    schema = builtin.get_builtin_schema("vendor.compose-spec")
    jsonschema.validate(_docs(COMPOSE / "compose.yaml")[0], schema)
