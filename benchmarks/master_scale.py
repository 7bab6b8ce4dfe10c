"""How many workers can one llm-locust master carry? A real master, N synthetic workers, exact counts checked.

For each N it starts a real master — the `locust` CLI on locustfiles/chat.py, `--master --headless --expect-workers
N`, bound to 127.0.0.1 on a free port, one user per worker, its --host a closed port (a master sends no request) —
and N synthetic workers (`benchmarks/synthetic_workers.py`: many worker identities per process, each one ZeroMQ
socket speaking Locust's worker protocol). Once spawned, each worker sends --rounds stats reports, one every 3 s,
carrying what a real llm-locust worker attaches (the `MetricsRecorder` delta of --requests requests: HDR histograms
of every declared latency, prompt-length breakdowns, failures, cancellations, or with `--payload chat` only what
locustfiles/chat.py's default run measures; Locust's own stats; with --request-lines the requests.jsonl lines), then
keeps heartbeating with empty reports until the master's run time ends. The master's own outputs are then compared
with what was sent. Printed per N:

- CPU %: the master's CPU from the end of the first report interval (spawning and connections left out) to the
  merge of the last report (100 % = one core); ms/report: that CPU divided by the reports sent since (heartbeats,
  Locust's stats and the ticker included);
  workers/core: how many workers one core of this master carries at a report every 3 s (3,000 ms ÷ ms/report);
- merge delay p50 / p99 / max: from a report's send to its merge. Each report is followed by a heartbeat; the
  master handles a worker's messages in order and merges a report before reading the next, so the heartbeat's
  answer comes once the report is merged;
- RSS: the master's resident memory at the end of the rounds and its peak, MB;
- merged / sent: requests in the master's summary.json against the requests sent, and "exact" when every count of
  summary.json (requests, tokens, each metric's count, each breakdown, each worker's requests; requests.jsonl's lines)
  equals the sum of what was sent.

`--probe` serves the master's web UI (`--autostart` instead of `--headless`) and `--prometheus-port`, and asks once a
second, over the rounds, for what a browser and a scraper ask for: Locust's /stats/requests (its live tabs, ours riding
along), /llm/stats.json (the LLM view) and /metrics (Prometheus). It prints each one's response time p50 / p99 / max,
ms, and how many answered 200 of those asked.

`--profile` records the master with py-spy over the rounds and prints where its time went (inclusive share of the
samples of the functions that take the most, Locust's, ZeroMQ's and ours).

    python benchmarks/master_scale.py --workers 10,100
    python benchmarks/master_scale.py --workers 500,1000 --rounds 6 --profile
    python benchmarks/master_scale.py --workers 100 --request-lines
    python benchmarks/master_scale.py --workers 1000 --payload chat
    python benchmarks/master_scale.py --workers 100,1000 --probe

The synthetic workers run beside the master on the same machine, 500 identities per process at most: their CPU is not
the master's (the master's is read from /proc), but on 2 cores they compete with it for the CPU.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from client_capacity import cpu_seconds, header, percentile, plain_row, rss_mb  # noqa: E402
from synthetic_workers import PAYLOADS, REPORT_S, Tally, master_command, start_processes  # noqa: E402

from llm_locust.config.link_auth import free_port  # noqa: E402

COLUMNS = (
    ("workers", "workers", "{:>7}"),
    ("reports", "reports", "{:>7}"),
    ("CPU %", "cpu_pct", "{:>6.0f}"),
    ("ms/report", "ms_per_report", "{:>9.2f}"),
    ("workers/core", "workers_per_core", "{:>12.0f}"),
    ("delay p50", "delay_p50_ms", "{:>9.1f}"),
    ("p99", "delay_p99_ms", "{:>8.1f}"),
    ("max ms", "delay_max_ms", "{:>8.1f}"),
    ("RSS MB", "rss_mb", "{:>7.1f}"),
    ("peak", "rss_peak_mb", "{:>6.1f}"),
    ("merged", "requests_merged", "{:>9}"),
    ("sent", "requests_sent", "{:>9}"),
    ("exact", "exact", "{:>5}"),
)
PROBES = (("ui", "/stats/requests"), ("llm", "/llm/stats.json"), ("prom", "/metrics"))
"""What `--probe` asks for: (column prefix, path); "prom" on the --prometheus-port, the others on the web UI."""
PROBE_COLUMNS = tuple(
    column
    for name, _path in PROBES
    for column in (
        (f"{name} p50", f"{name}_p50_ms", "{:>8.1f}"),
        ("p99", f"{name}_p99_ms", "{:>7.1f}"),
        ("max", f"{name}_max_ms", "{:>7.1f}"),
        ("200s", f"{name}_ok", "{:>9}"),
    )
)


def probe(urls: dict[str, str], answers: dict[str, list[tuple[float, float, int]]], stop: threading.Event) -> None:
    """Once a second until `stop`: GET each of `urls` (name -> URL) in turn; (epoch s asked, response time ms, HTTP
    status, 0 for no answer) appended to `answers[name]`."""
    while not stop.is_set():
        for name, url in urls.items():
            t0 = time.time()
            try:
                with urllib.request.urlopen(url, timeout=10) as response:
                    response.read()
                    status = response.status
            except OSError as error:
                status = getattr(error, "code", 0)
            answers[name].append((t0, 1000 * (time.time() - t0), status))
        stop.wait(1.0)


def probe_row(answers: dict[str, list[tuple[float, float, int]]], t0: float, t1: float) -> dict[str, Any]:
    """The probe columns over epoch [`t0`, `t1`]: each probe's response time p50 / p99 / max (of those answered
    200) and how many answered 200 of those asked."""
    row: dict[str, Any] = {}
    for name, _path in PROBES:
        asked = [(ms, status) for t, ms, status in answers[name] if t0 <= t <= t1]
        times = sorted(ms for ms, status in asked if status == 200)
        row |= {
            f"{name}_p50_ms": percentile(times, 50),
            f"{name}_p99_ms": percentile(times, 99),
            f"{name}_max_ms": times[-1] if times else float("nan"),
            f"{name}_ok": f"{len(times)}/{len(asked)}",
        }
    return row


def sample_master(pid: int, samples: list[tuple[float, float, float]], stop: threading.Event) -> None:
    """Every 0.25 s until `stop`: (epoch s, CPU seconds of the master so far, its RSS now, MB)."""
    while not stop.is_set():
        samples.append((time.time(), cpu_seconds(pid), rss_mb(pid, "VmRSS")))
        stop.wait(0.25)


def value_at(samples: list[tuple[float, float, float]], t: float, index: int) -> float:
    """Sample column `index` at epoch `t`, interpolated."""
    for (ta, *a), (tb, *b) in pairwise(samples):
        if ta <= t <= tb:
            return a[index - 1] + (b[index - 1] - a[index - 1]) * (t - ta) / (tb - ta)
    return samples[-1][index] if samples and t > samples[-1][0] else 0.0


def profile(pid: int, duration_s: float, out: Path) -> subprocess.Popen | None:
    """py-spy recording the master for `duration_s` into `out` (collapsed stacks), or None without py-spy."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        print("py-spy not found: no profile", flush=True)
        return None
    command = [spy, "record", "--pid", str(pid), "--duration", str(max(1, round(duration_s))), "--rate", "100",
               "--format", "raw", "--nonblocking", "--output", str(out)]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def profile_summary(path: Path, top: int = 25) -> list[str]:
    """The functions with the largest inclusive share of the samples in py-spy's collapsed stacks at `path`."""
    inclusive: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = int(count)
        total += n
        for frame in {_frame(f) for f in stack.split(";")}:
            inclusive[frame] += n
    if not total:
        return ["(no samples)"]
    return [f"{100 * n / total:5.1f} %  {frame}" for frame, n in inclusive.most_common(top)]


