"""The largest open-loop rate one worker process sends on time: send-time error p50 <= --p50-bound-ms (default 0.1 ms)
and p99 <= --bound-ms (default 1 ms).

`--arrival trace` (default): for each rate it writes a Mooncake-format trace (Poisson arrivals at R req/s for
--run-time-s, prompts of --input-tokens sharing a first block, --output-tokens each), starts the simulator (fixed
timing, pinned to one core) and one local `locust -f locustfiles/trace.py` process (pinned to the other core) over
127.0.0.1, and compares when each request reached the simulator (its kernel receive time, the same CLOCK_MONOTONIC
clock) with when the trace had it due. `--arrival poisson`: the same with `locust -f locustfiles/rate.py
--request-rate R` (Poisson arrivals drawn by llm-locust, `--prompt-tokens` --input-tokens, `--max-requests` R ×
--run-time-s), each request's due time read from requests.jsonl (`t_sched`, joined with the simulator's record by
its x-request-id; writing the lines costs the client ~1 % of a core at 600 req/s). A request cannot leave early, so
the most punctual one fixes time 0; the error of a request is how much later than that it arrived. The first
--warmup-s is left out (users spawning), and at least until every user has sent once (1 s more than --users / R): a
user's first request opens its connection at its due time (a name lookup and a connect, ~0.3–0.5 ms), and users take
arrivals in turn, so at 100 req/s 400 users send their first requests over the first 4 s.

- req/s, token events/s: what the simulator received and streamed (one token per event) in the window;
- send err p50 / p99 / max: ms; CPU %: the client's process over the window (100 % = one core);
- sent: requests received / requests traced (each once: a count mismatch is printed).

    .venv/bin/python benchmarks/trace_capacity.py --rates 50,100,200,300,400 --run-time-s 20
    .venv/bin/python benchmarks/trace_capacity.py --arrival poisson --rates 100,200,400 --run-time-s 15 --no-stop
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from client_capacity import cpu_between, header, percentile, pin, plain_row, sample_cpu  # noqa: E402

from llm_locust.sim import run_sim  # noqa: E402

COLUMNS = (
    ("req/s", "rate_per_s", "{:>7.1f}"),
    ("events/s", "events_per_s", "{:>9.0f}"),
    ("send err p50", "err_p50_ms", "{:>12.3f}"),
    ("p99 ms", "err_p99_ms", "{:>8.3f}"),
    ("max ms", "err_max_ms", "{:>8.1f}"),
    ("CPU %", "cpu_pct", "{:>6.0f}"),
    ("sent", "sent", "{:>11}"),
    ("in bound", "in_bound", "{:>8}"),
)


def write_trace(path: Path, rate_per_s: float, run_time_s: float, args: argparse.Namespace) -> list[dict]:
    """A Mooncake trace of Poisson arrivals at `rate_per_s`; input lengths unique per request (the simulator's
    prompt count names the request)."""
    rng = random.Random(int(rate_per_s))
    rows, t_s, i = [], 0.0, 0
    while True:
        t_s += rng.expovariate(rate_per_s)
        if t_s >= run_time_s:
            break
        length = args.input_tokens + i
        blocks = -(-length // 512)
        rows.append({"timestamp": round(t_s * 1e3, 3), "input_length": length, "output_length": args.output_tokens,
                     "hash_ids": [i % 8, *range(10_000 + i * 64, 10_000 + i * 64 + blocks - 1)]})  # fmt: skip
        i += 1
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def run_level(rate_per_s: float, args: argparse.Namespace, cores: tuple[int | None, int | None]) -> dict[str, Any]:
    """Send one rate's arrivals (`args.arrival`); the table row."""
    sim_args = ("--ttft-ms", str(args.ttft_ms), "--itl-ms", str(args.itl_ms), "--trace-limit", "1000000")
    with tempfile.TemporaryDirectory() as tmp, run_sim(*sim_args) as sim:
        out = Path(tmp)
        if cores[0] is not None:
            os.sched_setaffinity(sim.pid, {cores[0]})
        command = [
            sys.executable, "-m", "locust", "--headless", "--host", sim.url, "-u", str(args.users), "-r",
            str(args.users), "-t", f"{int(args.run_time_s + 30)}s", "--results-dir", str(out / "results"),
            "--stop-timeout", "5",
        ]  # fmt: skip
        if args.arrival == "trace":
            rows = write_trace(out / "trace.jsonl", rate_per_s, args.run_time_s, args)
            command += ["-f", str(ROOT / "locustfiles" / "trace.py"), "--trace", str(out / "trace.jsonl")]
            expected = len(rows)
        else:
            expected = round(rate_per_s * args.run_time_s)
            command += [
                "-f", str(ROOT / "locustfiles" / "rate.py"), "--request-rate", str(rate_per_s), "--seed", "1",
                "--max-requests", str(expected), "--prompt-tokens", str(args.input_tokens), "--max-tokens",
                str(args.output_tokens), "--ignore-eos", "--requests-jsonl",
            ]  # fmt: skip
        proc = subprocess.Popen(command, preexec_fn=pin(cores[1]), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, cwd=ROOT)  # fmt: skip
        samples, _rss = sample_cpu(proc, args.run_time_s + 120)
        received = [r for r in sim.trace() if r["endpoint"] == "chat"]
        if args.arrival == "trace":
            # input lengths are unique: a request's prompt count names its arrival
            due_of = {r["input_length"]: r["timestamp"] / 1e3 for r in rows}
            arrived = [(r, due_of[r["prompt_tokens"]]) for r in received if r["prompt_tokens"] in due_of]
        else:
            lines = [json.loads(line) for line in (out / "results" / "requests.jsonl").read_text().splitlines()]
            t_first = min((line["t_sched"] for line in lines), default=0.0)
            due_of = {line["request_id"]: line["t_sched"] - t_first for line in lines}  # s from the first arrival
            arrived = [(r, due_of[r["id"]]) for r in received if r["id"] in due_of]
    late = sorted(r["t_recv"] - due_s for r, due_s in arrived)
    origin = late[0] if late else 0.0  # the most punctual request: the sequence's time 0 on the simulator's clock
    warmup_s = max(args.warmup_s, args.users / rate_per_s + 1.0)  # every user's connection open
    errors = sorted((r["t_recv"] - due_s - origin) * 1e3 for r, due_s in arrived if due_s >= warmup_s)
    t0, t1 = origin + warmup_s, origin + args.run_time_s
    events = sum(1 for r in received for t in r["token_times"] if t0 <= t < t1)
    span_s = t1 - t0
    in_bound = (
        len(arrived) == expected
        and percentile(errors, 50) <= args.p50_bound_ms
        and percentile(errors, 99) <= args.bound_ms
    )
    return {
        "rate_per_s": len(errors) / span_s,
        "events_per_s": events / span_s,
        "err_p50_ms": percentile(errors, 50),
        "err_p99_ms": percentile(errors, 99),
        "err_max_ms": errors[-1] if errors else float("nan"),
        "cpu_pct": 100 * cpu_between(samples, t0, t1) / span_s,
        "sent": f"{len(arrived)}/{expected}",
        "in_bound": in_bound,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--arrival",
        choices=("trace", "poisson"),
        default="trace",
        help="a trace replayed (locustfiles/trace.py) or --request-rate's Poisson arrivals (rate.py)",
    )
    parser.add_argument("--rates", default="50,100,200,300", help="rates to try, req/s (comma-separated)")
    parser.add_argument("--run-time-s", type=float, default=20.0, help="arrivals of each rate over this long, s")
    parser.add_argument(
        "--warmup-s", type=float, default=3.0, help="start of the trace left out, s (at least --users / rate + 1)"
    )
    parser.add_argument("--input-tokens", type=int, default=600, help="prompt tokens of the first request (+1 each)")
    parser.add_argument("--output-tokens", type=int, default=32, help="output tokens per request (one per event)")
    parser.add_argument("--ttft-ms", type=float, default=50.0)
    parser.add_argument("--itl-ms", type=float, default=10.0)
    parser.add_argument("--users", type=int, default=400, help="the cap on requests in flight")
    parser.add_argument("--bound-ms", type=float, default=1.0, help="send-time error p99 bound, ms")
    parser.add_argument("--p50-bound-ms", type=float, default=0.1, help="send-time error p50 bound, ms")
    parser.add_argument("--no-stop", action="store_true", help="keep going after the first rate out of bound")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    pinnable = hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) >= 2
    cores = (0, 1) if pinnable else (None, None)
    print(f"load: {os.getloadavg()[0]:.2f} (1-min load average of this machine before the run)")
    print(f"arrival: {args.arrival}")
    print(header(COLUMNS))
    rows = []
    for rate in (float(r) for r in args.rates.split(",")):
        row = run_level(rate, args, cores)
        rows.append(row)
        print(plain_row(row, COLUMNS), flush=True)
        if not row["in_bound"] and not args.no_stop:
            break
    best = [r for r in rows if r["in_bound"]]
    if best:
        top = max(best, key=lambda r: r["rate_per_s"])
        print(f"largest rate on time (send err p50 <= {args.p50_bound_ms:g} ms, p99 <= {args.bound_ms:g} ms): "
              f"{top['rate_per_s']:.0f} req/s, "
              f"{top['events_per_s']:.0f} token events/s")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps({"rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
