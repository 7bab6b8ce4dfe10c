"""Trace replay: production traffic with its own timing and lengths, spread over any number of workers.

    locust -f locustfiles/trace.py --host http://127.0.0.1:8000 --headless -u 256 -r 256 \
        --trace mooncake_trace.jsonl --trace-format mooncake --trace-speedup 2 --csv results/trace/locust

Each request of the trace is sent once, by one worker, at its time (divided by --trace-speedup): the master
assigns every worker its share of the trace's arrivals and hands them over when a worker joins or leaves. Users
(-u) only cap the requests in flight; a request that finds no free user leaves late, and summary.json's queue
delay says by how much. Prompts are built from the trace's hash_ids (Mooncake): requests sharing ids share a
byte-identical prefix, and summary.json's prefix_reuse gives the expected cache hits. Output lengths are the
trace's, enforced with --ignore-eos (on by default here) where the server family supports it. The run ends when
the whole trace (or its window: --trace-start-s, --trace-duration-s, --trace-max-requests) was sent and answered.
"""

from locust import events

from llm_locust.runtime.plugin import install
from llm_locust.runtime.users import ChatCompletionsUser

install(events)


@events.init_command_line_parser.add_listener
def _trace_defaults(parser, **_):
    """This locustfile replays a trace: output lengths enforced by default."""
    parser.set_defaults(ignore_eos=True)


class TraceUser(ChatCompletionsUser):
    """One slot for a request in flight; sends the trace's requests when they are due."""