def _frame(frame: str) -> str:
    """`function (path:line)` without the line and with the path shortened to its package."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("site-packages/", "llm_locust/", "python3.11/"):
        if marker in where:
            where = where.split(marker, 1)[1] if marker != "llm_locust/" else "llm_locust/" + where.split(marker, 1)[1]
            break
    return f"{name} ({where})"


def run_level(workers: int, args: argparse.Namespace) -> dict[str, Any]:
    """One master with `workers` synthetic workers; -> the row."""
    folder = Path(tempfile.mkdtemp(prefix=f"master_scale_{workers}_"))
    results = folder / "results"
    port = free_port()
    run_time_s = round(args.rounds * REPORT_S + REPORT_S + args.tail_s)
    master_log = (folder / "master.log").open("w")
    web_port, prometheus_port = (free_port(), free_port()) if args.probe else (None, None)
    extra = ("--prometheus-port", str(prometheus_port)) if args.probe else ()
    master = subprocess.Popen(
        master_command(port, workers, run_time_s, results, args.interval_s, args.request_lines, extra, web_port),
        cwd=ROOT, stdout=master_log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    samples: list[tuple[float, float, float]] = []
    stop = threading.Event()
    sampler = threading.Thread(target=sample_master, args=(master.pid, samples, stop), daemon=True)
    sampler.start()
    answers: dict[str, list[tuple[float, float, int]]] = {name: [] for name, _path in PROBES}
    if args.probe:
        urls = {name: f"http://127.0.0.1:{prometheus_port if name == 'prom' else web_port}{path}"
                for name, path in PROBES}  # fmt: skip
        threading.Thread(target=probe, args=(urls, answers, stop), daemon=True).start()
    time_limit_s = run_time_s + args.connect_s + 30
    workers_started: list[tuple[subprocess.Popen, Path]] = []
    spy = None
    try:
        workers_started = start_processes(
            port,
            workers,
            folder,
            args.rounds,
            args.requests,
            args.interval_s,
            time_limit_s,
            args.request_lines,
            payload=args.payload,
        )
        if args.profile:  # over the rounds: after the workers connected and spawned
            deadline = time.time() + args.connect_s
            while time.time() < deadline and master.poll() is None and "All users spawned" not in _log(folder):
                time.sleep(0.2)
            spy = profile(master.pid, args.rounds * REPORT_S - REPORT_S, folder / "profile.txt")
        master.wait(timeout=time_limit_s)
        for proc, _out in workers_started:
            proc.wait(timeout=60)
    finally:
        stop.set()
        for proc in [master, *(p for p, _ in workers_started), *([spy] if spy else [])]:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        master_log.close()
    tally = Tally()
    for _proc, out in workers_started:
        tally.add(json.loads(out.read_text()))
    summary = json.loads((results / "summary.json").read_text())
    problems = tally.mismatches(summary, results if args.request_lines else None)
    t0 = min(tally.spawned) + REPORT_S  # the first report interval left out (spawning, connections)
    t1 = max(max(tally.report_times), tally.merged_last)  # a master behind merges after the last report left
    reports = sum(1 for t in tally.report_times if t0 <= t)
    cpu_s = value_at(samples, t1, 1) - value_at(samples, t0, 1)
    ms_per_report = 1000 * cpu_s / reports if reports else float("nan")
    delays = sorted(tally.delays_ms)
    row = {
        "workers": workers,
        "reports": tally.reports_with_data,
        "cpu_pct": 100 * cpu_s / (t1 - t0),
        "ms_per_report": ms_per_report,
        "workers_per_core": REPORT_S * 1000 / ms_per_report,
        "delay_p50_ms": percentile(delays, 50),
        "delay_p99_ms": percentile(delays, 99),
        "delay_max_ms": delays[-1] if delays else float("nan"),
        "rss_mb": value_at(samples, t1, 2),
        "rss_peak_mb": max(rss for _t, _c, rss in samples),
        "requests_merged": sum(summary["run"]["requests_by_worker"].values()),
        "requests_sent": sum(tally.requests_by_worker.values()),
        "exact": not problems,
        "mismatches": problems,
        "acked": tally.acked,
        "master_exit": master.returncode,
        "folder": str(folder),
    }
    if args.probe:
        row |= probe_row(answers, t0, t1)
    print(plain_row(row, columns(args)), flush=True)
    for problem in problems[:10]:
        print(f"    mismatch: {problem}", flush=True)
    if tally.acked < workers:
        print(f"    only {tally.acked} of {workers} workers were acknowledged by the master", flush=True)
    if spy is not None and (folder / "profile.txt").exists():
        print(f"    where the master's time went ({workers} workers, py-spy, inclusive):", flush=True)
        for line in profile_summary(folder / "profile.txt", args.profile_top):
            print(f"      {line}", flush=True)
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
    return row


def columns(args: argparse.Namespace) -> tuple[tuple[str, str, str], ...]:
    """The table's columns: with `--probe`, the probes' too."""
    return COLUMNS + (PROBE_COLUMNS if args.probe else ())


def _log(folder: Path) -> str:
    path = folder / "master.log"
    return path.read_text(errors="replace") if path.exists() else ""


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the table (and write --json); return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", default="10,100", help="comma-separated numbers of synthetic workers")
    parser.add_argument("--rounds", type=int, default=5, help="reports with data per worker (one every 3 s)")
    parser.add_argument("--requests", type=int, default=300, help="requests per report (100 req/s per worker)")
    parser.add_argument("--interval-s", type=float, default=5.0, help="the master's --interval-s (time windows)")
    parser.add_argument("--tail-s", type=float, default=6.0, help="the master's run time after the rounds, s")
    parser.add_argument("--connect-s", type=float, default=60.0, help="time allowed for the workers to connect")
    parser.add_argument("--request-lines", action="store_true", help="--requests-jsonl on; reports carry lines")
    parser.add_argument(
        "--payload", choices=PAYLOADS, default="full",
        help="what each report carries: full, every declared latency and count histogram with 4 prompt-length "
        "breakdowns (the most a report holds); chat, what locustfiles/chat.py sends with its defaults",
    )  # fmt: skip
    parser.add_argument("--probe", action="store_true", help="serve the web UI and /metrics, time them once a second")
    parser.add_argument("--profile", action="store_true", help="record the master with py-spy over the rounds")
    parser.add_argument("--profile-top", type=int, default=25, help="functions shown of the profile")
    parser.add_argument("--keep", action="store_true", help="keep each level's folder (master log, results)")
    parser.add_argument("--json", default="", help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    if args.rounds < 2 or args.interval_s < REPORT_S:
        parser.error("--rounds must be >= 2 and --interval-s >= 3 (a report spans at most two windows)")
    print(header(columns(args)), flush=True)
    rows = [run_level(int(n), args) for n in args.workers.split(",") if n.strip()]
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0 if all(row["exact"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
