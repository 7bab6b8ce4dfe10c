"""How long `llm-locust report` takes on a 24-hour run (target: under 10 s).

Generates a results folder as a 24-hour soak would leave it, one row per second: 86,400 rows of
llm_timeseries.csv (24 one-hour steps, step column filled), Locust's stats history with the
endpoint and Aggregated rows per second (172,800 rows), Locust's stats, summary.json with the 24
steps, and histograms.json (run + every step, from ~1.7 M recorded requests' worth of values).
Then times `build_report` on it: loading + charts + HTML, and the PNG export separately.

Usage: .venv/bin/python benchmarks/report_24h.py [--hours 24] [--no-png] [--keep DIR]
"""

from __future__ import annotations

import argparse
import csv
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

from llm_locust.metrics.hdr import new_histogram
from llm_locust.report.build import build_report
from llm_locust.results.files import iso_time, timeseries_columns, write_summary

STEP_S = 3600
PERCENTILES = ("p50", "p90", "p99")


def _stats(values_ms: np.ndarray) -> dict[str, float | int]:
    """A summary distribution of `values_ms`."""
    q = [float(v) for v in np.percentile(values_ms, [50, 90, 95, 99, 99.9])]
    stats = dict(zip(("p50", "p90", "p95", "p99", "p99_9"), q, strict=True))
    return {"count": len(values_ms), "mean": float(values_ms.mean()), "min": float(values_ms.min()), **stats,
            "max": float(values_ms.max())}  # fmt: skip


