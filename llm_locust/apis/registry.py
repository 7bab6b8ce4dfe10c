"""The registry of the APIs llm-locust measures: one `Api` per endpoint, registered in `APIS` under the endpoint name
that every record carries (`RequestRecord.endpoint`) and every User class names (`runtime.users`).

An `Api` says everything that differs between APIs: its path per provider, how a prompt becomes its body (`shape`)
and its length fields, the option combinations it refuses, whether it streams — its event parser and event text
(`--tokenizer`) — or else its JSON body reader, what the summary counts (`Counting`: output tokens, or inputs) with
the words the console, live view and report show for it, the name it is mounted under on the scenario client
(`mount`) and its built-in User classes' names (`user`, `agent_user`). The workload (`builder`, `providers`), the
transport (`client`), the users and the scenario client, summary.json (`run.endpoints`, `run.counts`), the live view
and the report read it; nothing else branches on an endpoint's name. Each built-in API is one module of this package
that declares its `API` (`apis/__init__.py` registers them). Imports only `metrics` below it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from llm_locust.apis import bodies, shapes
from llm_locust.errors import ConfigError
from llm_locust.metrics.framing import SSE, Framing
from llm_locust.metrics.protocol import EventApplier
from llm_locust.metrics.record import RequestRecord
from llm_locust.metrics.stream_text import AnswerParts, EventText

BodyEncoder = Callable[[dict[str, Any]], tuple[bytes, str]]
"""How an API's body goes on the wire (`Api.encode_body`): its fields → (the request's bytes, its Content-Type)."""
BodyReader = Callable[[bytes, RequestRecord, int], None]
"""A non-streamed API's reader of its whole JSON response body (content, the record, the inputs sent): fills the
record, or fails it (`ErrorKind.BAD_STREAM`) when the body is not what the API answers."""


@dataclass(frozen=True)
class Rate:
    """A throughput the displays show: its summary.json `throughput` key (and llm_timeseries.csv column), its unit
    in the console table and the report ("output tok/s"), its row label in the web UI's LLM tab."""

    key: str
    unit: str
    label: str
    digits: int = 1  # decimals in the console (the web UI shows at least 2)


@dataclass(frozen=True)
class Counting:
    """What a run's throughput counts, as summary.json's `run.counts` names it, and how the displays show it: its
    rates, and the latencies shown as (declared name, label) — None: every latency of the time series. An API module
    may declare its own (rerank's documents: `inputs_per_s` shown as "documents/s"); `register` adds it to
    `COUNTINGS`."""

    name: str
    rates: tuple[Rate, ...]
    latencies: tuple[tuple[str, str], ...] | None


OUTPUTS = Counting("output_tokens", (Rate("output_tokens_per_s", "output tok/s", "Output tokens/s"),), None)
"""A generating API: output tokens per second, every latency."""
INPUTS = Counting(
    "inputs",
    (Rate("inputs_per_s", "inputs/s", "Inputs/s"), Rate("input_tokens_per_s", "input tok/s", "Input tokens/s")),
    (("e2e", "Latency"),),
)
"""An API that answers each input at once (embeddings): inputs and their tokens per second; its latency is E2E."""
COUNTINGS = {counting.name: counting for counting in (OUTPUTS, INPUTS)}
"""Every counting a registered API declares, by name (summary.json's `run.counts`)."""


