"""What each user sends next: a request body built from the settings, and the prompt tokens it expects.

One `Workload` per user (its own seeded RNG): `next_request()` returns the next `RequestSpec`.
Prompts come from the dataset (`--dataset`; a multi-turn conversation is played turn by turn,
each turn carrying the history, by this one user: a session is never split or shared) or are synthetic
(`prompts.PromptMaker`, `--prompt-tokens`, behind a shared prefix of `prefix_pool.PrefixPool`: `--prefix-tokens`,
`--prefix-pool`, `--prefix-zipf`); synthetic requests are one-turn conversations unless `--session-turns` asks
for multi-turn sessions (`sessions.Session`: each turn sends the whole history — the answers as the server returned
them, `Workload.answered` — and a new user message of `--prompt-tokens`; `--think-time-s` before each later turn);
each conversation has its own session id, sent in `--session-header` when given; `max_tokens` comes from the dataset
entry or `--max-tokens`; the length fields from the API and the server family (`providers.length_fields`); images are
attached to the messages of an API that takes them (`Api.images`: chat); an agent's tools (`--tools`, `--tools-file`:
one tool set per session, `workload/tools.py`) go in the `tools` field of an API that takes them (`Api.tools`). The
user's API (`apis.Api`) shapes the prompt into its fields (`Api.shape`, its module's) and adds its fixed fields (a
streamed API's `stream`; chat and text completions also `stream_options.include_usage`) and `--extra-body`, merged
deep, as into every request's body (`body.request_body`, a scenario's call's too). A request of an API that counts
inputs (embeddings, rerank) carries `--embedding-batch` prompt texts instead (and a query, when it takes one).
With `--model-mix` each request names a model drawn by weight from the user's RNG (`model_mix`) and counts in the
`model` breakdown.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import replace
from functools import lru_cache
from itertools import count
from typing import Any

from llm_locust.apis import api, shapes
from llm_locust.metrics.record import RequestRecord
from llm_locust.metrics.request import RequestSpec
from llm_locust.metrics.scoring import Reference
from llm_locust.workload.agent import AgentSession, answer_content
from llm_locust.workload.body import request_body
from llm_locust.workload.datasets import REFERENCE, Conversation, load_dataset
from llm_locust.workload.input_images import file_data_url, generated_pool, image_part
from llm_locust.workload.lengths import StepLengths
from llm_locust.workload.model_mix import DIMENSION as MODEL_DIMENSION
from llm_locust.workload.prefix_blocks import BLOCK_TOKENS, BlockTexts, prompt_from_blocks
from llm_locust.workload.prefix_pool import PrefixPool
from llm_locust.workload.prompts import PromptMaker
from llm_locust.workload.providers import length_fields
from llm_locust.workload.sessions import Session
from llm_locust.workload.settings import WorkloadSettings
from llm_locust.workload.structured import answer_reference
from llm_locust.workload.tokens import token_counter
from llm_locust.workload.traces import Trace, TraceRequest

_user_numbers = count()
"""Numbers the users of this process: each `Workload` seeds its RNG with (--seed, worker, n), so that users differ
and a seeded run repeats (a counter per process, as the users are created one by one by Locust)."""


@lru_cache(maxsize=2)
def _block_texts(tokenizer: str, seed: int | None) -> BlockTexts:
    """The run's block texts, one per process (its cache is shared by the users)."""
    return BlockTexts(token_counter(tokenizer), seed)


def prefix_pool(settings: WorkloadSettings) -> PrefixPool | None:
    """A fresh pool of the run's shared prefixes (None without --prefix-tokens): one per process and test."""
    if settings.prefix_tokens <= 0:
        return None
    blocks = _block_texts(settings.tokenizer, settings.seed)
    return PrefixPool(blocks, settings.prefix_pool, settings.prefix_tokens, settings.prefix_zipf)


