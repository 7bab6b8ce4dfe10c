"""Load-test the Realtime API over WebSocket (GET /v1/realtime?model=..., upgraded): sessions of text turns, each turn
measured as one request — time to first delta after `response.create` (TTFT), the gaps between deltas (ITL) and the
turn's latency to `response.done` (E2E), broken down by turn.

    locust -f locustfiles/realtime.py --host http://127.0.0.1:8000 --model NAME \
        --headless -u 16 -r 4 --run-time 2m

Each user plays one session after another on its own socket (`wss://` for an https host): `turns` turns of a short
question, each answered in full before the next, in text (`output_modalities`, asked with `session.update`; OpenAI's
default is audio). Subclass `RealtimeSessionUser` to change `turns`, the questions, or to have the answers spoken
(`output_modalities = ["audio"]`: each audio delta an output, their seconds the run's audio seconds produced).
"""

from locust import events, task

from llm_locust.plugin import install
from llm_locust.users import LLMUser

install(events)


class RealtimeSessionUser(LLMUser):
    """One simulated client playing realtime sessions back to back."""

    turns = 4
    question = "Question {turn}: name a river, a mountain and a city near both."
    output_modalities = ["text"]

    @task
    def session(self) -> None:
        with self.llm.realtime.connect() as session:
            session.update(output_modalities=self.output_modalities)
            for turn in range(1, self.turns + 1):
                session.turn(text=self.question.format(turn=turn))
