"""docker compose for real: the stack of docker-compose.yml, built from a clean copy of this working tree
(its tracked and unignored files, as a fresh clone with your edits), run by Docker on this machine
against the compose's own simulator.

- Headless, 3 workers, 20 s (`up --build --exit-code-from master`): exit code 0; the master's
  summary.json counts 3 workers and exactly the requests each worker sent (and Locust's own count);
  the results belong to the user who ran compose; a planted OPENAI_API_KEY is nowhere in the image,
  the tree, the results or the logs.
- A failing gate (`slo = ttft_p99_ms=1` in the config file): exit code 3; as root, compose runs as
  another user (a made-up uid and gid, in the Docker socket's group) in a tree that user owns, and
  the results are that user's.
- The web UI override: a run started with POST /swarm shows in /llm/stats.json, /stop writes results.
- The Prometheus override (without Grafana, whose profile is off): a headless run exits 0; Prometheus, started
  again after it (compose stopped it with the master), answers for the master's request counter exactly what
  summary.json counts, for the simulator's vllm:* and DCGM series with data, and every query of the Grafana
  dashboard with data (but the failures' panel and the per-name panels: the run has no failure and no named request).
- `down -v` leaves no container, network or volume of the project.

Needs a Docker daemon (`make docker`), `docker compose` or `docker-compose`, and the base image:
the official locustio/locust at the pinned version, or the stand-in `deploy/docker/build-base.sh`
builds from Debian's packages (root and debootstrap; cached). Skipped, saying why, without them.
The same for Prometheus: the override's prom/prometheus image, else the stand-in
`deploy/docker/build-base.sh prometheus` builds (Debian's package), passed as PROMETHEUS_IMAGE.
The containers reach each other over the project's own bridge network; this test talks only to
127.0.0.1 (the web UI's and Prometheus's published ports) and to the Docker daemon.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import ROOT, free_port, read_summary, wait_for
from harness.dashboard import dashboard_queries
from harness.web_ui import http

pytestmark = pytest.mark.alone  # docker compose builds and runs the whole stack: both cores for minutes

COMPOSE_FILES = ("docker-compose.yml",)
UI_COMPOSE_FILES = ("docker-compose.yml", "docker-compose.ui.yml")
PROMETHEUS_COMPOSE_FILES = ("docker-compose.yml", "docker-compose.prometheus.yml")
PROMETHEUS_STAND_IN = "llm-locust/prometheus:bookworm"  # deploy/docker/build-base.sh prometheus
IMAGE = "llm-locust:latest"
RUN_TIMEOUT_S = 900  # the first `up --build` may build the image (a few minutes); a warm run takes ~40 s
OTHER_UID = 4242  # as root: compose run by "another user", who cloned the repository
OTHER_GID = 4343
DOCKER_SOCKET = Path("/var/run/docker.sock")


def _run(*command: str, timeout_s: float = 60, **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, **kwargs)


def compose_command() -> list[str] | None:
    """`docker compose` (the v2 plugin) or `docker-compose` (1.29), whichever this machine has."""
    if shutil.which("docker") and _run("docker", "compose", "version").returncode == 0:
        return ["docker", "compose"]
    return ["docker-compose"] if shutil.which("docker-compose") else None


def base_image() -> str:
    """The base image the Dockerfile names by default (locustio/locust:<pinned version>)."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    version = re.search(r"^ARG LOCUST_VERSION=(\S+)$", dockerfile, re.M)[1]
    return re.search(r"^ARG BASE_IMAGE=(\S+)$", dockerfile, re.M)[1].replace("${LOCUST_VERSION}", version)


def _stand_in(image: str, *target: str) -> None:
    """`image` there, or built by deploy/docker/build-base.sh [target] (cached); skipped without root or debootstrap."""
    if _run("docker", "image", "inspect", image).returncode != 0:
        if os.getuid() != 0 or not shutil.which("debootstrap"):
            pytest.skip(f"no {image} image, and building the stand-in needs root and debootstrap (make docker-base)")
        built = _run(str(ROOT / "deploy" / "docker" / "build-base.sh"), *target, timeout_s=900)
        assert built.returncode == 0, built.stdout + built.stderr


