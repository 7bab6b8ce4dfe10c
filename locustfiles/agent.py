"""Agent sessions with tool calls: a user prompt, then one request per step while the model calls tools.

    locust -f locustfiles/agent.py --host http://127.0.0.1:8000 --model NAME --tools 8 \
        --tool-latency-ms lognormal:300,200 --tool-result-tokens 256 --max-agent-steps 8 \
        --headless -u 16 -r 4 --run-time 5m --max-sessions 500

Each request carries the tools (`--tools N` synthetic function schemas, or `--tools-file` with BFCL entries); an
answer with tool calls is followed, after `--tool-latency-ms`, by the next step carrying the whole history: the
assistant's calls and a `--tool-result-tokens` result per call. The session ends when an answer has no tool call, at
`--max-agent-steps`, or when a step fails. Per step: TTFT, time to the complete tool call (`tool_call_ms`), the
"agent_step" breakdown; per session: steps, tool calls, duration, time waiting for the model and in tools
(docs/workloads.md "Agent sessions"). For the Responses or Messages API, subclass `ResponsesAgentUser` or
`MessagesAgentUser` instead.
"""

from locust import events

from llm_locust.runtime.plugin import install
from llm_locust.runtime.users import ChatAgentUser

install(events)


class AgentUser(ChatAgentUser):
    """One simulated agent playing sessions back to back over chat completions."""
