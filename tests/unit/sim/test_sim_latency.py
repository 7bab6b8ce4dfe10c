"""The simulator's TTFT distributions (sim/latency.py, `--ttft-ms DIST`): parsed or refused in one line, drawn from
a seeded generator per request, with the quantiles they state."""

from __future__ import annotations

import argparse
import random
import statistics

import pytest

from llm_locust.sim import arguments
from llm_locust.sim.engine import FixedTiming, Sequence
from llm_locust.sim.latency import Latency, parse_latency


def test_constant_lognormal_and_uniform_parse() -> None:
    assert parse_latency("50") == Latency("fixed", 50.0)
    assert parse_latency("lognormal:median=50,sigma=0.5") == Latency("lognormal", 50.0, 0.5)
    assert parse_latency("lognormal:sigma=0.5,median=50") == Latency("lognormal", 50.0, 0.5)
    assert parse_latency("uniform:20,80") == Latency("uniform", 20.0, 80.0)
    for text in ("50", "lognormal:median=50,sigma=0.5", "uniform:20,80"):
        assert str(parse_latency(text)) == text


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("fast", "'fast' is not a number"),
        ("-1", "must be >= 0"),
        ("lognormal:median=50", "expected lognormal:median=MS,sigma=S"),
        ("lognormal:median=0,sigma=1", "median must be > 0"),
        ("uniform:80,20", "0 <= LOW <= HIGH"),
        ("uniform:1", "expected uniform:LOW,HIGH"),
        ("gamma:1,2", "expected MS or one of lognormal:..., uniform:..."),
        ("uniform:1,inf", "not a finite number"),
    ],
)
def test_bad_distributions_are_refused_naming_the_problem(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says.replace(".", r"\.").replace("(", r"\(")):
        parse_latency(text)


def test_the_sim_command_line_takes_a_distribution_or_refuses_it_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = argparse.ArgumentParser(prog="llm-locust")
    arguments.add_arguments(parser.add_subparsers())
    args = parser.parse_args(["sim", "--ttft-ms", "uniform:20,80", "--ttft-seed", "3"])
    config = arguments.config_from_args(args)
    assert (config.ttft_ms, config.ttft_seed) == (Latency("uniform", 20.0, 80.0), 3)
    assert arguments.config_from_args(parser.parse_args(["sim", "--ttft-ms", "50"])).ttft_ms == Latency("fixed", 50.0)
    with pytest.raises(SystemExit):
        parser.parse_args(["sim", "--ttft-ms", "uniform:80,20"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith("argument --ttft-ms: 'uniform:80,20': expected 0 <= LOW <= HIGH (ms)"), err


@pytest.mark.parametrize("text", ["lognormal:median=50,sigma=0.5", "uniform:20,80"])
def test_draws_follow_the_stated_quantiles(text: str) -> None:
    latency = parse_latency(text)
    rng = random.Random(1)
    draws = sorted(latency.draw_ms(rng) for _ in range(40_000))
    for q in (0.1, 0.5, 0.9, 0.99):
        empirical = draws[int(q * len(draws))]
        assert empirical == pytest.approx(latency.quantile_ms(q), rel=0.03), q
    assert statistics.median(draws) == pytest.approx(latency.quantile_ms(0.5), rel=0.02)


def test_the_fixed_model_draws_one_ttft_per_request_in_order_from_its_seed() -> None:
    latency = parse_latency("lognormal:median=50,sigma=0.5")

    def ttfts(seed: int) -> list[float]:
        timing = FixedTiming(latency, itl_s=0.01, seed=seed)
        seqs = [Sequence(prompt_tokens=1, output_tokens=2, t_recv_s=100.0) for _ in range(5)]
        for seq in seqs:
            timing.start(seq)
        assert all(timing.due_s(seq, 1) == pytest.approx(100.0 + seq.ttft_s + 0.01) for seq in seqs)
        return [seq.ttft_s for seq in seqs]

    rng = random.Random("7/ttft")
    assert ttfts(7) == [latency.draw_ms(rng) / 1e3 for _ in range(5)]
    assert ttfts(7) != ttfts(8) and len(set(ttfts(7))) == 5


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ((), None),
        (("--replicas", "0"), "--replicas must be at least 1, got 0"),
        (("--accuracy", "1.5"), "--accuracy must be a probability in [0, 1], got 1.5"),
        (("--max-loras", "-1"), "--max-loras and --lora-load-ms must be >= 0, got -1 and 0.0"),
        (("--warmup-drift-s", "-2"), "--warmup-drift-s must be >= 0, got -2.0"),
    ],
)
def test_a_config_names_its_first_problem(args, problem):
    """The simulator's option checks are one pure function: the first problem as one line naming its option."""
    parser = argparse.ArgumentParser()
    arguments.add_arguments(parser.add_subparsers())
    found = arguments.config_problem(arguments.config_from_args(parser.parse_args(["sim", *args])))
    assert found == problem
