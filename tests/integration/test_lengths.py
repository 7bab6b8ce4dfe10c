"""Input length as a load variable: length sweeps and grids through a master and its workers, per-request prompt-length
buckets, and the report's charts against input length — real `locust` runs against the batching simulator, whose
TTFT at one user is one engine step: decode step + prefill per input token (`sim.engine`)."""

from __future__ import annotations

import io
import itertools
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from conftest import ROOT, options, read_summary, run_locust
from harness.browser import browser_tools, chromium_page
from harness.report_figures import array, figures, trace

from llm_locust.config.settings import Settings
from llm_locust.errors import ConfigError
from llm_locust.load.arrivals import sweep_steps
from llm_locust.metrics.length_buckets import bucket_label
from llm_locust.metrics.slo import parse_slos
from llm_locust.report.build import build_report
from llm_locust.report.capacity import capacity
from llm_locust.report.run_data import RunData
from llm_locust.sim import run_sim
from llm_locust.workload.builder import Workload
from llm_locust.workload.tokens import token_counter

SWEEP = ROOT / "locustfiles" / "sweep.py"
DECODE_MS, PREFILL_US = 5.0, 100.0
SIM = ("--timing", "batching", "--max-batch", "8", "--decode-step-ms", str(DECODE_MS),
       "--decode-step-ms-per-seq", "0", "--prefill-us-per-token", str(PREFILL_US))  # fmt: skip
LENGTHS = (64, 1024, 2048)


def model_ttft_ms(prompt_tokens: float) -> float:
    """The simulator's TTFT of a lone request: one engine step admitting it."""
    return DECODE_MS + PREFILL_US / 1e3 * prompt_tokens