@pytest.fixture(scope="module")
def compose() -> list[str]:
    """The compose command, once Docker and the base image are there (the stand-in built if needed)."""
    if not shutil.which("docker"):
        pytest.skip("no docker client (make docker, or apt-get install docker.io docker-compose)")
    info = _run("docker", "info", "--format", "{{.ServerVersion}}")
    if info.returncode != 0:
        pytest.skip(f"no Docker daemon (make docker starts one as root): {info.stderr.strip()[:200]}")
    command = compose_command()
    if command is None:
        pytest.skip("neither `docker compose` nor `docker-compose` (apt-get install docker-compose)")
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the stack is built from the tree's tracked files")
    _stand_in(base_image())  # the official image, or the stand-in under its name
    return command


@pytest.fixture(scope="module")
def prometheus_image(compose) -> str:
    """The override's upstream Prometheus image when Docker has it, else the stand-in (built if needed)."""
    override = (ROOT / "docker-compose.prometheus.yml").read_text()
    upstream = re.search(r"image: \$\{PROMETHEUS_IMAGE:-(\S+)\}$", override, re.M)[1]
    if _run("docker", "image", "inspect", upstream).returncode == 0:
        return upstream
    _stand_in(PROMETHEUS_STAND_IN, "prometheus")
    return PROMETHEUS_STAND_IN


