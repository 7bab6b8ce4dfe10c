"""An agent whose tools are real Python functions, run between its steps (docs/scenarios.md).

    locust -f locustfiles/scenarios/agent_tools.py --host http://127.0.0.1:8000 --headless -u 4 -t 1m

Each step offers the tools; while the answer calls them (at most 4 steps), the functions run here and their results
go back with the history. The whole agent run is one arrival (`--request-rate`).
"""

import json

from locust import events, task

from llm_locust.plugin import install
from llm_locust.users import LLMUser

install(events)

CAPITALS = {"france": "Paris", "japan": "Tokyo", "peru": "Lima"}


def add(a: float, b: float) -> float:
    """The calculator."""
    return a + b


def lookup(country: str) -> str:
    """The lookup table: a country's capital, by its first word."""
    return CAPITALS.get(country.split()[0].lower() if country.split() else "", "unknown")


FUNCTIONS = {"add": add, "lookup": lookup}
TOOLS = [
    {"type": "function", "function": {"name": "add", "description": "Add two numbers", "parameters": {
        "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}},
    {"type": "function", "function": {"name": "lookup", "description": "The capital of a country", "parameters": {
        "type": "object", "properties": {"country": {"type": "string"}}, "required": ["country"]}}},
]  # fmt: skip
MAX_STEPS = 4


class AgentUser(LLMUser):
    @task
    def solve(self):
        messages = [{"role": "user", "content": "What is 2 + 3, and the capital of Peru?"}]
        for step in range(1, MAX_STEPS + 1):
            answer = self.llm.chat.completions.create(
                messages=messages, tools=TOOLS, max_tokens=64, name=f"step {step}"
            )
            if not answer.ok or not answer.tool_calls:
                return
            calls = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                }
                for call in answer.tool_calls
            ]
            messages.append({"role": "assistant", "content": answer.text or None, "tool_calls": calls})
            for call in answer.tool_calls:
                result = FUNCTIONS[call.name](**call.arguments)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": str(result)})
