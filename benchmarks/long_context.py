"""Long prompts measured exactly? Client TTFT against the simulator's own, request by request, at 1k, 32k and 128k
prompt tokens.

For each prompt length: the simulator (fixed timing: `--ttft-ms`, `--itl-ms`) and llm-locust (`locustfiles/chat.py`,
`--users` users, `--max-tokens` output tokens, `--requests-jsonl`) over 127.0.0.1 for `--run-time-s`. Each request's
line is joined with the simulator's trace by its id, and its TTFT as the client measured it (first token − send) is
compared with the simulator's (first token write − the kernel's receive time of the read that brought the request's
first byte): the difference
is what the client adds — waiting to send its body, reading late. Printed per length (requests sent in the first
`--warmup-s` left out: the users' start):

- the difference's p50 / p99 / max, ms, and where the worst requests' time went: before the simulator received the
  request (send → received), or after its first write (written → client's first token);
- the simulator's mean time decoding a body, and the p99 of its time from a request's first byte to its last (a
  body read over several reads);
- the client's CPU per request, ms (its process tree over the run, / requests), and the simulator's.

    .venv/bin/python benchmarks/long_context.py                       # 1k, 32k, 128k tokens, 16 users
    .venv/bin/python benchmarks/long_context.py --prompt-tokens 100000 --users 16 --run-time-s 20
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from client_capacity import ROOT, cpu_seconds, header, percentile, plain_row, process_tree

from llm_locust.metrics.gates import EXIT_CLIENT_LIMITED, EXIT_GATE_FAILED
from llm_locust.sim import run_sim


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of `pid` and its live descendants."""
    return sum(cpu_seconds(p) for p in process_tree(pid))


def run_length(prompt_tokens: int, args: argparse.Namespace) -> dict:
    """One prompt length: the joined requests' differences and the CPU per request of the client and simulator."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        run_sim("--ttft-ms", str(args.ttft_ms), "--itl-ms", str(args.itl_ms)) as sim,
    ):
        results = Path(tmp)
        sim_cpu0 = tree_cpu_s(sim.pid)
        command = [
            sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "chat.py"), "--headless",
            "-u", str(args.users), "-r", str(args.users), "-t", f"{args.run_time_s}s", "--stop-timeout", "10",
            "--host", sim.url, "--prompt-tokens", str(prompt_tokens), "--max-tokens", str(args.max_tokens),
            "--ignore-eos", "--requests-jsonl", "--results-dir", str(results), "--only-summary",
            "--loglevel", "WARNING",
        ]  # fmt: skip
        proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        client_cpu = 0.0
        while proc.poll() is None:  # the tree's CPU, last read before it ends
            client_cpu = tree_cpu_s(proc.pid) or client_cpu
            time.sleep(0.5)
        stderr = proc.stderr.read().decode() if proc.stderr else ""
        if proc.returncode not in (0, EXIT_GATE_FAILED, EXIT_CLIENT_LIMITED):  # a verdict, not a crash
            raise SystemExit(f"llm-locust exited with {proc.returncode}:\n{stderr[-2000:]}")
        sim_cpu = tree_cpu_s(sim.pid) - sim_cpu0
        trace = {record["id"]: record for record in sim.trace()}
        lines = [json.loads(line) for line in (results / "requests.jsonl").read_text().splitlines()]
    wall_minus_mono = time.time() - time.perf_counter()  # one machine: the simulator's perf_counter is ours
    t_from = min(line["t_send"] for line in lines) + args.warmup_s
    joined = []
    for line in lines:
        record = trace.get(line.get("request_id"))
        if line["t_send"] < t_from or record is None or not record["token_times"] or line.get("t_first") is None:
            continue
        client_ms = (line["t_first"] - line["t_send"]) * 1e3
        sim_ms = (record["token_times"][0] - record["t_recv"]) * 1e3
        before_ms = (record["t_recv"] - (line["t_send"] - wall_minus_mono)) * 1e3
        joined.append((client_ms - sim_ms, before_ms, client_ms - sim_ms - before_ms, record["parse_s"] * 1e3,
                       (record["t_body"] - record["t_recv"]) * 1e3))  # fmt: skip
    joined.sort()
    diffs = [j[0] for j in joined]
    worst = joined[-max(1, len(joined) // 100) :]  # the top 1 %
    return {
        "prompt_tokens": prompt_tokens,
        "requests": len(lines),
        "joined": len(joined),
        "diff_p50_ms": percentile(diffs, 50),
        "diff_p99_ms": percentile(diffs, 99),
        "diff_max_ms": diffs[-1] if diffs else float("nan"),
        "worst_before_ms": sum(w[1] for w in worst) / len(worst) if worst else float("nan"),
        "worst_after_ms": sum(w[2] for w in worst) / len(worst) if worst else float("nan"),
        "sim_parse_ms_mean": sum(j[3] for j in joined) / len(joined) if joined else float("nan"),
        "sim_body_ms_p99": percentile(sorted(j[4] for j in joined), 99),
        "client_cpu_ms_per_request": 1e3 * client_cpu / max(1, len(lines)),
        "sim_cpu_ms_per_request": 1e3 * sim_cpu / max(1, len(lines)),
    }


COLUMNS = (
    ("prompt", "prompt_tokens", "{:>7}"),
    ("requests", "joined", "{:>8}"),
    ("diff p50", "diff_p50_ms", "{:>8.3f}"),
    ("p99", "diff_p99_ms", "{:>7.3f}"),
    ("max ms", "diff_max_ms", "{:>8.3f}"),
    ("worst 1%: send→recv", "worst_before_ms", "{:>19.2f}"),
    ("write→client", "worst_after_ms", "{:>12.2f}"),
    ("sim parse ms", "sim_parse_ms_mean", "{:>12.2f}"),
    ("sim body p99 ms", "sim_body_ms_p99", "{:>15.2f}"),
    ("client CPU/req ms", "client_cpu_ms_per_request", "{:>17.2f}"),
    ("sim CPU/req ms", "sim_cpu_ms_per_request", "{:>14.2f}"),
)


def main(argv: list[str] | None = None) -> int:
    """Run every prompt length, print the table (and write --json); return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompt-tokens", default="1000,32000,128000", help="comma-separated prompt lengths")
    parser.add_argument("--users", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--ttft-ms", type=float, default=50.0)
    parser.add_argument("--itl-ms", type=float, default=10.0)
    parser.add_argument("--run-time-s", type=int, default=20, help="length of each run, seconds")
    parser.add_argument("--warmup-s", type=float, default=2.0, help="requests sent this long after the first: left out")
    parser.add_argument("--json", default="", help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    print(f"{args.users} users, {args.max_tokens} output tokens, simulator TTFT {args.ttft_ms} ms, ITL "
          f"{args.itl_ms} ms; {args.run_time_s} s per length; load average at start {load:.2f}")  # fmt: skip
    print(header(COLUMNS), flush=True)
    rows = []
    for tokens in (int(t) for t in args.prompt_tokens.split(",")):
        row = run_length(tokens, args)
        rows.append(row)
        print(plain_row(row, COLUMNS), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
