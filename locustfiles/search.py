"""Capacity search: the highest request rate at which every SLO holds and few requests fail.

    # trials of 30 s (5 s warm-up): bracket from 100/8 = 12.5 req/s, then bisect to within 5 %
    locust -f locustfiles/search.py --host http://127.0.0.1:8000 --headless \
        --search-max-rate 100 --slo ttft_p90_ms=500,tpot_p90_ms=50 --max-error-rate 0.01 \
        --step-duration-s 30 --warmup-s 5 --csv results/search/locust

Each trial is an open-loop step (Poisson arrivals, at most --max-concurrency in flight); the console ends with the
answer in one line, summary.json holds it under "search" with every trial, and `llm-locust report` shows the trials.
"""

from locust import events

from llm_locust.runtime.plugin import install
from llm_locust.runtime.search_shape import SearchShape
from llm_locust.runtime.users import ChatCompletionsUser

install(events)


class ChatUser(ChatCompletionsUser):
    """One simulated client sending streamed chat completions."""


class Search(SearchShape):
    """The trials of --search-max-rate's search."""
