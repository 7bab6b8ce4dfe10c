"""A sweep: steps of concurrency, of request rate, or of prompt/output length (or a grid of both), one point each.

    # concurrency sweep: 1, 2, 4, ... users, 60 s per step, the first 10 s of each left out
    locust -f locustfiles/sweep.py --host http://127.0.0.1:8000 --headless \
        --sweep-users 1,2,4,8,16,32 --step-duration-s 60 --warmup-s 10 --csv results/sweep/locust

    # request-rate sweep (Poisson arrivals), at most 256 requests in flight
    locust -f locustfiles/sweep.py --host http://127.0.0.1:8000 --headless \
        --sweep-rates 1,2,4,8 --max-concurrency 256 --step-duration-s 60 --csv results/rate-sweep/locust

    # TTFT against the prompt: 5 prompt lengths x 4 concurrencies, each length's load sweep in turn
    locust -f locustfiles/sweep.py --host http://127.0.0.1:8000 --headless \
        --sweep-prompt-tokens 8,128,512,1024,2048 --sweep-users 1,8,32,80 --step-duration-s 60 --warmup-s 10

summary.json has one entry per step under "steps"; `llm-locust report` draws one point per step.
"""

from locust import events

from llm_locust.runtime.plugin import install
from llm_locust.runtime.shape import SweepShape
from llm_locust.runtime.users import ChatCompletionsUser

install(events)


class ChatUser(ChatCompletionsUser):
    """One simulated client sending streamed chat completions."""


class Sweep(SweepShape):
    """The steps given by --sweep-users / --sweep-rates and --sweep-prompt-tokens / --sweep-max-tokens."""
