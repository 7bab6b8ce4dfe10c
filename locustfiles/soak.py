"""Soak: hours of steady streamed chat load, with drift windows and gates sized for long runs.

    locust -f locustfiles/soak.py --host http://my-vllm:8000 --model NAME \
        --headless -u 64 -r 4 --run-time 4h --csv results/soak/locust \
        --max-error-rate 0.01 --max-drift-pct 20 --slo ttft_p99_ms=3000

The same user as locustfiles/chat.py (workers may run either file); only the defaults change (any can be overridden):
one LLM time-series row per 30 s (480 rows in 4 h), drift compares the first 15 minutes after a
5-minute warm-up with the last 15 minutes. Memory stays flat for any length: metrics are
histograms per window, written and dropped as the run goes; per-process CPU/RSS go to
workers_timeseries.csv. Exit code 3 when a gate fails (verdict in summary.json).
"""

from typing import Any

from locust import events

from llm_locust.runtime.plugin import install
from llm_locust.runtime.users import ChatCompletionsUser

install(events)

SOAK_DEFAULTS = {"interval_s": 30.0, "drift_window_s": 900.0, "drift_warmup_s": 300.0}


@events.init_command_line_parser.add_listener
def _soak_defaults(parser: Any) -> None:
    """Defaults for hours-long runs (registered after llm-locust's options, so they apply)."""
    parser.set_defaults(**SOAK_DEFAULTS)


class ChatUser(ChatCompletionsUser):
    """The user of locustfiles/chat.py, same name: workers started with chat.py serve a soak master."""