def locust(url: str, results: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A headless sweep run (`locust` CLI; with --processes on a free master port) writing `results`."""
    return run_locust(SWEEP, "--only-summary", "--host", url, "--max-tokens", "8", "--ignore-eos", "--interval-s", "1",
                      "--results-dir", str(results), *args, timeout_s=120)  # fmt: skip


@pytest.fixture(scope="module")
def grid_run(tmp_path_factory) -> Path:
    """A 2 x 3 grid (1 and 3 users x 64, 1024, 2048 prompt tokens) through a master and 2 workers; steps of 3 s
    (Locust's shape ticks once a second, so a step's measurement window is 1 to 3 s)."""
    results = tmp_path_factory.mktemp("grid") / "grid"
    lengths = ",".join(map(str, LENGTHS))
    with run_sim(*SIM) as sim:
        proc = locust(sim.url, results, "--sweep-users", "1,3", "--sweep-prompt-tokens", lengths,
                      "--step-duration-s", "3", "--warmup-s", "1", "--processes", "2")  # fmt: skip
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return results


def test_grid_order_labels_and_a_length_sweep_alone_runs_at_one_user():
    steps = sweep_steps([1, 4], [], 256, 10, 2, [8, 512], [64])
    assert [s.label for s in steps] == [
        "users=1 prompt=8 max=64", "users=4 prompt=8 max=64", "users=1 prompt=512 max=64", "users=4 prompt=512 max=64"
    ]  # fmt: skip
    alone = sweep_steps([], [], 256, 10, 2, [8, 128], [])
    assert [(s.users, s.rate_per_s, s.prompt_tokens) for s in alone] == [(1, None, 8), (1, None, 128)]
    rates = sweep_steps([], [0.5, 2], 16, 10, 2, None, [32, 256])
    assert [(s.users, s.rate_per_s, s.max_tokens) for s in rates] == [(16, 0.5, 32), (16, 2, 32), (16, 0.5, 256),
                                                                      (16, 2, 256)]  # fmt: skip
    assert [bucket_label(n) for n in (1, 8, 15, 16, 1023, 1024, 4096)] == [
        "1-1", "8-15", "8-15", "16-31", "512-1023", "1024-2047", "4096-8191"
    ]  # fmt: skip


def test_a_grid_drops_from_its_highest_load_to_its_lowest_at_once(tmp_path):
    """8 users then 1, through a master: the 7 users go at once (at Locust's spawn rate of 1/s the master would hold
    the shape ~7 s, stretching the last step's 1.5 s window to ~5.5 s)."""
    results = tmp_path / "down"
    with run_sim("--ttft-ms", "300", "--itl-ms", "20", "--output-tokens", "16") as sim:
        proc = locust(sim.url, results, "--sweep-users", "8,1", "--step-duration-s", "2", "--warmup-s", "0.5",
                      "--processes", "2")  # fmt: skip
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    steps = read_summary(results)["steps"]
    assert [s["users"] for s in steps] == [8, 1]
    assert steps[1]["measure_s"] < 3.5, steps[1]["measure_s"]


def test_bad_length_sweeps_are_one_line_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"--sweep-prompt-tokens '8,x': 'x' is not a int"):
        Settings.from_options(options("--sweep-prompt-tokens", "8,x"))
    with pytest.raises(ConfigError, match=r"--sweep-max-tokens '0': every value must be > 0"):
        Settings.from_options(options("--sweep-max-tokens", "0"))
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": "hello there"}\n')
    with pytest.raises(ConfigError, match="--sweep-prompt-tokens and --dataset exclude each other"):
        Settings.from_options(options("--dataset", str(data), "--sweep-prompt-tokens", "8"))


def test_a_steps_lengths_set_the_request_exactly_with_a_tokenizer(tmp_path):
    from harness.tokenizer import build_tokenizer

    tokenizer = str(build_tokenizer(tmp_path / "tokenizer.json"))
    settings = Settings.from_options(options("--tokenizer", tokenizer, "--sweep-prompt-tokens", "8,300",
                                             "--sweep-max-tokens", "7"))  # fmt: skip
    workload = Workload(settings.workload, "chat", server_family=settings.endpoint.server_family)
    counter = token_counter(tokenizer)
    for step in settings.load.steps:
        request = workload.next_request("m", step)
        body = orjson.loads(request.body)
        assert request.expected_prompt_tokens == counter.count(body["messages"][0]["content"]) == step.prompt_tokens
        assert body["max_tokens"] == 7
    assert workload.next_request("m", None).expected_prompt_tokens == 128  # outside a step: --prompt-tokens
    assert settings.prompt_buckets and not Settings.from_options(options()).prompt_buckets


def _ttft_p50(step: dict[str, Any]) -> float:
    return step["metrics"]["ttft_ms"]["p50"]


@pytest.mark.alone  # each step's TTFT p50 (1-3 s windows of a few requests) against the prefill model
def test_grid_steps_carry_both_coordinates_and_ttft_follows_the_prefill_model(grid_run):
    summary = read_summary(grid_run)
    steps = summary["steps"]
    assert summary["load"]["prompt_lengths"].startswith("approximate")  # no --tokenizer
    assert summary["run"]["workers_max"] == 2
    assert [(s["users"], s["prompt_tokens"]) for s in steps] == [(u, n) for n in LENGTHS for u in (1, 3)]
    # every step got its own window (going from 3 users back to 1 takes no time)
    assert all(0.5 < s["measure_s"] < 5 for s in steps), [s["measure_s"] for s in steps]
    for step in steps:
        throughput = step["throughput"]
        assert throughput["requests_ok"] >= 1 and throughput["requests_failed"] == 0, step["label"]
        # the server's count (usage.prompt_tokens) of every request is the step's length
        assert throughput["prompt_tokens"] == step["prompt_tokens"] * throughput["requests_ok"], step["label"]
    lone = [_ttft_p50(s) for s in steps if s["users"] == 1]
    model = [model_ttft_ms(n) for n in LENGTHS]  # 11.4, 107.4, 209.8 ms
    # each between the midpoints to its neighbours in the model, the last below twice its model value
    bounds = [0.0, *((a + b) / 2 for a, b in itertools.pairwise(model)), 2 * model[-1]]
    for value, low, high in zip(lone, bounds, bounds[1:], strict=False):
        assert low < value < high, (lone, model)
    # 3 users: a request waits for the engine step under way (which admitted at most the two others' prompts), then
    # its own step admits it with at most the two others: between the lone model value and two decode steps plus the
    # prefill of 5 prompts. Where in that range depends on the users' phase, not the length: 3 users in step at 1,024
    # tokens share one step (5 + 0.1 x 3,072 = 312 ms, seen), apart at 2,048 each has its own (210 ms) — so the
    # middle length need not sit below the longest
    three = [_ttft_p50(s) for s in steps if s["users"] == 3]
    for n, value in zip(LENGTHS, three, strict=True):
        assert model_ttft_ms(n) - 1 < value < 2 * DECODE_MS + PREFILL_US / 1e3 * 5 * n, (n, three)
    assert three[0] < three[1] and three[2] > 2 * three[0], three
    # the prompt-length buckets of the sweep: one per step, holding exactly the step's requests
    buckets = summary["breakdowns"]["prompt_tokens"]
    assert [(b["step"], b["label"]) for b in buckets] == [(s["index"], bucket_label(s["prompt_tokens"])) for s in steps]
    assert [b["requests_ok"] for b in buckets] == [s["throughput"]["requests_ok"] for s in steps]


def test_report_charts_are_the_summary_numbers_and_capacity_is_read_per_length(grid_run, tmp_path):
    summary = read_summary(grid_run)
    steps = summary["steps"]
    budget_ms = (model_ttft_ms(LENGTHS[1]) + model_ttft_ms(LENGTHS[2])) / 2  # ~159 ms: the 2048-token steps miss it
    slos = parse_slos([f"ttft_p50_ms={budget_ms:.0f}"])
    report = build_report([grid_run], tmp_path / "grid.html", slos=slos, png=False, grid_metric="ttft_ms_p50")
    page = report.html_path.read_text()
    figs = figures(page)
    for users in (1, 3):
        line = [s for s in steps if s["users"] == users]
        mean_input = [s["throughput"]["prompt_tokens"] / s["throughput"]["requests_ok"] for s in line]
        for stat in ("p50", "p90", "p99"):
            t = trace(figs["ttft_vs_length"], series=f"users={users}", metric="ttft_ms", stat=stat)
            assert array(t["x"]).tolist() == mean_input
            assert array(t["y"]).tolist() == [s["metrics"]["ttft_ms"][stat] for s in line]
        out = trace(figs["throughput_vs_length"], series=f"users={users}", metric="output_tokens_per_s")
        assert array(out["y"]).tolist() == [s["throughput"]["output_tokens_per_s"] for s in line]
        prefill = trace(figs["throughput_vs_length"], series=f"users={users}", metric="prefill_tokens_per_s")
        assert array(prefill["y"]) == pytest.approx(
            [n / (_ttft_p50(s) / 1e3) for n, s in zip(mean_input, line, strict=True)]
        )
    (heat,) = figs["grid_heatmap"]["data"]
    assert heat["x"] == [str(n) for n in LENGTHS] and heat["y"] == ["users=1", "users=3"]
    z = array(heat["z"]) if isinstance(heat["z"], dict) else np.array([array(row) for row in heat["z"]])
    assert z.reshape(2, 3).tolist() == [[_ttft_p50(s) for s in steps if s["users"] == u] for u in (1, 3)]
    # per prompt length: report.capacity over that length's steps, as the page says
    run = RunData(grid_run, grid_run.name, summary=summary)
    for n in LENGTHS:
        cells = RunData(
            grid_run, grid_run.name, summary={**summary, "steps": [s for s in steps if s["prompt_tokens"] == n]}
        )
        cap = capacity(cells, slos)
        text = f"prompt={n}: capacity {cap.best.label}" if cap.best else f"prompt={n}: no step meets every SLO"
        assert text in page, text
    assert capacity(run, slos) is not None
    assert "prompt=2048: no step meets every SLO" in page  # 205 ms of prefill alone at one user
    assert "prompt=64: capacity users=3 prompt=64" in page
    with pytest.raises(ConfigError, match="--grid-metric 'nope': not a step column"):
        build_report([grid_run], tmp_path / "bad.html", png=False, grid_metric="nope")


@pytest.mark.alone  # bucket TTFT within 25 % + 15 ms
@pytest.mark.slow
def test_uniform_run_buckets_agree_with_the_sweep_over_the_same_lengths(grid_run, tmp_path):
    """One run with prompts uniform over 256..2047 tokens at one user: each power-of-two bucket's mean TTFT is the
    sweep's TTFT (users=1 line, interpolated) at the bucket's mean input length."""
    results = tmp_path / "uniform"
    with run_sim(*SIM) as sim:
        proc = locust(sim.url, results, "--sweep-users", "1", "--step-duration-s", "12", "--warmup-s", "1",
                      "--prompt-tokens", "uniform:256,2047")  # fmt: skip
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    buckets = read_summary(results)["breakdowns"]["prompt_tokens"]
    assert [b["label"] for b in buckets] == ["256-511", "512-1023", "1024-2047"]
    sweep = [s for s in read_summary(grid_run)["steps"] if s["users"] == 1]
    lengths = [s["prompt_tokens"] for s in sweep]
    for bucket in buckets:
        mean_input = bucket["throughput"]["prompt_tokens"] / bucket["requests_ok"]
        low, high = (int(x) for x in bucket["label"].split("-"))
        assert low <= mean_input <= high and bucket["requests_ok"] >= 3, bucket
        expected = float(np.interp(mean_input, lengths, [s["metrics"]["ttft_ms"]["mean"] for s in sweep]))
        assert abs(bucket["metrics"]["ttft_ms"]["mean"] - expected) < 0.25 * expected + 15, (bucket, expected)
    report = build_report([results], tmp_path / "uniform.html", png=False)
    t = trace(figures(report.html_path.read_text())["ttft_vs_length"], series="users=1", metric="ttft_ms", stat="p50")
    assert array(t["y"]).tolist() == [b["metrics"]["ttft_ms"]["p50"] for b in buckets]


def test_length_charts_render_in_headless_chromium(grid_run, tmp_path):
    _, _, image_module = browser_tools()
    report = build_report([grid_run], tmp_path / "grid.html", png=False)
    keys = {"ttft_vs_length", "throughput_vs_length", "grid_heatmap"}
    problems: list[str] = []
    with chromium_page(viewport={"width": 1400, "height": 1000}) as page:
        page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        page.goto(report.html_path.resolve().as_uri())
        page.wait_for_selector("body[data-charts-rendered]", timeout=60_000)
        assert page.evaluate("document.body.dataset.chartsRendered") == str(len(report.charts))
        shots = {key: page.locator(f"#{key}").screenshot() for key in keys}
    assert problems == []
    for key, png in shots.items():
        image = np.asarray(image_module.open(io.BytesIO(png)).convert("RGB"), dtype=int)
        white = int((np.abs(image - 255).sum(axis=2) < 30).sum())
        assert white < 0.97 * image.shape[0] * image.shape[1], f"{key}: blank"