def clean_copy(destination: Path) -> Path:
    """The working tree's tracked and unignored files (their current content) copied to `destination`."""
    listed = _run("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT)
    assert listed.returncode == 0, listed.stderr
    for name in filter(None, listed.stdout.split("\0")):
        source = ROOT / name
        if source.is_file():  # listed but deleted in the working tree: not part of it
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return destination


class Stack:
    """One compose project (its own name, so nothing is shared with another run) in a clean copy."""

    def __init__(self, compose: list[str], name: str, files: tuple[str, ...], env: dict[str, str]):
        self.workdir = Path(tempfile.mkdtemp(prefix=f"llm-locust-{name}-"))  # mode 700: the tree's user only
        self.tree = clean_copy(self.workdir / "llm-locust")
        self.project = f"llmlocusttest{os.getpid()}{name}"  # letters and digits: the same name for both composes
        self.command = [*compose, "-p", self.project, *(arg for f in files for arg in ("-f", f))]
        settings = set(re.findall(r"^#? ?([A-Z_][A-Z0-9_]*)=", (ROOT / ".env.example").read_text(), re.M))
        inherited = {k: v for k, v in os.environ.items() if k not in settings and not k.startswith("COMPOSE_")}
        inherited.pop("OPENAI_API_KEY", None)  # never a real key: the tests plant their own
        self.env = {**inherited, **env}
        self.user: dict = {}  # subprocess.run's user, group and extra_groups: compose as another user

    def run_as(self, uid: int, gid: int, docker_gid: int) -> None:
        """From now on run compose as `uid:gid` (member of `docker_gid`, the Docker socket's group), in
        a tree that user cloned (owns), with a HOME of its own."""
        home = self.workdir / "home"
        home.mkdir()
        for path in [self.workdir, *self.workdir.rglob("*")]:
            os.chown(path, uid, gid, follow_symlinks=False)
        self.env["HOME"] = str(home)
        self.user = {"user": uid, "group": gid, "extra_groups": [docker_gid]}

    def run(self, *args: str, timeout_s: float = RUN_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        return _run(*self.command, *args, timeout_s=timeout_s, cwd=self.tree, env=self.env, **self.user)

    def down(self) -> None:
        done = self.run("down", "-v", "--remove-orphans", "-t", "10", timeout_s=120)
        assert done.returncode == 0, done.stderr

    def leftovers(self) -> list[str]:
        """Containers, networks and volumes of this project that Docker still has."""
        label = f"label=com.docker.compose.project={self.project}"
        found = []
        for kind in ("container", "network", "volume"):
            for flt in (label, f"name={self.project}"):
                listed = _run("docker", kind, "ls", *(["-a"] if kind == "container" else []), "-q", "--filter", flt)
                found += [f"{kind} {name}" for name in listed.stdout.split()]
        return sorted(set(found))


@pytest.fixture
def stack(compose) -> Iterator[Callable[..., Stack]]:
    """Make a `Stack` in a clean copy of the tree; each is brought down at the end, leaving nothing."""
    stacks: list[Stack] = []

    def make(name: str, files: tuple[str, ...] = COMPOSE_FILES, **env: str) -> Stack:
        made = Stack(compose, name, files, env)
        stacks.append(made)
        return made

    yield make
    for made in stacks:
        try:
            made.down()
            assert made.leftovers() == [], made.project
        finally:
            shutil.rmtree(made.workdir)


def owners(folder: Path) -> set[tuple[int, int]]:
    """(uid, gid) of `folder` and everything in it."""
    return {(p.stat().st_uid, p.stat().st_gid) for p in [folder, *folder.rglob("*")]}


def test_headless_run_three_workers_results_yours_no_key_anywhere(stack):
    key = f"sk-planted-{secrets.token_hex(12)}"
    run = stack("headless", WORKERS="3", USERS="12", SPAWN_RATE="12", RUN_TIME="20s", OPENAI_API_KEY=key)
    up = run.run("up", "--build", "--exit-code-from", "master")
    output = up.stdout + up.stderr
    assert up.returncode == 0, output[-4000:]

    results = run.tree / "results" / "run"
    summary = read_summary(results)
    assert summary["status"] == "complete" and summary["run"]["workers_max"] == 3 and summary["failures"] == {}
    by_worker = summary["run"]["requests_by_worker"]
    t = summary["throughput"]
    assert len(by_worker) == 3 and all(n > 0 for n in by_worker.values()), by_worker
    assert sum(by_worker.values()) == t["requests_ok"] + t["requests_failed"] > 20
    locust_rows = (results / "locust_stats.csv").read_text().splitlines()
    (chat,) = [row for row in locust_rows if row.startswith("POST,/v1/chat/completions,")]
    assert int(chat.split(",")[2]) == t["requests_ok"]  # Locust's own count of the same requests
    assert summary["settings"]["api_key_set"] is True
    assert "Verdict: PASSED" in output

    assert owners(results) == {(os.getuid(), os.getgid())}

    logs = run.run("logs", "--no-color", timeout_s=60)
    image = _run("docker", "image", "inspect", IMAGE).stdout + _run("docker", "history", "--no-trunc", IMAGE).stdout
    for where, text in {"compose output": output, "compose logs": logs.stdout + logs.stderr, "image": image}.items():
        assert key not in text, where
    for path in run.tree.rglob("*"):
        if path.is_file():
            assert key not in path.read_text(errors="replace"), path


def test_failing_gate_exits_3_results_belong_to_another_invoking_user(stack):
    run = stack("gate", WORKERS="1", USERS="2", SPAWN_RATE="2", RUN_TIME="4s", RUN_NAME="gate",
                LLM_LOCUST_CONF="./gate.conf")  # fmt: skip
    (run.tree / "gate.conf").write_text("slo = ttft_p99_ms=1\n")  # the simulator's TTFT: ~20-80 ms
    owner = (os.getuid(), os.getgid())
    if os.getuid() == 0 and DOCKER_SOCKET.exists() and "DOCKER_HOST" not in os.environ:
        owner = (OTHER_UID, OTHER_GID)  # a user without an account here, who may use Docker
        run.run_as(*owner, docker_gid=DOCKER_SOCKET.stat().st_gid)
    up = run.run("up", "--build", "--exit-code-from", "master")
    assert up.returncode == 3, (up.stdout + up.stderr)[-4000:]
    summary = read_summary(run.tree / "results" / "gate")
    (slo,) = summary["slo"]
    assert slo["slo"] == "ttft_p99_ms=1" and slo["ok"] is False and slo["value_ms"] > 1, slo
    assert "Verdict: FAILED: SLO ttft_p99_ms=1 not met" in up.stdout
    assert owners(run.tree / "results" / "gate") == {owner}


def test_web_ui_override_swarm_progress_stop_results(stack):
    port = free_port()
    run = stack("ui", UI_COMPOSE_FILES, WORKERS="2", WEB_UI_BIND=f"127.0.0.1:{port}")
    up = run.run("up", "--build", "-d")
    assert up.returncode == 0, (up.stdout + up.stderr)[-4000:]
    ui = f"http://127.0.0.1:{port}"

    def workers() -> int:
        try:
            return len(json.loads(http(f"{ui}/stats/requests")).get("workers") or [])
        except OSError:
            return 0

    wait_for(lambda: workers() == 2, 120, "the web UI with 2 workers")
    containers = json.loads(_run("docker", "inspect", *run.run("ps", "-q").stdout.split()).stdout)
    assert len(containers) == 4  # simulator, master, 2 workers: on the project's network only, and only
    for container in containers:  # the master's web UI published, on 127.0.0.1
        assert set(container["NetworkSettings"]["Networks"]) == {f"{run.project}_default"}, container["Name"]
    published = {c["Name"]: c["HostConfig"]["PortBindings"] for c in containers if c["HostConfig"]["PortBindings"]}
    assert list(published.values()) == [{"8089/tcp": [{"HostIp": "127.0.0.1", "HostPort": str(port)}]}], published

    form = {"user_count": 4, "spawn_rate": 4, "host": "http://sim:8000"}
    assert json.loads(http(f"{ui}/swarm", form))["success"] is True

    def progress():
        snap = json.loads(http(f"{ui}/llm/stats.json"))
        summary = snap["summary"]
        return snap if summary and summary["throughput"]["requests_ok"] >= 8 else None

    snap = wait_for(progress, 60, "requests in /llm/stats.json")
    assert snap["state"] in ("spawning", "running") and snap["workers"] == 2 and not snap["final"]
    http(f"{ui}/stop", {})
    results = run.tree / "results" / "ui"

    def final_summary():
        path = results / "summary.json"
        return path.exists() and (summary := read_summary(results))["status"] == "complete" and summary

    summary = wait_for(final_summary, 60, "the final summary.json")
    assert summary["run"]["workers_max"] == 2 and summary["throughput"]["requests_ok"] >= 8
    assert summary["failures"] == {} and len(summary["run"]["requests_by_worker"]) == 2
    assert json.loads(http(f"{ui}/llm/stats.json"))["final"] is True
    assert owners(results) == {(os.getuid(), os.getgid())}


def test_prometheus_override_scrapes_the_master_and_the_simulator(stack, prometheus_image):
    port = free_port()
    run = stack("prom", PROMETHEUS_COMPOSE_FILES, WORKERS="2", USERS="8", SPAWN_RATE="8", RUN_TIME="15s",
                RUN_NAME="prom", PROMETHEUS_IMAGE=prometheus_image, PROMETHEUS_BIND=f"127.0.0.1:{port}")  # fmt: skip
    t_start_s = time.time()
    up = run.run("up", "--build", "--exit-code-from", "master")
    t_end_s = time.time()
    output = up.stdout + up.stderr
    assert up.returncode == 0, output[-4000:]
    services = _run("docker", "ps", "-a", "--filter", f"label=com.docker.compose.project={run.project}",
                    "--format", '{{.Label "com.docker.compose.service"}}').stdout.split()  # fmt: skip
    assert sorted(set(services)) == ["master", "prometheus", "sim", "worker"], services  # Grafana's profile is off
    summary = read_summary(run.tree / "results" / "prom")
    assert summary["status"] == "complete" and summary["failures"] == {}, summary["failures"]
    requests_ok = summary["throughput"]["requests_ok"]
    assert requests_ok > 10

    started = run.run("start", "prometheus", timeout_s=120)  # compose stopped it with the master; its data stays
    assert started.returncode == 0, started.stdout + started.stderr
    api = f"http://127.0.0.1:{port}/api/v1"

    def ready() -> bool:
        try:
            return b"Ready" in http(f"http://127.0.0.1:{port}/-/ready")
        except OSError:
            return False

    wait_for(ready, 60, "Prometheus ready again")

    def series(expr: str) -> list[dict]:
        """The series of `expr` over the run (a range query, a point a second)."""
        params = {"query": expr, "start": t_start_s, "end": t_end_s, "step": 1}
        answer = json.loads(http(f"{api}/query_range?{urllib.parse.urlencode(params)}"))
        assert answer["status"] == "success", answer
        return answer["data"]["result"]

    def last(selector: str) -> list[float]:
        """The last value of each series of `selector` in the run."""
        return [float(found["values"][-1][1]) for found in series(selector)]

    assert last('llm_locust_requests_total{job="llm-locust",run="prom",outcome="ok"}') == [requests_ok]
    tokens = last('vllm:generation_tokens_total{job="vllm"}')  # the simulator's vLLM-style /metrics
    assert tokens and max(tokens) > 0, tokens
    assert last('vllm:num_requests_running{job="vllm"}')
    power_w = last('DCGM_FI_DEV_POWER_USAGE{job="dcgm"}')  # its DCGM page
    assert power_w and min(power_w) >= 70, power_w  # the simulated GPU's idle draw at least
    answered = {f"{title}: {expr}": bool(series(expr)) for title, expr in dashboard_queries("prom")}
    failures_only = {query for query in answered if 'outcome="failed"' in query}  # a run without failures: none
    assert failures_only and not any(answered[query] for query in failures_only)
    names_only = {query for query in answered if 'name!=""' in query}  # the built-in user names no request: none
    assert names_only and not any(answered[query] for query in names_only)
    empty = [query for query, data in answered.items() if not data and query not in failures_only | names_only]
    assert empty == []
