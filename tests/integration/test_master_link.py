"""The master–worker link is authenticated (config/link_auth.py, runtime/link_auth.py): real `locust` masters and
workers on 127.0.0.1, private ports. A worker whose LLM_LOCUST_MASTER_SECRET is not its master's (or who has none)
cannot join — the master counts no worker and says once that a stranger was refused, the worker says why in one line
and exits 2, the server gets nothing; without a secret a master listens on loopback only and refuses another
interface; two `--processes` runs on one machine never meet."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import LOCUSTFILE, ROOT, free_port

from llm_locust.config.link_auth import SECRET_ENV
from llm_locust.runtime.link_auth import EXIT_LINK_REFUSED
from llm_locust.sim import run_sim

SIM_ARGS = ("--ttft-ms", "5", "--itl-ms", "1", "--output-tokens", "8")


def locust(secret: str | None, *args: str) -> subprocess.Popen[str]:
    """A `locust` process with the chat locustfile and `args`, its environment's link secret `secret` (None: none)."""
    env = {k: v for k, v in os.environ.items() if k != SECRET_ENV}
    if secret is not None:
        env[SECRET_ENV] = secret
    return subprocess.Popen(
        [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), *args], cwd=ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def finish(proc: subprocess.Popen[str], timeout_s: float) -> tuple[int, str]:
    """`proc`'s exit code and output, killed if it runs longer than `timeout_s`."""
    try:
        out = proc.communicate(timeout=timeout_s)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        out = proc.communicate()[0]
    return proc.returncode, out


@pytest.mark.parametrize(
    ("master_secret", "worker_secret"),
    [(secrets.token_urlsafe(24), secrets.token_urlsafe(24)), (secrets.token_urlsafe(24), None),
     (None, secrets.token_urlsafe(24))],
    ids=["another-secret", "worker-without", "master-without"],
)  # fmt: skip
def test_a_worker_without_its_masters_secret_cannot_join(tmp_path: Path, master_secret, worker_secret):
    port = str(free_port())
    with run_sim(*SIM_ARGS) as sim:
        master = locust(
            master_secret, "--master", "--headless", "--master-bind-host", "127.0.0.1", "--master-bind-port", port,
            "--expect-workers", "1", "--expect-workers-max-wait", "8", "-u", "2", "-r", "2", "--run-time", "3s",
            "--host", sim.url, "--model", "llm-locust-sim", "--results-dir", str(tmp_path),
        )  # fmt: skip
        worker = locust(worker_secret, "--worker", "--master-host", "127.0.0.1", "--master-port", port)
        worker_code, worker_out = finish(worker, 40)
        _, master_out = finish(master, 40)
        served = len(sim.trace())
    said = [line for line in worker_out.splitlines() if "refused this worker's handshake" in line]
    assert worker_code == EXIT_LINK_REFUSED and len(said) == 1, worker_out[-3000:]
    assert f"the master at 127.0.0.1:{port} refused this worker's handshake: this worker's {SECRET_ENV}" in said[0]
    assert "Traceback" not in worker_out
    assert served == 0
    assert "0 of 1 connected" in master_out and "1 of 1 connected" not in master_out, master_out[-3000:]
    strangers = [line for line in master_out.splitlines() if "tried to join the master port" in line]
    assert len(strangers) <= 1, master_out[-3000:]  # said once at most
    if master_secret is not None and worker_secret is not None:  # a key it could not read: said
        assert len(strangers) == 1 and f"without this run's {SECRET_ENV}" in strangers[0], master_out[-3000:]
    for secret in (master_secret, worker_secret):
        assert secret is None or secret not in master_out + worker_out


def test_workers_with_their_masters_secret_join_and_run(tmp_path: Path):
    secret, port = secrets.token_urlsafe(24), str(free_port())
    with run_sim(*SIM_ARGS) as sim:
        master = locust(  # no --master-bind-host: with a secret, Locust's default, every interface
            secret, "--master", "--headless", "--master-bind-port", port, "--expect-workers", "2",
            "--expect-workers-max-wait", "30", "-u", "4", "-r", "4", "--run-time", "3s", "--host", sim.url,
            "--model", "llm-locust-sim", "--results-dir", str(tmp_path),
        )  # fmt: skip
        workers = [locust(secret, "--worker", "--master-host", "127.0.0.1", "--master-port", port) for _ in range(2)]
        code, out = finish(master, 60)
        done = [finish(w, 30) for w in workers]
        served = len(sim.trace())
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert code == 0 and summary["run"]["workers_max"] == 2, out[-3000:]
    assert 0 < summary["throughput"]["requests_ok"] <= served
    assert all(c == 0 for c, _ in done), [o[-2000:] for _, o in done]
    assert secret not in out + "".join(o for _, o in done)


@pytest.mark.parametrize(("role", "args"), [("master", ("--master", "--master-bind-host", "0.0.0.0")),
                                            ("worker", ("--worker", "--master-host", "10.255.255.1"))])  # fmt: skip
def test_without_a_secret_the_link_stays_on_this_machine(tmp_path: Path, role, args):
    """A master told to listen on every interface, or a worker told to join a master on another machine, without a
    secret: one line naming the variable, exit 2, nothing started."""
    code, out = finish(locust(None, *args, "--headless", "--host", "http://127.0.0.1:9", "--results-dir",
                              str(tmp_path / "r")), 30)  # fmt: skip
    lines = [line for line in out.splitlines() if line.strip()]
    assert code == EXIT_LINK_REFUSED and len(lines) == 1, out[-3000:]
    assert f"only with {SECRET_ENV} set" in lines[0]


def test_without_a_secret_a_master_listens_on_loopback_only(tmp_path: Path):
    port = free_port()
    master = locust(None, "--master", "--headless", "--master-bind-port", str(port), "--expect-workers", "1",
                    "--expect-workers-max-wait", "4", "--host", "http://127.0.0.1:9", "--results-dir",
                    str(tmp_path))  # fmt: skip
    try:
        listening = ""
        for _ in range(40):
            listening = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True).stdout
            if listening.strip():
                break
            subprocess.run(["sleep", "0.25"], check=True)
        assert listening.split()[3] == f"127.0.0.1:{port}", listening
    finally:
        finish(master, 20)


def test_two_processes_runs_on_one_machine_never_meet(tmp_path: Path):
    """Two `locust --processes 2` at once, on Locust's default ports as a user runs them: each master gets its own
    two workers (a free port of 127.0.0.1, its own secret), both complete, each counting its own requests."""
    args = ("--headless", "--processes", "2", "-u", "4", "-r", "4", "--run-time", "4s", "--model", "llm-locust-sim",
            "--max-tokens", "8")  # fmt: skip
    with run_sim(*SIM_ARGS) as sim_a, run_sim(*SIM_ARGS) as sim_b:
        sims = {"a": sim_a, "b": sim_b}
        runs = {name: locust(None, *args, "--host", sim.url, "--results-dir", str(tmp_path / name))
                for name, sim in sims.items()}  # fmt: skip
        done = {name: finish(proc, 90) for name, proc in runs.items()}
        served = {"a": len(sim_a.trace()), "b": len(sim_b.trace())}
    for name, (code, out) in done.items():
        summary = json.loads((tmp_path / name / "summary.json").read_text())
        assert code == 0 and "Traceback" not in out, out[-3000:]
        assert summary["run"]["workers_max"] == 2, out[-3000:]
        ok = summary["throughput"]["requests_ok"]
        assert 0 < ok <= served[name], (name, ok, served)
