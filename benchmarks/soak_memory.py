"""Does memory stay flat in a long run? RSS of the Locust master and of each worker over time.

Starts the simulator (fixed timing) and `locust -f locustfiles/soak.py --headless --processes N`
against it over 127.0.0.1, samples the resident set size of the master and of each worker
process from /proc (independently of Locust's own monitor) every `--sample-s` seconds, and
prints, per process, RSS at the end of the warm-up, at the end, the peak, and the growth after
warm-up in %. The samples go to rss.csv in the results folder, next to the run's own results
(summary.json with its verdict and drift, workers_timeseries.csv).

    .venv/bin/python benchmarks/soak_memory.py                       # 3 min, 1 min warm-up (quick check)
    .venv/bin/python benchmarks/soak_memory.py --minutes 35 --warmup-minutes 5   # the soak figures
"""

from __future__ import annotations

import argparse
import csv
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llm_locust.sim import run_sim  # noqa: E402

_MB = 1024 * 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=3.0, help="length of the load (default 3)")
    parser.add_argument("--warmup-minutes", type=float, default=1.0, help="left out of the growth figure (default 1)")
    parser.add_argument("--users", type=int, default=200, help="concurrent streams (default 200)")
    parser.add_argument("--processes", type=int, default=2, help="Locust worker processes (default 2)")
    parser.add_argument("--sample-s", type=float, default=10.0, help="RSS sampling period, seconds (default 10)")
    parser.add_argument("--results-dir", default="", help="default results/soak-memory-<date-time>")
    args = parser.parse_args()

    results_dir = Path(args.results_dir or f"results/soak-memory-{time.strftime('%Y%m%d-%H%M%S')}")
    results_dir.mkdir(parents=True, exist_ok=True)
    run_s = int(args.minutes * 60)
    warmup_s = args.warmup_minutes * 60
    drift_window_s = max(30.0, (run_s - warmup_s) / 3)
    sim_args = ("--ttft-ms", "200", "--itl-ms", "40", "--output-tokens", "64")
    port = free_port()
    with run_sim(*sim_args) as sim:
        command = [
            sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "soak.py"), "--headless",
            "--only-summary", "--processes", str(args.processes), "-u", str(args.users), "-r", "20",
            "--run-time", f"{run_s}s", "--host", sim.url, "--max-tokens", "64", "--ignore-eos",
            "--interval-s", "10", "--drift-warmup-s", str(warmup_s), "--drift-window-s", str(drift_window_s),
            "--results-dir", str(results_dir), "--csv", str(results_dir / "locust"),
            "--master-bind-port", str(port), "--master-port", str(port),  # not 5557: other runs may use it
        ]  # fmt: skip
        print(f"simulator {sim.url} ({' '.join(sim_args)}); {args.users} users, {args.processes} workers, "
              f"{run_s} s, warm-up {warmup_s:.0f} s", flush=True)  # fmt: skip
        log = (results_dir / "locust.log").open("w")
        proc = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        samples = sample_rss(proc, run_s + 60, args.sample_s, results_dir / "rss.csv")
        code = proc.wait(timeout=120)
        log.close()
    report(samples, warmup_s, run_s)
    summary = json.loads((results_dir / "summary.json").read_text())
    t = summary["throughput"]
    print(f"\nlocust exit code {code}; {t['requests_ok']} requests ok, {t['requests_failed']} failed, "
          f"{t['output_tokens_per_s']:.0f} output tok/s; verdict: {summary['verdict']}")  # fmt: skip
    print(f"results: {results_dir.resolve()}")
    return 0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sample_rss(proc: subprocess.Popen, limit_s: float, period_s: float, path: Path) -> dict[str, list]:
    """Sample RSS (MB) of the master (`proc`) and its worker children until it exits; {name: [(t_s, mb)]}."""
    master = psutil.Process(proc.pid)
    names: dict[int, str] = {}
    samples: dict[str, list[tuple[float, float]]] = {}
    t0 = time.monotonic()
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(("elapsed_s", "process", "pid", "rss_mb"))
        while proc.poll() is None and time.monotonic() - t0 < limit_s:
            try:
                processes = [master, *master.children()]
                for p in processes:
                    names.setdefault(p.pid, "master" if p.pid == master.pid else f"worker{len(names)}")
                    elapsed = round(time.monotonic() - t0, 1)
                    rss = p.memory_info().rss / _MB
                    samples.setdefault(names[p.pid], []).append((elapsed, rss))
                    out.writerow((elapsed, names[p.pid], p.pid, round(rss, 2)))
                f.flush()
            except psutil.NoSuchProcess:
                pass  # exiting
            if len(samples.get("master", ())) % max(1, round(60 / period_s)) == 1:  # about once a minute
                line = ", ".join(f"{n} {s[-1][1]:.1f}" for n, s in samples.items())
                print(f"{time.monotonic() - t0:7.0f} s  RSS MB: {line}", flush=True)
            time.sleep(period_s)
    return samples


def report(samples: dict[str, list[tuple[float, float]]], warmup_s: float, run_s: float) -> None:
    """Print per process: RSS after warm-up, at the end of the load, peak, growth after warm-up (%)."""
    print(
        f"\n{'process':<10}{'samples':>8}{'start MB':>10}{'warm MB':>10}{'end MB':>10}{'peak MB':>10}{'growth %':>10}"
    )
    for name, series in samples.items():
        steady = [s for s in series if warmup_s <= s[0] <= run_s] or series  # not the shutdown
        warm, end = steady[0][1], steady[-1][1]
        peak = max(mb for _, mb in steady)
        growth = (end - warm) / warm * 100
        print(f"{name:<10}{len(series):>8}{series[0][1]:>10.1f}{warm:>10.1f}{end:>10.1f}{peak:>10.1f}{growth:>+10.2f}")


if __name__ == "__main__":
    sys.exit(main())
