"""Does memory stay flat in a long run? RSS of the Locust master and of each worker over time.

Starts the simulator (fixed timing) and `locust -f locustfiles/soak.py --headless --processes N`
against it over 127.0.0.1, samples the resident set size of the master and of each worker
process from /proc (independently of Locust's own monitor) every `--sample-s` seconds into
rss.csv in the results folder, next to the run's own results (summary.json with its verdict and
drift, workers_timeseries.csv). Then, per process, it compares the first and the last sixth of
the time after warm-up (at least a minute each): mean and peak RSS, and the growth of each in %.
Means, not single samples: a process's RSS saws up and down by several MB as the garbage
collector frees histograms, so one sample against another says more about the phase than growth.

    .venv/bin/python benchmarks/soak_memory.py                       # 3 min, 1 min warm-up (quick check)
    .venv/bin/python benchmarks/soak_memory.py --minutes 35 --warmup-minutes 5   # the soak figures
    .venv/bin/python benchmarks/soak_memory.py --report results/soak-35min --minutes 35 --warmup-minutes 5
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
    parser.add_argument("--report", metavar="RESULTS_DIR", help="only print the figures of an earlier run's rss.csv")
    args = parser.parse_args()
    if args.report:
        report(Path(args.report) / "rss.csv", args.warmup_minutes * 60, args.minutes * 60)
        return 0

    results_dir = Path(args.results_dir or f"results/soak-memory-{time.strftime('%Y%m%d-%H%M%S')}")
    results_dir.mkdir(parents=True, exist_ok=True)
    run_s = int(args.minutes * 60)
    warmup_s = args.warmup_minutes * 60
    # drift state is bounded (early window + up to 5 late segments, ~1 MB each) but fills from
    # drift warm-up + window on: have it full before the measurement's warm-up ends
    drift_window_s = drift_warmup_s = min(60.0, warmup_s / 3)
    sim_args = ("--ttft-ms", "200", "--itl-ms", "40", "--output-tokens", "64")
    port = free_port()
    with run_sim(*sim_args) as sim:
        command = [
            sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "soak.py"), "--headless",
            "--only-summary", "--processes", str(args.processes), "-u", str(args.users), "-r", "20",
            "--run-time", f"{run_s}s", "--host", sim.url, "--max-tokens", "64", "--ignore-eos",
            "--interval-s", "10", "--drift-warmup-s", str(drift_warmup_s), "--drift-window-s", str(drift_window_s),
            "--results-dir", str(results_dir), "--csv", str(results_dir / "locust"),
            "--master-bind-port", str(port), "--master-port", str(port),  # not 5557: other runs may use it
        ]  # fmt: skip
        print(f"simulator {sim.url} ({' '.join(sim_args)}); {args.users} users, {args.processes} workers, "
              f"{run_s} s, warm-up {warmup_s:.0f} s", flush=True)  # fmt: skip
        log = (results_dir / "locust.log").open("w")
        proc = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        sample_rss(proc, run_s + 60, args.sample_s, results_dir / "rss.csv")
        code = proc.wait(timeout=120)
        log.close()
    report(results_dir / "rss.csv", warmup_s, run_s)
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


def sample_rss(proc: subprocess.Popen, limit_s: float, period_s: float, path: Path) -> None:
    """Write RSS samples (MB) of the master (`proc`) and its worker children to `path` until it exits."""
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


def report(rss_csv: Path, warmup_s: float, run_s: float) -> None:
    """Print per process: RSS mean and peak in the first and last sixth after warm-up (MB), growth (%)."""
    series: dict[str, list[tuple[float, float]]] = {}
    with rss_csv.open() as f:
        for row in csv.DictReader(f):
            series.setdefault(row["process"], []).append((float(row["elapsed_s"]), float(row["rss_mb"])))
    span_s = max(60.0, (run_s - warmup_s) / 6)
    print(
        f"\nRSS after warm-up ({warmup_s:.0f} s): first {span_s:.0f} s vs last {span_s:.0f} s of the {run_s:.0f} s load"
    )
    columns = ("early mean", "late mean", "growth %", "early peak", "late peak", "growth %")
    print(f"{'process':<10}" + "".join(f"{c:>12}" for c in columns))
    for name, samples in series.items():
        early = [mb for t, mb in samples if warmup_s <= t < warmup_s + span_s]
        late = [mb for t, mb in samples if run_s - span_s <= t <= run_s]  # not the shutdown
        if not early or not late:
            print(f"{name:<10} not enough samples")
            continue
        e_mean, l_mean, e_peak, l_peak = sum(early) / len(early), sum(late) / len(late), max(early), max(late)
        print(f"{name:<10}{e_mean:>12.1f}{l_mean:>12.1f}{(l_mean - e_mean) / e_mean * 100:>+12.2f}"
              f"{e_peak:>12.1f}{l_peak:>12.1f}{(l_peak - e_peak) / e_peak * 100:>+12.2f}")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
