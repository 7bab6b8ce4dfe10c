"""Energy and cost per token (`results.efficiency`): the power integral, the per-token ratios, the price arithmetic,
their settings and their lines in the console table. Pure."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import options
from pytest import approx

from llm_locust.config.settings import Settings
from llm_locust.errors import ConfigError
from llm_locust.results.console import efficiency_lines
from llm_locust.results.efficiency import cost, energy, energy_j

T0 = 1_700_000_000.0


def test_constant_power_integrates_to_power_times_time():
    samples = tuple((T0 + i, 300.0) for i in range(11))
    assert energy_j(samples, T0, T0 + 10) == approx(3000.0)
    assert energy_j(samples, T0 + 2.5, T0 + 7.25) == approx(300.0 * 4.75)


def test_a_linear_ramp_is_exact_and_the_window_cuts_between_scrapes():
    """The trapezoid is exact on a line, also when the window starts and ends between two scrapes."""
    samples = tuple((T0 + t, 100.0 + 20.0 * t) for t in (0, 2, 4, 6))  # P(t) = 100 + 20 t W
    exact = lambda a, b: 100 * (b - a) + 10 * (b * b - a * a)  # noqa: E731
    assert energy_j(samples, T0, T0 + 6) == approx(exact(0, 6))
    assert energy_j(samples, T0 + 1.3, T0 + 4.9) == approx(exact(1.3, 4.9))
    assert energy_j(samples, T0 + 0.5, T0 + 1.5) == approx(exact(0.5, 1.5))  # no scrape inside the window


def test_power_is_held_outside_the_scrapes_and_samples_may_come_in_any_order():
    samples = ((T0 + 2, 200.0), (T0 + 1, 100.0))
    assert energy_j(samples, T0, T0 + 3) == approx(100.0 + 150.0 + 200.0)
    assert energy_j(samples, T0 + 5, T0 + 6) == approx(200.0)
    assert energy_j(((T0, 50.0),), T0 - 1, T0 + 1) == approx(100.0)  # one scrape: constant
    assert energy_j(samples, T0 + 3, T0 + 3) == 0.0
    assert energy_j((), T0, T0 + 1) is None


def test_a_power_step_costs_at_most_half_an_interval_of_the_jump():
    """The documented precision: a jump of dP W between two scrapes h s apart is off by at most h x dP / 2 J."""
    rng = np.random.default_rng(7)
    low_w, high_w, interval_s = 100.0, 500.0, 0.5
    for _ in range(50):
        jump_s = float(rng.uniform(1, 9))
        times = np.arange(0, 10.001, interval_s) + float(rng.uniform(0, interval_s))
        samples = tuple((T0 + t, high_w if t >= jump_s else low_w) for t in times)
        truth = low_w * jump_s + high_w * (10 - jump_s)
        assert abs(energy_j(samples, T0, T0 + 10) - truth) <= interval_s * (high_w - low_w) / 2 + 1e-6


def test_energy_adds_the_urls_and_divides_by_the_window_tokens_and_requests():
    gpus_a = tuple((T0 + t, 700.0) for t in range(5))
    gpus_b = tuple((T0 + t + 0.3, 300.0) for t in range(5))
    entry = energy((gpus_a, gpus_b), T0, T0 + 4, output_tokens=8000, requests_ok=40)
    assert entry == {"joules_per_output_token": approx(0.5), "joules_per_request": approx(100.0),
                     "mean_power_w": approx(1000.0), "joules": approx(4000.0)}  # fmt: skip
    empty = energy((gpus_a,), T0, T0 + 4, output_tokens=0, requests_ok=0)
    assert empty is not None and empty["joules_per_output_token"] is None and empty["joules_per_request"] is None
    assert energy((), T0, T0 + 4, 10, 1) is None


def test_cost_per_million_tokens_is_the_price_of_the_window_over_its_tokens():
    entry = cost(usd_per_hour=3.6, duration_s=100.0, output_tokens=50_000, input_tokens=200_000)
    # 3.6 $/h x 100 s = 0.1 $; 0.1 $ / 50 000 tokens x 1e6 = 2 $ per million
    assert entry == {"usd_per_hour": 3.6, "usd_per_million_output_tokens": approx(2.0),
                     "usd_per_million_input_tokens": approx(0.5), "usd": approx(0.1)}  # fmt: skip
    unsold = cost(2.0, 10.0, 0, 0)
    assert unsold == {"usd_per_hour": 2.0, "usd_per_million_output_tokens": None,
                      "usd_per_million_input_tokens": None, "usd": approx(2.0 * 10 / 3600, rel=1e-5)}  # fmt: skip
    assert cost(0.0, 10.0, 10, 10) is None


def test_cost_per_hour_is_validated_by_the_output_settings():
    assert Settings.from_options(options("--cost-per-hour", "2.5")).output.cost_per_hour == 2.5
    assert Settings.from_options(options()).output.cost_per_hour == 0.0
    for bad in ("-1", "nan", "inf"):
        with pytest.raises(ConfigError, match=re.escape("--cost-per-hour must be a price in US dollars per hour")):
            Settings.from_options(options("--cost-per-hour", bad))


def test_console_lines_say_what_was_measured_only():
    summary = {
        "energy": {"joules_per_output_token": 0.52, "joules_per_request": 104.0, "mean_power_w": 770.0},
        "cost": {"usd_per_hour": 2.5, "usd_per_million_output_tokens": 1.25, "usd_per_million_input_tokens": None},
    }
    assert efficiency_lines(summary) == [
        "Energy (DCGM power): 0.52 J/output token, 104.00 J/request, mean 770.00 W",
        "Cost at $2.5/h: $1.25 per million output tokens, $- per million input tokens",
    ]
    assert efficiency_lines({"energy": None, "cost": None}) == []