def generate(folder: Path, hours: int, rng: np.random.Generator) -> None:
    """Write a `hours`-long results folder, one time-series and history row per second."""
    n = hours * 3600
    t0 = 1_795_000_000
    seconds = np.arange(n)
    users = 16 + 16 * (seconds // STEP_S % 2)
    requests = rng.poisson(users / 2.0)
    ttft = rng.gamma(4.0, 40.0, (n, 3)).cumsum(axis=1)
    tpot = rng.gamma(20.0, 1.0, (n, 3)).cumsum(axis=1)
    itl = rng.gamma(20.0, 1.0, (n, 3)).cumsum(axis=1)
    e2e = 128 * tpot + ttft
    with (folder / "llm_timeseries.csv").open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(timeseries_columns())
        for i in range(n):
            out.writerow([
                time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t0 + i)), t0 + i, float(i), i // STEP_S, users[i],
                requests[i], int(i % 997 == 0), float(requests[i]), float(128 * requests[i]),
                *np.round(ttft[i], 3), *np.round(tpot[i], 3), *np.round(itl[i], 3), *np.round(e2e[i], 3),
            ])  # fmt: skip
    header = ["Timestamp", "User Count", "Type", "Name", "Requests/s", "Failures/s", "50%", "66%", "75%", "80%",
              "90%", "95%", "98%", "99%", "99.9%", "99.99%", "100%", "Total Request Count", "Total Failure Count",
              "Total Median Response Time", "Total Average Response Time", "Total Min Response Time",
              "Total Max Response Time", "Total Average Content Size"]  # fmt: skip
    total = np.cumsum(requests)
    with (folder / "locust_stats_history.csv").open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(header)
        for i in range(n):
            p50, p95 = int(e2e[i, 0] // 10 * 10), int(e2e[i, 2] // 100 * 100)
            for kind, name in (("POST", "/v1/chat/completions"), ("", "Aggregated")):
                out.writerow([t0 + i, users[i], kind, name, float(requests[i]), 0.0, p50, p50, p50, p50, p95, p95,
                              p95, p95, p95, p95, p95, total[i], 0, p50, p50, 100, p95, 128.0])  # fmt: skip
    with (folder / "locust_stats.csv").open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["Type", "Name", "Request Count", "Failure Count", "Median Response Time",
                      "Average Response Time", "Min Response Time", "Max Response Time", "Average Content Size",
                      "Requests/s", "Failures/s", "50%", "95%"])  # fmt: skip
        out.writerow(["POST", "/v1/chat/completions", total[-1], 0, 3000, 3000, 500, 9000, 128, total[-1] / n, 0,
                      3000, 5000])  # fmt: skip
    steps, hists = [], {}
    run_hist = {m: new_histogram(m) for m in ("ttft", "tpot", "itl", "e2e", "output_tokens")}
    for step in range(hours):
        part = slice(step * STEP_S, (step + 1) * STEP_S)
        count = int(requests[part].sum())
        values = {"ttft": rng.gamma(4.0, 40.0, count), "tpot": rng.gamma(20.0, 1.0, count),
                  "itl": rng.gamma(20.0, 1.0, count), "e2e": rng.gamma(40.0, 70.0, count)}  # fmt: skip
        step_hist = {}
        for metric, ms in values.items():
            h = new_histogram(metric)
            for value_us, repeat in zip(*np.unique((ms * 1000).astype(np.int64), return_counts=True), strict=True):
                h.record_value(int(value_us), int(repeat))
            run_hist[metric].add(h)
            step_hist[metric] = h.encode().decode()
        tokens = new_histogram("output_tokens")
        tokens.record_value(128, count)
        run_hist["output_tokens"].add(tokens)
        step_hist["output_tokens"] = tokens.encode().decode()
        hists[str(step)] = step_hist
        throughput = {"duration_s": STEP_S, "requests_ok": count, "requests_failed": 0, "output_tokens": 128 * count,
                      "requests_per_s": count / STEP_S, "output_tokens_per_s": 128 * count / STEP_S,
                      "achieved_rate_per_s": count / STEP_S}  # fmt: skip
        steps.append({
            "index": step, "label": f"users={users[part][0]} (hour {step + 1})", "users": int(users[part][0]),
            "rate_per_s": None, "start_time": iso_time(t0 + step * STEP_S),
            "end_time": iso_time(t0 + (step + 1) * STEP_S), "warmup_s": 60.0, "measure_s": STEP_S - 60.0,
            "throughput": throughput, "achieved_rate_per_s": count / STEP_S,
            "metrics": {f"{m}_ms": _stats(v) for m, v in values.items()}, "failures": {},
        })  # fmt: skip
    run_values = {m: rng.gamma(4.0, 40.0, 10_000) for m in ("ttft", "ttfo", "tpot", "itl", "e2e")}
    summary = {
        "status": "complete", "llm_locust_version": "bench", "locust_version": "bench",
        "run": {"host": "http://bench", "start_time": iso_time(t0), "end_time": iso_time(t0 + n), "duration_s": n,
                "users_max": int(users.max()), "workers_max": 4, "workers_lost": [], "locust_csv_prefix": "locust"},
        "settings": {"model": "bench", "slo": [], "interval_s": 1.0},
        "load": {"model": "concurrency_sweep", "rate_per_s": None},
        "metrics": {f"{m}_ms": _stats(v) for m, v in run_values.items()},
        "throughput": {"duration_s": n, "requests_ok": int(total[-1]), "requests_failed": 0,
                       "requests_per_s": float(total[-1] / n), "output_tokens_per_s": float(128 * total[-1] / n)},
        "steps": steps, "failures": {}, "timeseries": {"interval_s": 1.0, "rows": n}, "warnings": [],
    }  # fmt: skip
    write_summary(folder, summary)
    document = {"run": {m: h.encode().decode() for m, h in run_hist.items()}, "steps": hists}
    (folder / "histograms.json").write_bytes(orjson.dumps(document))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=int, default=24)
    parser.add_argument("--no-png", action="store_true", help="time the HTML only")
    parser.add_argument("--keep", type=Path, help="write the results folder and report here and keep them")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="llm-locust-report-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    generate(folder, args.hours, np.random.default_rng(1))
    print(f"generated {args.hours} h of history in {time.perf_counter() - t:.1f} s: {folder}")
    for path in sorted(folder.iterdir()):
        print(f"  {path.name:28} {path.stat().st_size / 1e6:8.1f} MB")

    t = time.perf_counter()
    report = build_report([folder], folder / "report.html", png=False)
    html_s = time.perf_counter() - t
    print(f"report (load + charts + HTML, {len(report.charts)} charts): {html_s:.2f} s, "
          f"{report.html_path.stat().st_size / 1e6:.1f} MB")  # fmt: skip
    if not args.no_png:
        t = time.perf_counter()
        report = build_report([folder], folder / "report.html", png=True)
        total_s = time.perf_counter() - t
        status = f"{len(report.png_paths)} PNGs" if report.png_paths else f"PNGs skipped: {report.png_skipped}"
        print(f"report with PNG images: {total_s:.2f} s ({status})")
    if args.keep is None:
        shutil.rmtree(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
