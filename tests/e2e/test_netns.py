"""Master and workers on separate hosts: Linux network namespaces with their own addresses.

The test builds a small private network: a namespace holding a bridge (the switch), and one
namespace per host — simulator, master, worker 1, worker 2 — each with a veth pair to the bridge
and an address of 10.254.77.0/24 (only ever inside these namespaces). Each process runs in its
host's namespace (`ip netns exec`) with exactly the arguments docker-compose.yml gives it
(tests/harness/topology.py): the real `locust` CLI and locustfiles/chat.py. Needs root and network
namespaces; skipped with the reason otherwise. The namespaces are deleted whatever happens.
"""

from __future__ import annotations

import csv
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from conftest import ROOT, read_summary
from harness.topology import SIM_PORT, master_args, sim_args, worker_args

from llm_locust.config.link_auth import SECRET_ENV

pytestmark = pytest.mark.alone  # exact counts through a master and workers in network namespaces

SUBNET = "10.254.77"
LINK_SECRET = secrets.token_urlsafe(32)
"""The master–worker link's secret of every process (the master listens on every interface, workers join it from
other hosts)."""
HOSTS = {"sw": None, "sim": 2, "master": 3, "w1": 4, "w2": 5}  # namespace -> last byte of its address


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=30)


class Network:
    """The namespaces of one test, named with a random suffix; `delete` removes them all."""

    def __init__(self) -> None:
        suffix = uuid.uuid4().hex[:6]
        self.ns = {host: f"llmt-{host}-{suffix}" for host in HOSTS}
        self.created: list[str] = []

    def sh(self, *args: str) -> None:
        proc = run(*args)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args)}: {proc.stderr.strip()}")

    def create(self) -> None:
        for name in self.ns.values():
            self.sh("ip", "netns", "add", name)
            self.created.append(name)
            self.sh("ip", "-n", name, "link", "set", "lo", "up")
        switch = self.ns["sw"]
        self.sh("ip", "-n", switch, "link", "add", "br0", "type", "bridge")
        self.sh("ip", "-n", switch, "link", "set", "br0", "up")
        for host, last in HOSTS.items():
            if last is None:
                continue
            ns, port = self.ns[host], f"p-{host}"
            self.sh("ip", "-n", switch, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
            self.sh("ip", "-n", switch, "link", "set", port, "master", "br0", "up")
            self.sh("ip", "-n", ns, "addr", "add", f"{SUBNET}.{last}/24", "dev", "eth0")
            self.sh("ip", "-n", ns, "link", "set", "eth0", "up")

    def addr(self, host: str) -> str:
        return f"{SUBNET}.{HOSTS[host]}"

    def popen(self, host: str, command: list[str], log: Path) -> subprocess.Popen:
        """Start `command` in `host`'s namespace, output to `log`."""
        with log.open("w") as out:
            return subprocess.Popen(["ip", "netns", "exec", self.ns[host], *command], cwd=ROOT, stdout=out,
                                    stderr=subprocess.STDOUT, env={**os.environ, SECRET_ENV: LINK_SECRET})  # fmt: skip

    def http_get(self, host: str, url: str, timeout_s: float = 10) -> bytes:
        """GET `url` from inside `host`'s namespace."""
        code = (
            f"import sys, urllib.request; sys.stdout.buffer.write(urllib.request.urlopen({url!r}, timeout=10).read())"
        )
        proc = subprocess.run(["ip", "netns", "exec", self.ns[host], sys.executable, "-c", code],
                              capture_output=True, timeout=timeout_s + 20)  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr.decode(errors="replace")[-500:])
        return proc.stdout

    def eth0_bytes(self, host: str) -> tuple[int, int]:
        """(received, sent) bytes of `host`'s interface, from /proc/net/dev inside its namespace."""
        text = subprocess.run(["ip", "netns", "exec", self.ns[host], "cat", "/proc/net/dev"],
                              capture_output=True, text=True, timeout=30, check=True).stdout  # fmt: skip
        for line in text.splitlines():
            name, _, counters = line.partition(":")
            if name.strip() == "eth0":
                fields = counters.split()
                return int(fields[0]), int(fields[8])
        raise AssertionError(f"no eth0 in {host}: {text}")

    def delete(self) -> None:
        for name in reversed(self.created):
            run("ip", "netns", "del", name)


