"""How many streamed token events/s can one client process consume, and how exactly? Side by side:
llm-locust's fast client, llm-locust with the openai SDK (`--client openai-sdk`) and GuideLLM.

For each client and each concurrency level (raised until the error bound breaks) it starts the
simulator (fixed timing, pinned to one core) and the client under test (pinned to the other core)
over 127.0.0.1 for a bounded time, then compares what the client measured with what the simulator
actually sent (its /sim/trace timestamps, same CLOCK_MONOTONIC clock):

- events/s: token events the simulator wrote per second inside the measurement window (every one
  of them consumed by the client: one token per event);
- CPU %: of the client's process tree over the window (100 % = one core); µs/event = CPU / events;
- ITL err p50 / p99: |client ITL percentile − percentile of the simulator's inter-write gaps|, ms
  (GuideLLM exports no per-gap data: its row compares its per-request mean gap, `*`);
- TTFT err p50 / p99: |client TTFT percentile − percentile of (first token write − request
  received)|, ms — includes the time a request waits in the simulator's accept queue;
- RSS: peak resident memory of the largest client process, MB; RSS Δ: how much it grew over the
  measurement window (flat memory: about 0).

`--prometheus-port` runs llm-locust with its live export on (a free port, scraped every second by the benchmark):
its cost per event is the µs/event above a run without.

`--scoring on|off|both` runs llm-locust on a dataset of 64 prompts whose lines carry a reference (`on`: each answer
kept and scored after its stream — a regex and a multiple-choice letter, `metrics/scoring.py`) or the same prompts
without one (`off`): the cost of scoring per event is the µs/event between the two (column `scored`).

`--scheme https` runs the same over HTTPS: the simulator serves TLS (`--tls-cert/--tls-key`) with a certificate of
a throw-away CA made for the run (trustme), which the client trusts (`--ca-bundle`, and `SSL_CERT_FILE` for
GuideLLM); `--scheme both` runs each level over http and then https, side by side in one table.

A level is within the bound when ITL p99 err ≤ --itl-bound-ms and TTFT p99 err ≤ --ttft-bound-ms;
after the first level out of bound the client's ramp stops (unless --no-stop). `--repeat N` runs
each level N times and prints every run: tail errors depend on stalls of the machine, which vary.

    .venv/bin/python benchmarks/client_capacity.py --clients fast,openai-sdk,guidellm \
        --streams 50,100,200,400,600 --run-time-s 12
    .venv/bin/python benchmarks/client_capacity.py --scheme both --streams 16,128,256 --no-stop
    .venv/bin/python benchmarks/client_capacity.py --prometheus-port --streams 100,400 --no-stop
    .venv/bin/python benchmarks/client_capacity.py --scoring both --streams 128 --run-time-s 10 --no-stop

GuideLLM runs from its own venv (default benchmarks/.venv-guidellm, see benchmarks/RESULTS.md);
its row is skipped with a note when that venv is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from time import perf_counter
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hdrh.histogram import HdrHistogram  # noqa: E402

from llm_locust.config.link_auth import free_port  # noqa: E402
from llm_locust.metrics.gates import EXIT_CLIENT_LIMITED, EXIT_GATE_FAILED  # noqa: E402
from llm_locust.sim import SimProcess, run_sim  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
CLIENTS = ("fast", "openai-sdk", "guidellm")
GUIDELLM = ROOT / "benchmarks" / ".venv-guidellm" / "bin" / "guidellm"
COLUMNS = (
    ("client", "client", "{:>10}"),
    ("streams", "streams", "{:>7}"),
    ("scheme", "scheme", "{:>6}"),
    ("events/s", "events_per_s", "{:>9.0f}"),
    ("CPU %", "cpu_pct", "{:>6.0f}"),
    ("µs/event", "cpu_us_per_event", "{:>8.1f}"),
    ("ITL err p50", "itl_err_p50_ms", "{:>11}"),
    ("p99 ms", "itl_err_p99_ms", "{:>7}"),
    ("TTFT err p50", "ttft_err_p50_ms", "{:>12.3f}"),
    ("p99 ms", "ttft_err_p99_ms", "{:>8.3f}"),
    ("fail", "failures", "{:>5}"),
    ("RSS MB", "rss_mb", "{:>7.1f}"),
    ("RSS Δ MB", "rss_growth_mb", "{:>8.1f}"),
    ("in bound", "in_bound", "{:>8}"),
    ("scored", "scoring", "{:>6}"),
)


class LevelFailed(Exception):
    """A level gave nothing to measure (said in the table; the client's ramp ends there)."""


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` (and its reaped children), seconds (0 if gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def process_tree(pid: int) -> list[int]:
    """`pid` and all its live descendants."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo.extend(children.get(p, ()))
    return tree


def sample_cpu(proc: subprocess.Popen, timeout_s: float) -> tuple[list[tuple[float, float, float]], float]:
    """Until `proc` exits: every 0.25 s, (perf_counter s, CPU seconds of its process tree so far,
    RSS of its largest process now, MB). Returns the samples and that process's peak RSS, MB."""
    samples: list[tuple[float, float, float]] = []
    cpu_by_pid: dict[int, float] = {}
    peak_mb = 0.0
    deadline = perf_counter() + timeout_s
    while proc.poll() is None and perf_counter() < deadline:
        now_mb = 0.0
        for pid in process_tree(proc.pid):
            cpu_by_pid[pid] = max(cpu_by_pid.get(pid, 0.0), cpu_seconds(pid))
            peak_mb = max(peak_mb, rss_mb(pid))
            now_mb = max(now_mb, rss_mb(pid, "VmRSS"))
        samples.append((perf_counter(), sum(cpu_by_pid.values()), now_mb))
        time.sleep(0.25)
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    return samples, peak_mb


def rss_growth_mb(samples: list[tuple[float, float, float]], t0: float, t1: float) -> float:
    """How much the largest process's RSS grew from `t0` to `t1` (perf_counter s), MB."""
    inside = [rss for t, _cpu, rss in samples if t0 <= t <= t1]
    return inside[-1] - inside[0] if len(inside) >= 2 else float("nan")


def cpu_between(samples: list[tuple[float, float, float]], t0: float, t1: float) -> float:
    """CPU seconds used between `t0` and `t1` (perf_counter s), interpolated from `samples`."""

    def at(t: float) -> float:
        for (ta, ca, _ra), (tb, cb, _rb) in pairwise(samples):
            if ta <= t <= tb:
                return ca + (cb - ca) * (t - ta) / (tb - ta)
        return samples[-1][1] if samples and t > samples[-1][0] else 0.0

    return at(t1) - at(t0)


def rss_mb(pid: int, field: str = "VmHWM") -> float:
    """Resident set size of `pid`, MB: peak (VmHWM) or now (VmRSS); 0 if gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0.0


def peak_rss_mb(pid: int) -> float:
    """Peak resident set size of `pid`, MB (0 if gone)."""
    return rss_mb(pid)


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_values:
        return float("nan")
    k = max(0, min(len(sorted_values) - 1, round(p / 100 * len(sorted_values) + 0.5) - 1))
    return sorted_values[k]


def pin(core: int | None):
    """A preexec_fn pinning a child process to `core` (None: no pinning)."""
    return None if core is None else lambda: os.sched_setaffinity(0, {core})


def scoring_dataset(folder: Path, scored: bool) -> Path:
    """A dataset of 64 prompts of 16 words in `folder`, each line with a reference (`scored`: a regex its answer
    matches and a multiple-choice letter) or without: the same prompts either way."""
    lines = []
    for i in range(64):
        row: dict[str, Any] = {"prompt": " ".join(f"w{(i * 7 + j) % 97}" for j in range(16))}
        if scored:
            row.update(regex=r"[a-z]+", choices=["first", "second", "third", "fourth"], answer="B")
        lines.append(json.dumps(row))
    path = folder / f"prompts-{'scored' if scored else 'plain'}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def client_command(
    client: str, streams: int, sim: SimProcess, args: argparse.Namespace, out: Path, scoring: str = "-"
) -> list[str]:
    """The command line running `client` at `streams` against `sim`, writing its results to `out`; `scoring` "on" /
    "off": llm-locust on the `scoring_dataset` with / without references ("-": synthetic prompts)."""
    if client == "guidellm":
        return [
            str(args.guidellm), "benchmark", "run", "--target", sim.url, "--model", "llm-locust-sim",
            "--processor", str(tokenizer_dir(out)), "--data", guidellm_data(args),
            "--rate-type", "concurrent", "--rate", str(streams), "--max-seconds", str(args.run_time_s),
            "--warmup-percent", f"{args.warmup_s / args.run_time_s:.3f}", "--output-path", str(out / "guidellm.json"),
            "--disable-progress", "--disable-console-outputs",
        ]  # fmt: skip
    command = [
        sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "sweep.py"), "--headless",
        "--only-summary", "--sweep-users", str(streams), "--step-duration-s", str(args.run_time_s),
        "--warmup-s", str(args.warmup_s), "--host", sim.url, "--max-tokens", max_tokens(args),
        "--ignore-eos", "--prompt-tokens", "16", "--client", client,
        "--results-dir", str(out), "--loglevel", "WARNING",
    ]  # fmt: skip
    if args.pki is not None and sim.url.startswith("https://"):
        command += ["--ca-bundle", str(args.pki / "ca.pem")]
    if scoring != "-":
        command += ["--dataset", str(scoring_dataset(out, scoring == "on"))]
    if args.prometheus_port:
        command += ["--prometheus-port", str(args.export_port)]
    if args.processes > 1:
        port = str(free_port())
        command += ["--processes", str(args.processes), "--master-bind-host", "127.0.0.1",
                    "--master-bind-port", port, "--master-port", port]  # fmt: skip
    return command


def scrape_while(proc: subprocess.Popen, port: int, interval_s: float = 1.0) -> None:
    """Scrape llm-locust's live export (`--prometheus-port`) every `interval_s` until `proc` ends, as a Prometheus
    would: the exporter's cost of being read is in the client's CPU too."""
    while proc.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                response.read()
        except OSError:
            pass  # not listening yet, or gone
        time.sleep(interval_s)


def max_tokens(args: argparse.Namespace) -> str:
    """llm-locust's --max-tokens: the length, or a uniform spread around it."""
    spread = args.tokens_spread
    return str(args.tokens) if not spread else f"uniform:{args.tokens - spread},{args.tokens + spread}"


def guidellm_data(args: argparse.Namespace) -> str:
    """GuideLLM's synthetic --data: 16-token prompts, output lengths as `max_tokens`."""
    data = f"prompt_tokens=16,output_tokens={args.tokens}"
    spread = args.tokens_spread
    if spread:
        data += f",output_tokens_stdev={spread},output_tokens_min={args.tokens - spread},"
        data += f"output_tokens_max={args.tokens + spread}"
    return data


def tokenizer_dir(out: Path) -> Path:
    """A small local tokenizer for GuideLLM's synthetic prompts (it would download one otherwise)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    path = out / "tokenizer"
    path.mkdir(exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = [" ".join(f"w{(i * 7 + j) % 97}" for j in range(40)) for i in range(100)]
    trainer = trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)  # fmt: skip
    tok.train_from_iterator(corpus, trainer)
    tok.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast"}))
    return path


def client_measures(client: str, out: Path) -> dict[str, Any]:
    """What the client measured: ITL (or per-request mean gap) and TTFT percentiles, ms; the TTFT mean and the ITL
    standard deviation, ms (None where the client does not say); failures."""
    if client == "guidellm":
        bench = json.loads((out / "guidellm.json").read_text())["benchmarks"][0]
        metrics = bench["metrics"]
        itl_stats = metrics["inter_token_latency_ms"]["successful"]
        ttft_stats = metrics["time_to_first_token_ms"]["successful"]
        itl, ttft = itl_stats["percentiles"], ttft_stats["percentiles"]
        failures = len(bench["requests"].get("errored", []))
        return {"itl": (itl["p50"], itl["p99"]), "ttft": (ttft["p50"], ttft["p99"]), "failures": failures,
                "ttft_mean": ttft_stats.get("mean"), "itl_std": itl_stats.get("std_dev")}  # fmt: skip
    step = json.loads((out / "summary.json").read_text())["steps"][0]  # the requests sent after the warm-up
    m = step["metrics"]
    histograms = json.loads((out / "histograms.json").read_text())["steps"]["0"]  # integer µs
    ttft_hist, itl_hist = HdrHistogram.decode(histograms["ttft"]), HdrHistogram.decode(histograms["itl"])
    return {
        "itl": (m["itl_ms"]["p50"], m["itl_ms"]["p99"]),
        "ttft": (m["ttft_ms"]["p50"], m["ttft_ms"]["p99"]),
        "failures": sum(step["failures"].values()),
        "ttft_mean": ttft_hist.get_mean_value() / 1e3,
        "itl_std": itl_hist.get_stddev() / 1e3,
    }


def make_pki(folder: Path) -> Path:
    """A throw-away CA (`ca.pem`) and a certificate it issued for 127.0.0.1 (`sim.crt`, `sim.key`) in `folder`."""
    import trustme

    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    leaf = ca.issue_cert("127.0.0.1")
    (folder / "sim.crt").write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    leaf.private_key_pem.write_to_path(str(folder / "sim.key"))
    return folder


def run_level(
    client: str,
    streams: int,
    scheme: str,
    args: argparse.Namespace,
    cores: tuple[int | None, int | None],
    scoring: str = "-",
) -> dict:
    """One client at one concurrency level over `scheme` (http, https), with `scoring` ("on", "off": llm-locust on a
    dataset with or without references; "-": synthetic prompts); returns the table row."""
    sim_args: tuple[str, ...] = ("--ttft-ms", str(args.ttft_ms), "--itl-ms", str(args.itl_ms), "--output-tokens",
                                 str(args.tokens))  # fmt: skip
    env = None
    if scheme == "https":
        sim_args += ("--tls-cert", str(args.pki / "sim.crt"), "--tls-key", str(args.pki / "sim.key"))
        env = {**os.environ, "SSL_CERT_FILE": str(args.pki / "ca.pem")}  # GuideLLM's httpx trusts the CA so
    with tempfile.TemporaryDirectory() as tmp, run_sim(*sim_args) as sim:
        out = Path(tmp)
        if cores[0] is not None:
            os.sched_setaffinity(sim.pid, {cores[0]})
        args.export_port = free_port()
        command = client_command(client, streams, sim, args, out, scoring)
        proc = subprocess.Popen(
            command, preexec_fn=pin(cores[1]), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT, env=env
        )
        if args.prometheus_port and client != "guidellm":
            threading.Thread(target=scrape_while, args=(proc, args.export_port), daemon=True).start()
        samples, rss = sample_cpu(proc, args.run_time_s + 120)
        stderr = proc.stderr.read() if proc.stderr else b""
        # 3: the verdict failed, 5: the client's error budget was exceeded — both what a client pushed to its
        # capacity may say; the benchmark measures that error itself against the simulator's trace
        if proc.returncode not in (0, EXIT_GATE_FAILED, EXIT_CLIENT_LIMITED):
            raise SystemExit(f"{client} exited with {proc.returncode} at {streams} streams:\n{stderr.decode()[-2000:]}")
        measured = client_measures(client, out)
        full_trace = sim.trace()
    trace = [r for r in full_trace if not r.get("cancelled") and len(r["token_times"]) >= 2]
    if not trace:
        raise LevelFailed(f"{client:>10} {streams:>7}  no request completed: the client is far past saturation")
    # the measurement window: from the warm-up's end to 1 s before the last token
    t0 = min(r["t_recv"] for r in trace) + args.warmup_s
    t1 = max(r["token_times"][-1] for r in trace) - 1.0
    trace = [r for r in trace if r["t_recv"] >= t0]  # the requests the client measured (sent after warm-up)
    if client == "guidellm":  # per-request mean gap, what GuideLLM calls ITL
        server_itl = sorted((r["token_times"][-1] - r["token_times"][0]) * 1e3 / (len(r["token_times"]) - 1)
                            for r in trace)  # fmt: skip
    else:
        server_itl = sorted((b - a) * 1e3 for r in trace for a, b in pairwise(r["token_times"]))
    server_ttft = sorted((r["token_times"][0] - r["t_recv"]) * 1e3 for r in trace)
    events = sum(1 for r in full_trace for t in r["token_times"] if t0 <= t < t1)  # cut requests' too
    cpu_s = cpu_between(samples, t0, t1)
    events_per_s = events / (t1 - t0)
    itl_err = [abs(measured["itl"][i] - percentile(server_itl, p)) for i, p in enumerate((50, 99))]
    ttft_err = [abs(measured["ttft"][i] - percentile(server_ttft, p)) for i, p in enumerate((50, 99))]
    return {
        "client": client,
        "streams": streams,
        "scheme": scheme,
        "scoring": scoring,
        "processes": 1 if client == "guidellm" else args.processes,
        "events_per_s": events_per_s,
        "cpu_pct": 100 * cpu_s / (t1 - t0),
        "cpu_us_per_event": 1e6 * cpu_s / events if events else float("nan"),
        "itl_err_p50_ms": itl_err[0],
        "itl_err_p99_ms": itl_err[1],
        "itl_per_gap": client != "guidellm",
        "ttft_err_p50_ms": ttft_err[0],
        "ttft_err_p99_ms": ttft_err[1],
        "server_itl_p99_ms": percentile(server_itl, 99),
        "ttft_mean_ms": measured["ttft_mean"],
        "server_ttft_mean_ms": statistics.fmean(server_ttft),
        "itl_std_ms": measured["itl_std"],
        "server_itl_std_ms": statistics.pstdev(server_itl),
        "failures": measured["failures"],
        "rss_mb": rss,
        "rss_growth_mb": rss_growth_mb(samples, t0, t1),
        "rss_timeline_mb": [(round(t - t0, 1), round(rss, 1)) for t, _cpu, rss in samples[::20]],  # every 5 s
        "in_bound": itl_err[1] <= args.itl_bound_ms and ttft_err[1] <= args.ttft_bound_ms,
    }


def format_row(row: dict) -> str:
    """One line of the table."""
    cells = []
    for _title, key, fmt in COLUMNS:
        value = row[key]
        if key.startswith("itl_err"):
            value = f"{value:.3f}" + ("" if row["itl_per_gap"] else "*")
        elif key == "in_bound":
            value = "yes" if value else "NO"
        cells.append(fmt.format(value))
    return " ".join(cells)


def header(columns: Sequence[tuple[str, str, str]] = COLUMNS) -> str:
    """A table's header line: each title right-aligned to its column's width (`columns`: title, row key, format
    `{:>WIDTH...}`; this benchmark's by default, the other benchmarks' tables too)."""
    return " ".join(f"{title:>{int(fmt[3:].split('.')[0].rstrip('}'))}}" for title, _key, fmt in columns)


def plain_row(row: dict[str, Any], columns: Sequence[tuple[str, str, str]]) -> str:
    """One line of a table of `columns` (see `header`): each value formatted, True / False as yes / NO."""
    return " ".join(fmt.format("yes" if row[key] is True else "NO" if row[key] is False else row[key])
                    for _title, key, fmt in columns)  # fmt: skip


def ramp(client: str, schemes: tuple[str, ...], args: argparse.Namespace, cores: tuple[int | None, int | None]) -> list:
    """Run `client` at each level of --streams, over each of `schemes` in turn, printing each row; a scheme's ramp
    stops after a level where no run was within the bound (unless --no-stop)."""
    scorings = {"on": ("on",), "off": ("off",), "both": ("off", "on")}.get(args.scoring, ("-",))
    if client == "guidellm":
        scorings = ("-",)
    rows, going = [], [(scheme, scoring) for scheme in schemes for scoring in scorings]
    for streams in (int(s) for s in args.streams.split(",")):
        for scheme, scoring in list(going):
            try:
                level = [run_level(client, streams, scheme, args, cores, scoring) for _ in range(max(1, args.repeat))]
            except LevelFailed as e:
                print(e, flush=True)
                going.remove((scheme, scoring))
                continue
            rows.extend(level)
            for row in level:
                print(format_row(row), flush=True)
            if not any(row["in_bound"] for row in level) and not args.no_stop:
                going.remove((scheme, scoring))
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the table (and write --json); return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", default="fast", help=f"comma-separated, of {', '.join(CLIENTS)}")
    parser.add_argument("--streams", default="10,100,500", help="comma-separated concurrency levels, rising")
    parser.add_argument("--run-time-s", type=int, default=12, help="length of each level's run, seconds")
    parser.add_argument("--warmup-s", type=float, default=3.0, help="left out at the start of each run, s")
    parser.add_argument("--processes", type=int, default=1, help="llm-locust worker processes (--processes)")
    parser.add_argument("--ttft-ms", type=float, default=50.0)
    parser.add_argument("--itl-ms", type=float, default=10.0)
    parser.add_argument("--tokens", type=int, default=128, help="output tokens per request (mean)")
    parser.add_argument(
        "--tokens-spread", type=int, default=32,
        help="output lengths uniform in tokens ± this (streams drift out of phase, as real requests do); "
        "0: every request the same length, streams in phase (all events and all restarts in bursts)",
    )  # fmt: skip
    parser.add_argument("--itl-bound-ms", type=float, default=1.0, help="ITL p99 error bound, ms")
    parser.add_argument("--ttft-bound-ms", type=float, default=2.0, help="TTFT p99 error bound, ms")
    parser.add_argument("--no-stop", action="store_true", help="run every level even after the bound broke")
    parser.add_argument(
        "--repeat", type=int, default=1,
        help="runs per level, each printed (a shared or virtual machine's stalls vary from run to run); "
        "the ramp stops after a level where no run was within the bound",
    )  # fmt: skip
    parser.add_argument(
        "--prometheus-port", action="store_true",
        help="run llm-locust with its live export on (--prometheus-port, a free port), scraped every second during "
        "the run: the exporter's cost per event is the difference with a run without",
    )  # fmt: skip
    parser.add_argument(
        "--scoring", choices=("on", "off", "both"), default=None,
        help="llm-locust on a dataset of prompts with references, each answer scored (on), the same prompts without "
        "(off), or both side by side at each level (default: synthetic prompts, no dataset)",
    )  # fmt: skip
    parser.add_argument("--guidellm", type=Path, default=GUIDELLM, help="the guidellm executable")
    parser.add_argument("--no-pin", action="store_true", help="do not pin the simulator and the client to cores")
    parser.add_argument("--json", default="", help="also write the rows to this JSON file")
    parser.add_argument(
        "--scheme", choices=("http", "https", "both"), default="http",
        help="http, https (the simulator over TLS, a throw-away CA trusted), or both side by side at each level",
    )  # fmt: skip
    args = parser.parse_args(argv)
    schemes = ("http", "https") if args.scheme == "both" else (args.scheme,)
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    unknown = sorted(set(clients) - set(CLIENTS))
    if unknown:
        parser.error(f"--clients: unknown {', '.join(unknown)} (choose from {', '.join(CLIENTS)})")
    pinnable = hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) >= 2 and not args.no_pin
    cores = (0, 1) if pinnable else (None, None)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"simulator core {cores[0]}, client core {cores[1]}; fixed timing TTFT {args.ttft_ms} ms, ITL "
          f"{args.itl_ms} ms, {args.tokens} ± {args.tokens_spread} tokens; {args.run_time_s} s per level "
          f"({args.warmup_s} s warm-up left out); llm-locust: {args.processes} process(es)"
          f"{', live export scraped every 1 s' if args.prometheus_port else ''}; load average at start "
          f"{load:.2f}")  # fmt: skip
    print(header(), flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as pki:
        args.pki = make_pki(Path(pki)) if "https" in schemes else None
        for client in clients:
            if client == "guidellm" and not args.guidellm.exists():
                print(f"{client:>10} skipped: {args.guidellm} not found (see benchmarks/RESULTS.md to install it)")
                continue
            rows += ramp(client, schemes, args, cores)
    if any(not r["itl_per_gap"] for r in rows):
        print("* GuideLLM: per-request mean gap ((last − first token) / (N − 1)), it keeps no per-gap ITL")
    if args.json:
        Path(args.json).write_text(json.dumps({"load_average": load, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