class Workload:
    """The request stream of one user; `endpoint` names its API (`apis.APIS`)."""

    def __init__(
        self,
        settings: WorkloadSettings,
        endpoint: str,
        worker_index: int = 0,
        trace: Trace | None = None,
        prefixes: PrefixPool | None = None,
        *,
        server_family: str,
        agent: bool = False,
    ) -> None:
        """`server_family`: the endpoint's (`transport.endpoint_settings.EndpointSettings`), which names the length
        fields; `agent`: the user plays agent sessions (`agent.AgentSession`)."""
        self.settings = settings
        self.server_family = server_family
        self.trace = trace
        self.endpoint = endpoint
        self.api = api(endpoint)
        seed = settings.seed
        self.rng = random.Random(None if seed is None else f"{seed}/{worker_index}/{next(_user_numbers)}")
        self.counter = token_counter(settings.tokenizer)
        self.dataset = load_dataset(settings.dataset, settings.dataset_format, seed) if settings.dataset else ()
        self._turns: Conversation = ()
        self._turn = 0
        self._user_id = uuid.UUID(int=self.rng.getrandbits(128)).hex[:12]
        self._sessions = count(1)
        self.session = ""
        self._mix_model = ""  # --model-mix: the model of the conversation being played
        self.multi_turn = str(settings.session_turns) != "1" or agent  # synthetic multi-turn sessions (--session-turns)
        self.agent_mode = agent
        self.agent: AgentSession | None = None  # the agent session being played (agent_mode)
        self.conversation: Session | None = None  # the synthetic session being played (multi_turn)
        self.turn = 0  # the 1-based turn of the request last built in a multi-turn session (0: not one)
        self._trace_next = -1  # a trace session's next turn (its index in trace.requests), -1: none
        self.prefixes = prefixes
        self.prompts = PromptMaker(self.counter, self.rng)
        if self.prompts.pool is not None:  # drawn with the first user, not on a request's way out
            self.prompts.pool.reserve(round(settings.prompt_tokens.mean))
        self.images = [file_data_url(path) for path in settings.image]
        self.image_pool = generated_pool(*settings.image_size, seed) if settings.image_size else ()
        self.tool_sets = settings.tool_sets
        self._tools: tuple[str, list[dict[str, Any]]] = ("", [])  # the session's tools, in this API's shape

    def next_request(self, model: str, step: StepLengths | None = None, index: int | None = None) -> RequestSpec:
        """The next request of this user for `model` (with `--model-mix`, for a model drawn by weight instead): with a
        trace, the request of the trace's arrival `index`, or the next turn of the trace's session this user is
        playing; else a sweep `step` that sets lengths sets them."""
        mix = self.settings.model_mix
        if mix:
            if not self._continues_session():  # a conversation talks to one model: drawn at its first request
                self._mix_model = mix.pick(self.rng)
            model = self._mix_model
        spec = self._next_spec(model, step, index)
        return replace(spec, groups=((MODEL_DIMENSION, model),)) if mix else spec

    def _continues_session(self) -> bool:
        """The next request is a later turn of the conversation this user is playing: a trace session's, an agent
        session's next step, a synthetic multi-turn session's or a dataset conversation's next turn."""
        if self._trace_next >= 0:
            return True
        if self.agent is not None:
            return self.agent.ready
        if self.conversation is not None:
            return not self.conversation.done
        return bool(self.dataset) and self._turn < len(self._turns)

    def _next_spec(self, model: str, step: StepLengths | None, index: int | None) -> RequestSpec:
        """The next request for `model`, see `next_request`."""
        trace = self.trace
        if trace is not None and (index is not None or self._trace_next >= 0):
            position = trace.arrivals[index] if self._trace_next < 0 else self._trace_next  # type: ignore[index]
            return self._trace_request(model, trace.requests[position])
        if not self.api.counts_outputs:
            return self._inputs_request(model, step.prompt_tokens if step is not None else None)
        agent = self.agent
        if agent is not None and agent.ready:
            fields, expected, blocks = self._agent_step(agent)
        else:
            fields, expected, blocks = self._next_fields(step.prompt_tokens if step is not None else None)
            if self.agent_mode:
                agent = self.agent = AgentSession(self.conversation, self.settings.max_agent_steps)  # type: ignore[arg-type]
        settings = self.settings
        reference = answer_reference(fields.get(REFERENCE), settings.response_format, settings.response_schema)
        body = self._body(fields, model, step.max_tokens if step is not None else None, reference)
        if self.api.images and (self.images or self.image_pool):
            _attach_images(body, self._images())
            expected = None  # image tokens are the server's business
        keep = (
            self.agent_mode or (self.conversation is not None and not self.conversation.done) or reference is not None
        )
        turn = 0 if self.agent_mode else self.turn  # an agent session is one user turn; its steps: "agent_step"
        data, content_type = self.api.encode_body(body)
        return RequestSpec(data, expected, blocks, self.session, turn=turn, keep_answer=keep, model=model,
                           reference=reference, content_type=content_type,
                           streamed=self.api.streams_body(body), input_s=self.api.input_s(body))  # fmt: skip

    @property
    def starts_session(self) -> bool:
        """The next request begins an agent session (what `--max-sessions` quotas count)."""
        return self.agent_mode and (self.agent is None or not self.agent.ready)

    def answered(self, record: RequestRecord) -> None:
        """The user has the answer to the request last built (`record`, finished, before it is reported — what it
        adds to the record is reported with it): an agent session's step is counted (`AgentSession.finished`: its
        "agent_step" breakdown, and on the session's last step the session's figures); in a synthetic multi-turn
        session its text as the server returned it (`answer_text`, kept when asked) joins the history; a failed turn
        ends the session (the next request starts a new one). A cancelled turn's history keeps the text that
        arrived."""
        if self.agent is not None:
            self.agent.finished(record)
            self._agent_answered(self.agent, record)
            return
        conversation = self.conversation
        if conversation is None or conversation.done or record.session != conversation.session_id:
            return
        if record.error_kind is not None or record.answer_text is None:
            self.conversation = None
            return
        conversation.answered(record.answer_text, self.counter.count(record.answer_text))

    def think_time_s(self) -> float:
        """Seconds to wait before the next request: a trace session's next turn's delay; `--think-time-s` drawn
        while a synthetic multi-turn session has turns left; in an agent session whose answer called tools, the
        tools' time (`--tool-latency-ms`, drawn); else 0."""
        if self._trace_next >= 0 and self.trace is not None:
            return self.trace.requests[self._trace_next].delay_s
        if self.agent is not None:
            return self.settings.tool_latency_ms.sample(self.rng) / 1e3 if self.agent.ready else 0.0
        conversation = self.conversation
        if conversation is None or conversation.done:
            return 0.0
        return self.settings.think_time_s.sample_s(self.rng)

    def _agent_answered(self, agent: AgentSession, record: RequestRecord) -> None:
        """An agent step's answer (`record`, seen by `agent.finished`): when the session goes on, its tool calls get
        their results (`--tool-result-tokens` each), and the answer and the results join the history in the API's
        form; when it ended, the next request starts a new session."""
        if not agent.pending:
            self.agent = self.conversation = None
            return
        content = answer_content(record)
        results, tokens = [], self.counter.count(content) if content else 0
        for call in agent.pending:
            text, counted = self.prompts.prompt(self.settings.tool_result_tokens.sample(self.rng))
            results.append(text)
            tokens += counted + self.counter.count(call.arguments)
        step = self.api.tools.step(content, agent.pending, results)  # type: ignore[union-attr]
        agent.send_back(step, tokens)

    def _agent_step(self, agent: AgentSession) -> tuple[dict[str, Any], int, tuple[int, int]]:
        """The fields of an agent session's next step: the whole history (the tool results last), its prompt tokens,
        and its whole blocks, of which those of the history up to the last answer seen before."""
        agent.ready = False
        expected = agent.conversation.history_tokens
        blocks = (expected // BLOCK_TOKENS, agent.seen_tokens // BLOCK_TOKENS)
        return {"messages": list(agent.conversation.messages)}, expected, blocks

    def _trace_request(self, model: str, request: TraceRequest) -> RequestSpec:
        """A trace's request: its prompt made of its blocks (`prefix_blocks`) at its length, its output length; in
        a session, its id and turn, and its session's next turn is this user's next request (`in_trace_session`)."""
        blocks = _block_texts(self.settings.tokenizer, self.settings.seed)
        text, tokens = prompt_from_blocks(blocks, request.hash_ids, request.input_tokens, self.rng)
        settings = self.settings
        reference = answer_reference(None, settings.response_format, settings.response_schema)
        body = self._body({"prompt": text}, model, request.output_tokens, reference)
        self._trace_next = request.next_turn
        self.turn = request.turn
        data, content_type = self.api.encode_body(body)
        return RequestSpec(data, tokens, (request.prefix_blocks, request.prefix_blocks_seen),
                           request.session, turn=request.turn, keep_answer=reference is not None, model=model,
                           reference=reference, content_type=content_type,
                           streamed=self.api.streams_body(body), input_s=self.api.input_s(body))  # fmt: skip

    @property
    def in_trace_session(self) -> bool:
        """The last request was a turn of a trace's session that has a next turn: this user sends it (after the
        answer and its delay, `think_time_s`), without a ticket of the arrival sequence."""
        return self._trace_next >= 0

    def _inputs_request(self, model: str, prompt_tokens: int | None) -> RequestSpec:
        """The next request of an API that counts inputs (embeddings, rerank): `--embedding-batch` prompt texts (a
        dataset entry's messages joined), after one more as their `query` for an API that takes one (`Api.query`: its
        prompt tokens not expected, as a server counts the query with each document), shaped by the API."""
        texts: list[str] = []
        expected: int | None = None if self.api.query else 0
        for _ in range(self.settings.embedding_batch + self.api.query):
            fields, tokens, _ = self._next_fields(prompt_tokens)
            texts.append(fields["prompt"] if "prompt" in fields else shapes.joined(fields["messages"]))
            expected = None if tokens is None or expected is None else expected + tokens
        shaped: dict[str, Any] = {"query": texts.pop(0), "texts": texts} if self.api.query else {"texts": texts}
        self.api.shape(shaped)
        body = request_body(self.api, shaped, model, self.settings.extra_body)
        data, content_type = self.api.encode_body(body)
        return RequestSpec(data, expected, session=self.session, inputs=len(texts), model=model,
                           content_type=content_type, streamed=self.api.streams_body(body),
                           input_s=self.api.input_s(body))  # fmt: skip

    def _next_fields(self, prompt_tokens: int | None) -> tuple[dict[str, Any], int | None, tuple[int, int]]:
        """Body fields with the prompt (or messages) of `prompt_tokens` tokens (None: drawn from --prompt-tokens), the
        expected prompt tokens, and the shared prefix blocks (whole, seen before); starts a new session with each
        conversation (each one-turn synthetic request, each synthetic multi-turn session)."""
        if not self.dataset:
            tokens = prompt_tokens or self.settings.prompt_tokens.sample(self.rng)
            conversation = self.conversation
            if self.multi_turn and conversation is not None and not conversation.done:
                return self._session_turn(conversation, *self.prompts.prompt(tokens), (0, 0))
            self.session = f"{self._user_id}-{next(self._sessions)}"
            prefix, prefix_tokens, blocks = self.prefixes.draw(self.rng, tokens) if self.prefixes else ("", 0, (0, 0))
            text, counted = self.prompts.prompt(tokens, prefix, prefix_tokens)
            if not self.multi_turn:
                return {"prompt": text}, counted, blocks
            self.conversation = Session(self.session, self.settings.session_turns.sample(self.rng))
            return self._session_turn(self.conversation, text, counted, blocks)
        if self._turn >= len(self._turns):
            self._turns, self._turn = self.rng.choice(self.dataset), 0
            self.session = f"{self._user_id}-{next(self._sessions)}"
        fields = self._turns[self._turn]
        self._turn += 1
        self.turn = self._turn if len(self._turns) > 1 else 0
        expected = None
        if self.settings.tokenizer:
            texts = [m["content"] for m in fields["messages"]] if "messages" in fields else [fields["prompt"]]
            expected = sum(self.counter.count(t) for t in texts if isinstance(t, str))
        return fields, expected, (0, 0)

    def _session_turn(
        self, conversation: Session, text: str, tokens: int, pool_blocks: tuple[int, int]
    ) -> tuple[dict[str, Any], int, tuple[int, int]]:
        """The fields of the next turn of `conversation`, whose new user message is `text` (`tokens` tokens): the
        whole history and it, the prompt tokens they count, and their whole blocks, of which seen before — the
        history's, or on a first turn the shared prefix's (`pool_blocks`, drawn from the pool)."""
        messages, expected, seen = conversation.ask(text, tokens)
        self.turn = conversation.turn
        return {"messages": messages}, expected, (expected // BLOCK_TOKENS, max(seen, pool_blocks[1]))

    def _body(
        self, fields: dict[str, Any], model: str, max_tokens: int | None, reference: Reference | None = None
    ) -> dict[str, Any]:
        """The full request body for `fields` (prompt or messages, maybe more), in this endpoint's shape; `max_tokens`
        (a length sweep's) wins over the dataset entry's, which wins over --max-tokens; with --response-format, the
        API's structured-output fields for the schema of `reference` (`structured.answer_reference`); --temperature
        in the API's field beside its length (a dataset entry's own wins); then the model, --extra-body and the API's
        fixed fields, as every request's (`body.request_body`)."""
        settings = self.settings
        body = dict(fields)
        body.pop(REFERENCE, None)
        max_tokens = max_tokens or body.pop("max_tokens", None) or settings.max_tokens.sample(self.rng)
        body.pop("max_tokens", None)
        self.api.shape(body)
        body.update(length_fields(self.server_family, self.endpoint, max_tokens, settings.ignore_eos))
        if settings.temperature is not None and self.api.max_tokens_field:  # an API that generates
            outer, nested, _ = self.api.max_tokens_field.partition(".")  # beside its length: generationConfig
            if nested:
                body[outer] = {"temperature": settings.temperature, **body.get(outer, {})}
            else:
                body.setdefault("temperature", settings.temperature)  # a dataset entry's own wins
        if self.tool_sets:
            body["tools"] = self._session_tools()
        if settings.response_format and reference is not None and reference.schema is not None:
            body.update(self.api.response_format(settings.response_format, reference.schema, self.server_family))  # type: ignore[misc]
        return request_body(self.api, body, model, settings.extra_body)

    def _session_tools(self) -> list[dict[str, Any]]:
        """The current session's tools in this API's shape: one of the tool sets, drawn when the session began."""
        if self._tools[0] != self.session or not self.session:
            self._tools = (self.session, self.api.tools.schemas(self.rng.choice(self.tool_sets)))  # type: ignore[union-attr]
        return self._tools[1]

    def _images(self) -> list[str]:
        """Data URLs to attach to this request: the --image files, then one generated image."""
        return self.images + ([self.rng.choice(self.image_pool)] if self.image_pool else [])


def _attach_images(body: dict[str, Any], urls: list[str]) -> None:
    """Add the images to the last user message of a chat body (as content parts)."""
    messages = body["messages"] = list(body["messages"])
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            content = messages[index].get("content")
            parts = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
            messages[index] = {**messages[index], "content": [*parts, *(image_part(url) for url in urls)]}
            return
