"""docker-compose.yml, the Dockerfile and deploy/k8s, checked without Docker or a cluster.

The compose services must run exactly the argument lists of tests/harness/topology.py (which the network
namespace test runs for real); every manifest's arguments must parse with Locust + llm-locust
(config files from the ConfigMap included); workers must point at the master's Service; API keys
only ever come from the environment or a Secret.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import kubernetes_validate
import locust
import yaml
from conftest import ROOT, options
from harness.topology import master_args, sim_args, worker_args

from llm_locust.cli import build_parser
from llm_locust.config.settings import Settings
from llm_locust.report.compare_cli import verdict_limits

CONTAINER_LOCUSTFILES = "/home/locust/locustfiles"
_VAR = re.compile(r"\$\{(?P<name>[A-Z_][A-Z0-9_]*)(?::-(?P<default>[^}]*))?\}")


def expand(value: str, env: dict[str, str]) -> str:
    """Compose's variable interpolation: ${NAME} and ${NAME:-default} from `env`."""
    return _VAR.sub(lambda m: env.get(m["name"]) or (m["default"] or ""), value)


def compose(*files: str, env: dict[str, str] | None = None) -> dict:
    """The services of the compose files, merged like `docker compose -f A -f B` (top-level keys of a service)."""
    services: dict = {}
    for name in files:
        doc = yaml.safe_load((ROOT / name).read_text())
        for service, spec in doc["services"].items():
            services.setdefault(service, {}).update(spec)
    env = env or {}
    for spec in services.values():
        for key in ("command", "entrypoint"):
            if key in spec:
                spec[key] = [expand(arg, env) for arg in spec[key]]
    return services


def test_compose_runs_the_commands_the_tests_run():
    services = compose("docker-compose.yml")
    assert services["sim"]["command"] == ["llm-locust", "sim", *sim_args()]
    assert services["master"]["command"] == master_args(
        locustfile=f"{CONTAINER_LOCUSTFILES}/chat.py",
        config="/home/locust/llm-locust.conf",
        results_dir="/results/run",
        host="http://sim:8000",
    )
    assert services["worker"]["command"] == worker_args(f"{CONTAINER_LOCUSTFILES}/chat.py", "master")
    for spec in services.values():  # the image's entrypoint: `locust OPTIONS`, or a command, as the owner of /results
        assert "entrypoint" not in spec and "user" not in spec

    env = {"LLM_HOST": "https://api.example.com", "MODEL": "m1", "WORKERS": "6", "USERS": "300", "SPAWN_RATE": "20",
           "RUN_TIME": "4h", "MAX_TOKENS": "256", "PROMPT_TOKENS": "512", "RUN_NAME": "nightly",
           "LOCUSTFILE": "soak.py"}  # fmt: skip
    services = compose("docker-compose.yml", env=env)
    assert services["master"]["command"] == master_args(
        locustfile=f"{CONTAINER_LOCUSTFILES}/soak.py",
        config="/home/locust/llm-locust.conf",
        results_dir="/results/nightly",
        host="https://api.example.com",
        workers=6,
        users=300,
        spawn_rate=20,
        run_time="4h",
        model="m1",
        max_tokens=256,
        prompt_tokens=512,
    )
    assert services["worker"]["deploy"]["replicas"] == "${WORKERS:-2}"  # as many as the master expects