def _frozen(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class Api:
    """One API: what differs in building its requests, sending them and reading their responses.

    `paths`: provider (`--provider`) → the path (and query) to POST to, `{deployment}` and `{api_version}` filled in
    URL-quoted (`openai_paths` makes the usual ones), `{project}` and `{location}` (Vertex AI), `{model}` per request
    with the request's model; a provider missing here does not serve the API (`check_api` refuses it). `shape` makes
    the body's prompt fields (its module's); the model goes in the body's `model_field` ("": only in the path);
    `fixed_fields` go into every body (after the model); the output length goes in `max_tokens_field` (per server
    family: `family_max_tokens_fields`; a dotted name is a nested field, "generationConfig.maxOutputTokens",
    "inferenceConfig.maxTokens"; "" for an API without one); `forces_length` False: no field forces the output length,
    `--ignore-eos` is refused. Streamed: `parser` (one event of its `framing` → record: an SSE event's data, an
    event-stream message), `event_text` and `answer_parts` (the answer's own text and reasoning, for a scenario's
    answer); else `read_body` — or both, for an API answering each request as its body asks (`streams_body`).
    `counting`: what its summary counts (`OUTPUTS`; `INPUTS`, or an API's own `Counting`
    of them: a request carries `--embedding-batch` texts, in its body's `inputs_field` as its shape puts them — a
    scenario's call counts that list); `query`: its request carries one more prompt text, drawn as the inputs are, as
    the query they are ranked against (rerank, score). `sdk_method` (e.g. "chat.completions"),
    with the body fields it takes as arguments: the openai SDK sends it too (`--client openai-sdk`); `images`:
    `--image` / `--image-size` attach images to its messages; `tools`: it takes function schemas (`--tools`,
    `--tools-file`, `workload/tools.py`) and an agent step's calls and results in its own forms (None: it takes none);
    `response_format`: its structured-output fields (`--response-format`, `shapes.ResponseFormat`; None: it takes none).
    `mount`: where a scenario calls it on `self.llm`, a dotted attribute path ending in the call's name (default
    `<endpoint>.create`; "chat.completions.create", as its SDK names it); `user`: the name of its built-in User class
    (`runtime.users` makes it; "": none), `agent_user`: that of its User class playing agent sessions ("": none).
    `input_seconds`: the seconds of media a request's body carries (speech to text: its audio's duration, for the
    audio seconds transcribed per second and the real-time factor); None: none. `encode_body`: how its body goes on
    the wire (`bodies.json_body`, or `bodies.multipart_body`: multipart/form-data,
    a file upload's). `turn`: an API spoken over a WebSocket (the Realtime API) — a turn's fields (a scenario's keyword
    arguments) → the client events that ask for one answer, the last one asking for it; its events are read by `parser`
    (each a text message's bytes), its mount opens a session (default `<endpoint>.connect`: `runtime.socket_session`),
    and it has no built-in User class of the registry's (`user` ""): a locustfile plays its sessions. `pace`: the
    seconds of media (audio) one of its client events carries — a turn's events are then sent at real-time pace, each
    once its media has been "recorded" (as from a microphone), and the turn's `input_s` is their sum; None: at once.
    """

    endpoint: str
    title: str  # how a refusal names it: "chat completions", "the Messages API"
    paths: Mapping[str, str]
    shape: Callable[[dict[str, Any]], None]
    fixed_fields: Mapping[str, Any] = field(default_factory=dict)
    max_tokens_field: str = "max_tokens"
    family_max_tokens_fields: Mapping[str, str] = field(default_factory=dict)
    forces_length: bool = True
    parser: EventApplier | Callable[..., bool] | None = None
    framing: Framing = SSE
    model_field: str = "model"
    event_text: EventText | None = None
    answer_parts: AnswerParts | None = None
    read_body: BodyReader | None = None
    counting: Counting = OUTPUTS
    inputs_field: str = "input"
    query: bool = False
    sdk_method: str = ""
    sdk_arguments: tuple[str, ...] = ()
    images: bool = False
    tools: shapes.ToolForms | None = None
    response_format: shapes.ResponseFormat | None = None
    mount: str = ""
    user: str = ""
    agent_user: str = ""
    input_seconds: Callable[[Mapping[str, Any]], float] | None = None
    encode_body: BodyEncoder = bodies.json_body
    turn: Callable[[dict[str, Any]], list[dict[str, Any]]] | None = None
    pace: Callable[[dict[str, Any]], float] | None = None

    def __post_init__(self) -> None:
        if self.parser is None and self.read_body is None:
            raise ValueError(f"API {self.endpoint!r}: give either a stream parser or a body reader (or both)")
        if not self.mount:
            object.__setattr__(self, "mount", f"{self.endpoint}.{'create' if self.turn is None else 'connect'}")
        for name in ("paths", "fixed_fields", "family_max_tokens_fields"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))

    @property
    def streams(self) -> bool:
        """Its responses are streams (SSE or event-stream, its `framing`, read by `parser`); else one JSON body (read by
        `read_body`). An API with both answers each request as its body asks (`streams_body`)."""
        return self.parser is not None

    def input_s(self, body: Mapping[str, Any]) -> float:
        """The seconds of media (audio) a request of `body` carries, as its `input_seconds` reads them (0.0: none)."""
        return 0.0 if self.input_seconds is None else self.input_seconds(body)

    def streams_body(self, body: Mapping[str, Any]) -> bool:
        """A request of `body` is answered by a stream: always for an API with only a parser; for one that answers
        both ways (a parser and a body reader: image generation), when the body asks for one (`"stream": true`)."""
        return self.parser is not None and (self.read_body is None or body.get("stream") is True)

    @property
    def counts_outputs(self) -> bool:
        """The summary counts its output tokens (else the inputs it answered)."""
        return self.counting is OUTPUTS