@pytest.fixture
def network():
    if os.geteuid() != 0:
        pytest.skip("creating network namespaces needs root")
    if shutil.which("ip") is None:
        pytest.skip("the `ip` command (iproute2) is not installed")
    net = Network()
    try:
        net.create()
    except (RuntimeError, subprocess.SubprocessError) as e:
        net.delete()
        pytest.skip(f"this machine does not allow network namespaces with veth pairs and a bridge: {e}")
    try:
        yield net
    finally:
        net.delete()


@pytest.fixture
def processes():
    """Processes started by the test; killed (by their own pid) if still running at the end."""
    started: list[subprocess.Popen] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def wait_http(net: Network, host: str, url: str, deadline_s: float) -> None:
    end = time.monotonic() + deadline_s
    while True:
        try:
            net.http_get(host, url, timeout_s=5)
            return
        except (RuntimeError, subprocess.TimeoutExpired):
            if time.monotonic() > end:
                raise
            time.sleep(0.3)


def test_master_and_two_workers_on_separate_hosts(network, processes, tmp_path):
    net = network
    locust = [sys.executable, "-m", "locust"]
    locustfile = str(ROOT / "locustfiles" / "chat.py")
    sim_url = f"http://{net.addr('sim')}:{SIM_PORT}"

    processes.append(
        net.popen("sim", [sys.executable, "-m", "llm_locust.cli", "sim", *sim_args()], tmp_path / "sim.log")
    )
    wait_http(net, "master", f"{sim_url}/health", 30)  # reachable from the master's host: routing works
    before = {host: net.eth0_bytes(host) for host in ("sim", "w1", "w2")}

    results = tmp_path / "results"
    master_cmd = master_args(locustfile=locustfile, config=str(ROOT / "deploy" / "llm-locust.conf"),
                             results_dir=str(results), host=sim_url, users=8, spawn_rate=8, run_time="8s")  # fmt: skip
    master = net.popen("master", [*locust, *master_cmd], tmp_path / "master.log")
    processes.append(master)
    workers = [
        net.popen(w, [*locust, *worker_args(locustfile, net.addr("master"))], tmp_path / f"{w}.log")
        for w in ("w1", "w2")
    ]
    processes.extend(workers)
    code = master.wait(timeout=120)
    master_log = (tmp_path / "master.log").read_text()
    assert code == 0, master_log[-3000:]
    assert [w.wait(timeout=30) for w in workers] == [0, 0]

    summary = read_summary(results)
    t = summary["throughput"]
    assert summary["run"]["role"] == "master" and summary["run"]["workers_max"] == 2
    assert summary["verdict"]["passed"] is True and summary["failures"] == {}
    assert summary["client"]["cpu_saturated"] == []

    # the server saw exactly what the two workers reported to the master, merged
    trace = json.loads(net.http_get("sim", f"http://127.0.0.1:{SIM_PORT}/sim/trace"))
    served = [r for r in trace if r["endpoint"] == "chat" and not r["cancelled"]]
    assert t["requests_ok"] > 16
    assert t["requests_ok"] == len(served)
    assert t["output_tokens"] == sum(r["completion_tokens"] for r in served)
    assert summary["metrics"]["ttft_ms"]["count"] == len(served)
    with (results / "locust_stats.csv").open() as f:
        rows = {(r["Type"], r["Name"]): r for r in csv.DictReader(f)}
    assert int(rows[("POST", "/v1/chat/completions")]["Request Count"]) == t["requests_ok"]

    # and it crossed the namespaces: each worker's link carried a share of the streams
    after = {host: net.eth0_bytes(host) for host in ("sim", "w1", "w2")}
    received = {w: after[w][0] - before[w][0] for w in ("w1", "w2")}
    sim_sent = after["sim"][1] - before["sim"][1]
    assert all(b > 20 * 1024 for b in received.values()), received
    assert sim_sent > 0.8 * sum(received.values()) - 1024 * 1024, (sim_sent, received)  # the master sends them little
