"""A support chat: two weighted intents, a check on the answer, a follow-up only when the check asks for one.

    locust -f locustfiles/scenarios/support_chat.py --host http://127.0.0.1:8000 --headless -u 8 -t 1m

A refund answer must give an amount (a number word): when it does not, the check fails it (`check` in the
failures) and the user asks once more. Outage questions are a third as frequent and are not checked.
Against the simulator, whose words are random, most refund answers name no amount: those checks fail by design,
so the verdict reads FAILED at the default --max-error-rate 0.01; add --max-error-rate 1 to judge latency only.
"""

from locust import between, events, task

from llm_locust.plugin import install
from llm_locust.users import LLMUser

install(events)

NUMBERS = {"one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "hundred", "thousand"}


def gives_amount(text: str) -> bool:
    """True when `text` names an amount."""
    return bool(NUMBERS & set(text.lower().split()))


class SupportUser(LLMUser):
    wait_time = between(0.0, 0.05)

    def on_start(self):
        self.history = [{"role": "system", "content": "You are the support desk of a small shop."}]

    @task(3)
    def refund(self):
        messages = [*self.history, {"role": "user", "content": "How much will my refund be?"}]
        with self.llm.chat.completions.create(
            messages=messages, max_tokens=24, name="refund", catch_response=True
        ) as answer:
            needs_follow_up = answer.ok and not gives_amount(answer.text)
            if needs_follow_up:
                answer.failure("the answer names no amount")
        if needs_follow_up:
            messages += [
                {"role": "assistant", "content": answer.text},
                {"role": "user", "content": "How much exactly?"},
            ]
            self.llm.chat.completions.create(messages=messages, max_tokens=24, name="refund follow-up")

    @task(1)
    def outage(self):
        self.llm.chat.completions.create(
            messages=[*self.history, {"role": "user", "content": "Is the site down?"}], max_tokens=24, name="outage"
        )
