"""The commands of a distributed run: what docker-compose.yml runs in containers, built here once.

tests/e2e/test_deploy.py checks that docker-compose.yml's services run exactly these argument lists
(with the compose file's defaults); tests/e2e/test_netns.py runs them, in network namespaces standing
in for separate machines. Paths are parameters (container paths in compose, local ones in tests).
"""

from __future__ import annotations

from llm_locust.demo import SIM_ARGS

SIM_PORT = 8000


def sim_args(port: int = SIM_PORT) -> list[str]:
    """Arguments of `llm-locust sim` (the demo's continuous-batching timing), listening on all addresses."""
    return [
        "--host=0.0.0.0",
        f"--port={port}",
        *(f"{name}={value}" for name, value in zip(SIM_ARGS[::2], SIM_ARGS[1::2], strict=True)),
    ]


def master_args(
    locustfile: str,
    config: str,
    results_dir: str,
    host: str,
    workers: int = 2,
    users: int = 32,
    spawn_rate: float = 8,
    run_time: str = "2m",
    model: str = "",
    max_tokens: int = 128,
    prompt_tokens: int = 128,
    max_wait_s: int = 300,
    stop_timeout_s: int = 30,
) -> list[str]:
    """Arguments of the headless `locust` master: waits for `workers`, runs, writes `results_dir`.

    At the end users finish their request in flight (`--stop-timeout`), so the server never sees
    a request the results leave out.
    """
    return [
        f"--locustfile={locustfile}",
        "--master",
        f"--expect-workers={workers}",
        f"--expect-workers-max-wait={max_wait_s}",
        "--headless",
        f"--users={users}",
        f"--spawn-rate={spawn_rate:g}",
        f"--run-time={run_time}",
        f"--stop-timeout={stop_timeout_s}",
        f"--host={host}",
        f"--model={model}",
        f"--max-tokens={max_tokens}",
        f"--prompt-tokens={prompt_tokens}",
        f"--csv={results_dir}/locust",
        "--csv-full-history",
        f"--results-dir={results_dir}",
        f"--config={config}",
    ]


def worker_args(locustfile: str, master_host: str) -> list[str]:
    """Arguments of a `locust` worker connecting to `master_host` (port 5557)."""
    return [f"--locustfile={locustfile}", "--worker", f"--master-host={master_host}"]