def test_compose_topology_healthchecks_results_and_secrets():
    services = compose("docker-compose.yml")
    master, worker, sim = services["master"], services["worker"], services["sim"]
    assert master["depends_on"] == {"sim": {"condition": "service_healthy"}}
    assert worker["depends_on"] == {"master": {"condition": "service_healthy"}}
    assert "/health" in " ".join(sim["healthcheck"]["test"]) and "5557" in " ".join(master["healthcheck"]["test"])
    assert "./results:/results" in master["volumes"]
    for spec in services.values():  # one image; the key only where requests are sent, from the environment
        assert spec["build"] == "." and spec["image"] == "llm-locust:latest"
    secrets = {"OPENAI_API_KEY": "${OPENAI_API_KEY:-}", "LLM_LOCUST_HEADERS": "${LLM_LOCUST_HEADERS:-}",
               "LLM_LOCUST_MASTER_SECRET": "${LLM_LOCUST_MASTER_SECRET:-}",
               "LLM_LOCUST_MASTER_SECRET_FILE": "/run/llm-locust/master-secret"}  # fmt: skip
    assert master["environment"] == worker["environment"] == secrets  # each worker its own: none crosses 5557
    assert "link:/run/llm-locust" in master["volumes"] and worker["volumes"] == ["link:/run/llm-locust"]
    for files in (("docker-compose.yml",), ("docker-compose.yml", "docker-compose.ui.yml"),
                  ("docker-compose.yml", "docker-compose.prometheus.yml")):  # fmt: skip
        published = [str(port) for spec in compose(*files).values() for port in spec.get("ports", ())]
        assert not [port for port in published if "5557" in port], files  # the master port: never published
    assert "environment" not in sim
    assert "OPENAI_API_KEY" not in (ROOT / "Dockerfile").read_text().replace("# ", "").split("FROM", 1)[1].upper()


def test_compose_web_ui_override_serves_8089_without_headless():
    master = compose("docker-compose.yml", "docker-compose.ui.yml")["master"]
    assert [expand(port, {}) for port in master["ports"]] == ["127.0.0.1:8089:8089"]  # loopback unless WEB_UI_BIND
    assert expand(master["ports"][0], {"WEB_UI_BIND": "0.0.0.0:9000"}) == "0.0.0.0:9000:8089"
    assert "8089" in " ".join(master["healthcheck"]["test"])
    command = master["command"]
    assert "--headless" not in command and "--master" in command
    assert not any(arg.startswith(("--expect-workers", "--run-time")) for arg in command)
    parsed = options(*local(command))
    assert parsed.master and not parsed.headless and parsed.host == "http://sim:8000"
    assert parsed.web_host == "0.0.0.0"  # the container's interface, published on the host's loopback


