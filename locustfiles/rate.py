"""Open loop: requests arrive at a request rate, whatever the server's speed (vLLM's --request-rate).

    locust -f locustfiles/rate.py --host http://127.0.0.1:8000 --headless -u 256 -r 256 -t 5m \
        --request-rate 8 --arrival poisson --csv results/rate8/locust

The rate is the total over all workers (`--processes`, `--worker`); users (-u) only cap the
requests in flight. `--arrival constant` sends evenly spaced requests, `--arrival gamma
--burstiness 0.5` burstier ones. summary.json reports the achieved rate and the client queue
delay (how late requests left when every user was busy).
"""

from locust import events

from llm_locust.runtime.plugin import install
from llm_locust.runtime.users import ChatCompletionsUser

install(events)

DEFAULT_RATE_PER_S = 1.0


@events.init_command_line_parser.add_listener
def _default_rate(parser, **_):
    """This locustfile is open loop by default: 1 request/s unless --request-rate says otherwise."""
    parser.set_defaults(request_rate=DEFAULT_RATE_PER_S)


class ChatUser(ChatCompletionsUser):
    """One slot for a request in flight; sends when the arrival process says so."""