def openai_paths(path: str, azure: str = "", databricks: bool = True) -> dict[str, str]:
    """The paths of an OpenAI-style API at `path` (e.g. "/v1/chat/completions"): the same for `openai-compatible` and
    `openai`; under an Azure deployment at `azure` (e.g. "chat/completions"; "": Azure does not serve it); a
    Databricks serving endpoint's invocations unless `databricks` is False."""
    paths = {"openai-compatible": path, "openai": path}
    if azure:
        paths["azure"] = f"/openai/deployments/{{deployment}}/{azure}?api-version={{api_version}}"
    if databricks:
        paths["databricks"] = "/serving-endpoints/{deployment}/invocations"
    return paths


OPENAI_STREAM = {"stream": True, "stream_options": {"include_usage": True}}
"""The fixed fields of an OpenAI-style streamed API (chat and text completions): a stream, its usage in its last
chunk."""

APIS: dict[str, Api] = {}
"""Every API a user can send to, by endpoint name."""


def register(new: Api) -> Api:
    """Add `new` to `APIS` and its counting to `COUNTINGS` (ValueError if its endpoint name is taken, or another
    counting has its counting's name); return it."""
    if new.endpoint in APIS:
        raise ValueError(f"an API is already registered as {new.endpoint!r}")
    if COUNTINGS.get(new.counting.name, new.counting) != new.counting:
        raise ValueError(f"API {new.endpoint!r}: another counting is named {new.counting.name!r}")
    for other in APIS.values():  # neither call's path may hold the other's call (`a.create`, `a.create.b`)
        if f"{other.mount}.".startswith(f"{new.mount}.") or f"{new.mount}.".startswith(f"{other.mount}."):
            raise ValueError(f"API {new.endpoint!r}: self.llm.{new.mount} clashes with {other.endpoint!r}'s")
        if {new.user, new.agent_user} & {other.user, other.agent_user} - {""}:
            raise ValueError(f"API {new.endpoint!r}: a User class of {other.endpoint!r} has its name")
    APIS[new.endpoint] = new
    COUNTINGS[new.counting.name] = new.counting
    return new


def api(endpoint: str) -> Api:
    """The API registered as `endpoint`; ConfigError naming the registered ones."""
    found = APIS.get(endpoint)
    if found is None:
        raise ConfigError(f"no API is registered as {endpoint!r}: one of {', '.join(sorted(APIS))}")
    return found


def endpoints_of(user_classes: Iterable[Any]) -> tuple[str, ...]:
    """The endpoints the User classes send to (sorted; classes without one left out)."""
    return tuple(sorted({getattr(user, "endpoint", "") for user in user_classes} - {""}))


def run_counting(endpoints: Iterable[str]) -> Counting:
    """What a run of users of `endpoints` counts: theirs when they all count the same, else output tokens."""
    countings = {api(endpoint).counting for endpoint in endpoints}
    return countings.pop() if len(countings) == 1 else OUTPUTS


def summary_counting(summary: Mapping[str, Any]) -> Counting:
    """What the run of a summary.json document counts (`run.counts`; older documents without it: output tokens)."""
    return COUNTINGS.get((summary.get("run") or {}).get("counts", ""), OUTPUTS)


MEDIA_RATES = (
    Rate("input_s_per_s", "audio in s/s", "Audio seconds transcribed/s"),
    Rate("output_s_per_s", "audio out s/s", "Audio seconds produced/s"),
    Rate("real_time_factor", "RTF", "Real-time factor (E2E / audio s)", digits=3),
)
"""The seconds of media a run's requests carried or its answers held (speech to text, text to speech, a Realtime
session's audio), whichever API counted them: shown beside the counting's own rates when the run moved any."""


def summary_rates(summary: Mapping[str, Any]) -> tuple[Rate, ...]:
    """The throughputs the displays show for a summary.json document: its counting's rates, then each of
    `MEDIA_RATES` the run has a value for (not 0 or none) that the counting does not show already."""
    own = summary_counting(summary).rates
    throughput = summary.get("throughput") or {}
    keys = {rate.key for rate in own}
    return own + tuple(rate for rate in MEDIA_RATES if rate.key not in keys and throughput.get(rate.key))
