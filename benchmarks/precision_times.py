"""How much sooner a sweep or a capacity search finishes with `--precision` than with fixed steps, and whether it
gives the same answer (issue 45, docs/load-models.md "Steady state, precision and over-saturation").

One run per call, against a fresh simulator:

- `sweep`: the demo's sweep (`llm_locust.demo`: the batching simulator, master + 2 worker processes, users
  1,2,4,8,16,32, 16 output tokens) with 60 s steps and the demo's SLO; its answer is the report's capacity pick;
- `search`: a capacity search on the batching simulator with 4 slots (local runner, --search-max-rate 64,
  --search-precision 0.1, 30 s trials, SLO ttft_p90_ms=250); its answer is the search's `max_rate_per_s`.

Prints one JSON line: wall time (s), the locust exit code, the answer, and per step its label, why it ended, its
measured seconds and when it became steady.

Usage: .venv/bin/python benchmarks/precision_times.py sweep|search RESULTS_DIR SEED [--precision 5%]
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from llm_locust.demo import SIM_ARGS
from llm_locust.demo import SLO as DEMO_SLO
from llm_locust.metrics.slo import parse_slos
from llm_locust.report.capacity import capacity
from llm_locust.report.run_data import load_run
from llm_locust.sim import run_sim

ROOT = Path(__file__).resolve().parent.parent
SEARCH_SLO = "ttft_p90_ms=250"
SEARCH_SIM = ("--timing", "batching", "--max-batch", "4", "--decode-step-ms", "10", "--decode-step-ms-per-seq", "0")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sweep_args() -> list[str]:
    port = _free_port()
    return [
        "-f", str(ROOT / "locustfiles/sweep.py"), "--processes", "2", "--sweep-users", "1,2,4,8,16,32",
        "--step-duration-s", "60", "--warmup-s", "1", "--max-tokens", "16", "--prompt-tokens", "128",
        "--ignore-eos", "--interval-s", "1", "--slo", DEMO_SLO, "--master-bind-host", "127.0.0.1",
        "--master-bind-port", str(port), "--master-port", str(port),
    ]  # fmt: skip


def _search_args() -> list[str]:
    return [
        "-f", str(ROOT / "locustfiles/search.py"), "--search-max-rate", "64", "--search-precision", "0.1",
        "--step-duration-s", "30", "--warmup-s", "1", "--max-tokens", "16", "--ignore-eos", "--interval-s", "1",
        "--slo", SEARCH_SLO, "--max-concurrency", "256",
    ]  # fmt: skip


def main() -> None:
    kind, folder, seed, *extra = sys.argv[1:]
    out = Path(folder)
    shutil.rmtree(out, ignore_errors=True)
    sim_args, args = (SIM_ARGS, _sweep_args()) if kind == "sweep" else (SEARCH_SIM, _search_args())
    with run_sim(*sim_args) as sim:
        command = [sys.executable, "-m", "locust", "--headless", "--only-summary", "--host", sim.url, "--seed", seed,
                   "--results-dir", str(out), *args, *extra]  # fmt: skip
        started = time.monotonic()
        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1800)
        took_s = time.monotonic() - started
    summary = json.loads((out / "summary.json").read_text())
    if kind == "sweep":
        cap = capacity(load_run(out), parse_slos([DEMO_SLO]), None)
        answer = None if cap is None or cap.best is None else cap.best.label
    else:
        answer = summary["search"]["max_rate_per_s"]
    steps = [
        [s["label"], (s.get("ended") or {}).get("reason"), round(s["measure_s"], 1), s["steady_state"]["after_s"]]
        for s in summary["steps"]
    ]
    print(json.dumps({"run": out.name, "seed": seed, "exit": proc.returncode, "wall_s": round(took_s, 1),
                      "answer": answer, "steps": steps}))  # fmt: skip


if __name__ == "__main__":
    main()