def test_compose_prometheus_override_exports_the_master_and_provisions_grafana():
    base = compose("docker-compose.yml")["master"]["command"]
    services = compose("docker-compose.yml", "docker-compose.prometheus.yml")
    assert services["master"]["command"] == [*base, "--prometheus-port=9646", "--prometheus-host=0.0.0.0"]
    parsed = options(*local(services["master"]["command"]))
    export = Settings.from_options(parsed).export
    assert (export.prometheus_port, export.prometheus_host) == (9646, "0.0.0.0")
    scrape = yaml.safe_load((ROOT / "deploy/grafana/prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in scrape["scrape_configs"]}
    assert jobs["llm-locust"]["static_configs"][0]["targets"] == ["master:9646"]
    assert {jobs["vllm"]["metrics_path"], jobs["dcgm"]["metrics_path"]} == {"/metrics", "/gpu-metrics"}
    for service in ("prometheus", "grafana"):
        for volume in services[service]["volumes"]:
            assert (ROOT / volume.split(":")[0]).exists(), volume
        assert all(expand(port, {}).startswith("127.0.0.1:") for port in services[service]["ports"])  # loopback
    assert expand(services["prometheus"]["image"], {}) == "prom/prometheus:v2.53.2"  # PROMETHEUS_IMAGE: the stand-in
    assert services["grafana"]["profiles"] == ["grafana"] and "profiles" not in services["prometheus"]
    source = yaml.safe_load((ROOT / "deploy/grafana/provisioning/datasources/prometheus.yml").read_text())
    assert source["datasources"][0]["url"] == "http://prometheus:9090"
    dashboards = yaml.safe_load((ROOT / "deploy/grafana/provisioning/dashboards/llm-locust.yml").read_text())
    mounted = services["grafana"]["volumes"][1].split(":")[1]
    assert Path(mounted).parent == Path(dashboards["providers"][0]["options"]["path"])


def test_dockerfile_builds_on_the_official_image_of_the_tested_locust():
    text = (ROOT / "Dockerfile").read_text()
    assert f"ARG LOCUST_VERSION={locust.__version__}" in text  # the stand-in (build-base.sh) reads it too
    assert "ARG BASE_IMAGE=locustio/locust:${LOCUST_VERSION}" in text and "FROM ${BASE_IMAGE}" in text
    assert text.rstrip().endswith('ENTRYPOINT ["llm-locust-entrypoint"]')
    for source in re.findall(r"^COPY (?!--from)(.+) \S+$", text, re.M):
        for path in source.split():
            assert (ROOT / path).exists(), path
    assert ".venv" in (ROOT / ".dockerignore").read_text().split()


def k8s() -> dict[str, dict]:
    """Every object of deploy/k8s by "Kind/name"."""
    objects = {}
    for path in sorted((ROOT / "deploy" / "k8s").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            name = doc["metadata"].get("name") or doc["metadata"]["generateName"]
            objects[f"{doc['kind']}/{name}"] = doc
    return objects


def pod_spec(obj: dict) -> dict:
    """The pod template's spec of a Deployment, Job or CronJob."""
    spec = obj["spec"]["jobTemplate"]["spec"] if obj["kind"] == "CronJob" else obj["spec"]
    return spec["template"]


def local(args: list[str], configmap_dir: Path | None = None) -> list[str]:
    """Container paths of `args` made local: locustfiles and the compose config file from the repository,
    /etc/llm-locust (the ConfigMap's mount) from `configmap_dir`."""
    paths = {
        CONTAINER_LOCUSTFILES: str(ROOT / "locustfiles"),
        "/home/locust/llm-locust.conf": str(ROOT / "deploy" / "llm-locust.conf"),
        "/etc/llm-locust": str(configmap_dir),
    }
    for container, here in paths.items():
        args = [arg.replace(container, here) for arg in args]
    return args


def soak_then_history(command: list[str]) -> None:
    """The CronJob's command: a shell running the image's entrypoint with the container's args (the soak), then
    `llm-locust history` over the soaks' folders, whose arguments parse; the soak's failure code comes first."""
    shell, flag, script, _name = command
    assert (shell, flag) == ("/bin/sh", "-c") and script.startswith('llm-locust-entrypoint "$@"; run=$?')
    (line,) = [line for line in script.splitlines() if line.startswith("llm-locust history ")]
    words = shlex.split(line.split(";")[0])
    args = build_parser().parse_args(words[1:])
    assert args.run.__module__ == "llm_locust.report.history_cli" and args.folders == ["/results/soak-*"]
    assert verdict_limits(args) == {"ttft_p99_ms": 0.2, "tpot_p50_ms": 0.1, "output_tokens_per_s": 0.1}
    assert str(args.output).startswith("/results/") and 'if [ "$run" -ne 0 ]; then exit "$run"; fi' in script


def test_k8s_manifests_wire_master_workers_settings_and_results(tmp_path):
    objects = k8s()
    config = objects["ConfigMap/llm-locust-settings"]["data"]
    service = objects["Service/llm-locust-master"]
    worker = objects["Deployment/llm-locust-worker"]
    for name, text in config.items():
        (tmp_path / name).write_text(text)
    masters = [objects[k] for k in ("Deployment/llm-locust-master", "Job/llm-locust-run-", "CronJob/llm-locust-soak")]

    (worker_container,) = pod_spec(worker)["spec"]["containers"]
    assert worker_container["args"] == worker_args(f"{CONTAINER_LOCUSTFILES}/chat.py", "llm-locust-master")
    for obj in (worker, *masters):  # as in the compose stack tests/e2e/test_containers.py runs: the image's
        template = pod_spec(obj)  # entrypoint runs `locust ARGS` (options first), here as a non-root user
        (container,) = template["spec"]["containers"]
        assert container["args"][0].startswith("--locustfile="), obj["kind"]
        if obj["kind"] == "CronJob":  # the soak through the entrypoint, then the history of the soaks
            soak_then_history(container["command"])
        else:
            assert "command" not in container, obj["kind"]
        assert template["spec"]["securityContext"]["runAsNonRoot"] is True, obj["kind"]
    assert {p["port"] for p in service["spec"]["ports"]} == {5557} and service["spec"]["type"] == "ClusterIP"
    policy = objects["NetworkPolicy/llm-locust-master"]["spec"]  # the master port: from the worker pods only
    (zmq_rule,) = [rule for rule in policy["ingress"] if {"protocol": "TCP", "port": 5557} in rule["ports"]]
    assert zmq_rule["ports"] == [{"protocol": "TCP", "port": 5557}]
    assert zmq_rule["from"] == [{"podSelector": {"matchLabels": pod_spec(worker)["metadata"]["labels"]}}]
    for master in masters:
        template = pod_spec(master)
        labels = template["metadata"]["labels"]
        assert service["spec"]["selector"].items() <= labels.items(), master["kind"]  # the Service finds it
        assert policy["podSelector"]["matchLabels"].items() <= labels.items(), master["kind"]  # and the policy
        (container,) = template["spec"]["containers"]
        args = container["args"]
        volumes = {v["name"]: v for v in template["spec"]["volumes"]}
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        assert (
            volumes["settings"]["configMap"]["name"] == "llm-locust-settings"
            and mounts["settings"] == "/etc/llm-locust"
        )
        (conf,) = [a.split("/")[-1] for a in args if a.startswith("--config=/etc/llm-locust/")]
        assert conf in config
        assert volumes["results"]["persistentVolumeClaim"]["claimName"] == "llm-locust-results"
        assert any(a.startswith("--results-dir=/results/") for a in args)
        env = {e["name"]: e for e in container["env"]}
        for name in ("OPENAI_API_KEY", "LLM_LOCUST_HEADERS"):  # the workers get the same (below): none crosses 5557
            assert env[name]["valueFrom"]["secretKeyRef"] == {
                "name": "llm-locust-api-key",
                "key": name,
                "optional": True,
            }
        link = {"name": "llm-locust-master-secret", "key": "LLM_LOCUST_MASTER_SECRET"}  # required: no pod without
        assert env["LLM_LOCUST_MASTER_SECRET"]["valueFrom"]["secretKeyRef"] == link
        assert env.items() >= {e["name"]: e for e in worker_container["env"]}.items()

        parsed = options(*local(args, tmp_path))  # every option exists, config file included
        settings = Settings.from_options(parsed)
        assert parsed.master and settings.workload.max_tokens.kind in ("fixed", "uniform", "normal", "lognormal")
        if master["kind"] == "Deployment":  # the web UI on the pod's loopback, probed there
            probe = " ".join(container["readinessProbe"]["exec"]["command"])
            assert parsed.web_host == "127.0.0.1" and not parsed.headless and "http://127.0.0.1:8089/" in probe
        else:  # Job and CronJob: headless, wait for the workers
            assert parsed.headless and parsed.expect_workers == worker["spec"]["replicas"]
            assert parsed.run_time and parsed.stop_timeout == 30
        if master["kind"] == "CronJob":
            assert args[0] == f"--locustfile={CONTAINER_LOCUSTFILES}/soak.py"
            assert [str(s) for s in settings.objectives.slo] == ["ttft_p99_ms=3000", "tpot_p99_ms=100"]
            assert settings.objectives.max_error_rate == 0.01 and settings.objectives.max_drift_pct == 20
            assert master["spec"]["concurrencyPolicy"] == "Forbid"
    assert objects["PersistentVolumeClaim/llm-locust-results"]["spec"]["accessModes"] == ["ReadWriteOnce"]


def test_k8s_manifests_match_the_kubernetes_api_schema():
    """Every object of deploy/k8s against the Kubernetes API's own JSON schema (kubernetes-validate, strict:
    an unknown or misspelt field is an error too), for the newest Kubernetes version the package knows."""
    version = kubernetes_validate.latest_version()
    objects = k8s()
    assert len(objects) == 8
    errors = []
    for key, obj in objects.items():
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            errors.append(f"{key}: {e.message} at {'.'.join(map(str, e.absolute_path))} (Kubernetes {version})")
    assert errors == []


def test_compose_master_command_and_config_file_parse():
    parsed = options(*local(compose("docker-compose.yml")["master"]["command"]))
    settings = Settings.from_options(parsed)
    assert parsed.master and parsed.headless and parsed.expect_workers == 2 and parsed.stop_timeout == 30
    assert settings.workload.ignore_eos is True and settings.output.interval_s == 5 and settings.endpoint.model == ""
