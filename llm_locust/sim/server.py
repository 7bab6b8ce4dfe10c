"""The simulator's HTTP server: the app behind every connection (`connection.SimConnection`) — the route table, the
faults, the trace and metrics — and `serve`.

A completion is handed to the timing model's driver, which makes the `Generation` write its tokens at their due
times.
"""

from __future__ import annotations

import asyncio
import html
import ssl
import time
from collections.abc import Callable
from functools import partial
from itertools import count
from time import perf_counter
from typing import Any

import orjson

from llm_locust.sim import exporters, faults, http
from llm_locust.sim.answers import Answerer
from llm_locust.sim.apis import PREFIXES, encoder_of, parse_request, route
from llm_locust.sim.apis.tools import ToolCaller
from llm_locust.sim.apis.wire import Api, ApiError, CompletionSpec, models_body, output_text
from llm_locust.sim.config import SimConfig
from llm_locust.sim.connection import DelayedStart, SimConnection, listener
from llm_locust.sim.drivers import BatchingDriver, Driver, FixedDriver
from llm_locust.sim.engine import BatchingEngine, BatchingParams, FixedTiming, WarmupDrift
from llm_locust.sim.faults import FaultPicker
from llm_locust.sim.lora import AdapterSlots, LoraInfo
from llm_locust.sim.metrics import SimMetrics
from llm_locust.sim.oauth import TokenService
from llm_locust.sim.prefix_cache import BLOCK_TOKENS, PrefixCache
from llm_locust.sim.receive_time import KERNEL_TIMESTAMPS
from llm_locust.sim.sigv4 import Credential, verify
from llm_locust.sim.stream import FaultGeneration, Generation
from llm_locust.sim.timeline import Timeline
from llm_locust.sim.trace import RecentRecords, TraceRecord
from llm_locust.sim.websocket import upgrade
from llm_locust.sim.words import word_offset

_GET_ROUTES = ("/v1/models", "/health", "/metrics", "/gpu-metrics", "/node-metrics", "/sim/trace", "/sim/auth")
_POST_ROUTES = ("/sim/reset",)


def build_driver(config: SimConfig, timeline: Timeline) -> Driver:
    """Return the driver for `config.timing`."""
    if config.timing == "fixed":
        drift = WarmupDrift(config.warmup_drift_s) if config.warmup_drift_s > 0 else None
        return FixedDriver(timeline, FixedTiming(config.ttft_ms, config.itl_ms / 1e3, config.ttft_seed, drift))
    params = BatchingParams(
        max_batch=config.max_batch,
        decode_step_s=config.decode_step_ms / 1e3,
        decode_step_s_per_seq=config.decode_step_ms_per_seq / 1e3,
        prefill_s_per_token=config.prefill_us_per_token / 1e6,
    )
    return BatchingDriver(timeline, BatchingEngine(params))


class SimApp:
    """State shared by every connection: config, timing driver, trace, metrics."""

    def __init__(self, config: SimConfig, driver: Driver) -> None:
        self.config = config
        self.driver = driver
        self.trace = RecentRecords(config.trace_limit)
        self.metrics = SimMetrics()
        self.connections: set[SimConnection] = set()
        self.faults = FaultPicker(config.faults, config.fault_seed)
        self.prefix_cache = PrefixCache(config.prefix_cache_blocks) if config.prefix_cache_blocks > 0 else None
        self.tool_caller = ToolCaller(config.tool_call_rate, config.tool_call_malformed_rate, config.tool_call_seed)
        self.answerer = Answerer(config.accuracy, config.degrade_above_batch, config.degraded_accuracy,
                                 config.invalid_json_rate, config.answer_seed)  # fmt: skip
        self._request_numbers = count(1)
        self._started_s = int(time.time())
        served = config.served
        self.adapters = AdapterSlots(served[0], config.max_loras, config.lora_load_ms / 1e3)
        # vLLM exports its LoRA gauge only when serving adapters; `in_flight` feeds it
        self.lora_info = LoraInfo(config.max_loras or len(served) - 1) if len(served) > 1 else None
        self.in_flight: set[Generation] = set()
        scheme = "https" if config.tls_cert else "http"
        self.tokens = TokenService.from_options(
            config.token_lifetime_s, config.oauth_client, config.google_key_file, config.require_token, scheme
        )
        self.sigv4 = Credential.parse(config.sigv4) if config.sigv4 else None
        self.auth_counts = {"verified": 0, "refused": 0}  # requests checked with --sigv4 / --api-key (GET /sim/auth)

    def handle(self, request: http.Request, conn: SimConnection, t_recv_s: float) -> None:
        """Answer `request`: immediately, or by starting a generation that answers over time."""
        method = request.method
        try:
            if self.tokens.serves(method, request.path):  # the clouds' token endpoints (`oauth`)
                conn.respond(request, *self.tokens.answer(request))
                return
            path = request.path
            if (self.config.api_key or self.sigv4) and path.startswith(PREFIXES):  # under an API's first path segment
                self._check_credentials(request)
            api, path_model = route(path, request.query)
            if api is not None and api.websocket is not None:
                self.tokens.check(request)
                upgrade(self, request, conn, api)
            elif api is not None and method == "POST":
                self.tokens.check(request)
                self._start_generation(request, conn, api, t_recv_s, path_model)
            elif method == "GET" and path in _GET_ROUTES:
                conn.respond(request, 200, *self._get(path))
            elif method == "POST" and path == "/sim/reset":
                self.trace.clear()
                self.auth_counts = dict.fromkeys(self.auth_counts, 0)
                self.tokens.reset()
                conn.respond(request, 200, b"{}")
            elif api is not None or path in _GET_ROUTES or path in _POST_ROUTES:
                raise ApiError(405, "MethodNotAllowed", f"method {method} not allowed on {path}")
            else:
                raise ApiError(404, "NotFoundError", f"no route {method} {path}")
        except ApiError as exc:  # in its provider's shape (an `AwsError`: AWS's body and header)
            echoed = type(exc)(exc.status, exc.type, self._echo(exc.message, request))
            conn.respond(request, exc.status, echoed.body(), extra=echoed.headers())

    def _check_credentials(self, request: http.Request) -> None:
        """Raise unless `request` carries the configured credentials: a SigV4 signature (`--sigv4`: recomputed, an
        `AwsError` 403 when wrong) — also required of a request without one when no API key is configured —, else the
        API key (`_authorize`: 401). Counted in `auth_counts`."""
        signed = request.headers.get("authorization", "").startswith("AWS4-HMAC-SHA256")
        try:
            if self.sigv4 is not None and (signed or not self.config.api_key):
                verify(self.sigv4, request.method, request.path, request.query, request.headers, request.body)
            else:
                self._authorize(request)
        except ApiError:
            self.auth_counts["refused"] += 1
            raise
        self.auth_counts["verified"] += 1

    def _echo(self, message: str, request: http.Request) -> str:
        """An error `message`, quoting every header of `request` (by name) with --echo-headers."""
        if not self.config.echo_headers:
            return message
        headers = sorted(request.headers.items())
        return f"{message}; request headers: " + "; ".join(f"{name}: {value}" for name, value in headers)

    def _authorize(self, request: http.Request) -> None:
        """Raise a 401 unless `request` carries the configured API key (the message echoes the
        key received, as some providers do: a client must not print it)."""
        google_key = request.headers.get("x-goog-api-key")
        if google_key is not None:  # Google's header (the Gemini API), refused as Google does
            if google_key != self.config.api_key:
                raise ApiError(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.")
            return
        scheme, _, key = request.headers.get("authorization", "").partition(" ")
        if "x-api-key" in request.headers:  # Anthropic's header
            scheme, key = "bearer", request.headers["x-api-key"]
        if scheme.lower() != "bearer" or not key:
            raise ApiError(
                401,
                "AuthenticationError",
                "Missing API key: send 'Authorization: Bearer KEY' (or 'x-api-key: KEY', 'x-goog-api-key: KEY')",
            )
        if key != self.config.api_key:
            raise ApiError(401, "AuthenticationError", f"Incorrect API key provided: {key}")

    def _get(self, path: str) -> tuple[bytes, str]:
        if path in ("/gpu-metrics", "/node-metrics"):
            return self._telemetry(path), "text/plain; version=0.0.4"
        if path == "/v1/models":
            return models_body(self.config.served, self._started_s), "application/json"
        if path == "/health":
            return b"{}", "application/json"
        if path == "/metrics":
            lora_lines = self._lora_lines()
            body = self.metrics.render(
                self.config.served[0], self.driver.running, self.driver.waiting, self.config.max_batch, lora_lines
            )
            return body, "text/plain; version=0.0.4"
        if path == "/sim/auth":
            return orjson.dumps(self.auth_counts), "application/json"
        return orjson.dumps(self.trace.to_list()), "application/json"

    def _lora_lines(self) -> list[str]:
        """vLLM's `vllm:lora_requests_info` lines, its current series set now from the requests in flight (none
        without adapters): waiting until their prefill may start, running after."""
        if self.lora_info is None:
            return []
        now_s, base = perf_counter(), self.config.served[0]
        waiting, running = [], []
        for generation in self.in_flight:
            model = generation.record.model
            if model != base:
                t_admit_s = generation.seq.t_admit_s
                (running if t_admit_s is not None and t_admit_s <= now_s else waiting).append(model)
        self.lora_info.observe(waiting, running, time.time())
        return self.lora_info.render()

    def _telemetry(self, path: str) -> bytes:
        """The simulated DCGM-exporter page or this host's node-exporter page (404 without /proc)."""
        if path == "/gpu-metrics":
            config = self.config
            return exporters.render_gpu(config.gpus, self.driver.running, config.max_batch, config.model)
        body = exporters.render_node()
        if body is None:
            raise ApiError(404, "NotFoundError", "no /proc on this host: /node-metrics needs Linux")
        return body

    def _start_generation(
        self, request: http.Request, conn: SimConnection, api: Api, t_recv_s: float, path_model: str | None = None
    ) -> None:
        """Start generating for `request` of `api` (its model named by its path: `path_model`)."""
        t_parse_s = perf_counter()
        content_type = request.headers.get("content-type", "application/json")
        spec, data = parse_request(
            request.body, api.name, self.config.served, self.config.output_tokens, path_model, content_type
        )
        if spec.tools and api.tool_encoder is not None:
            spec = self.tool_caller.answer(spec, api.tool_call_prefix)
        if spec.tool_call is None and api.answer_encoder is not None:
            spec = self.answerer.plan(spec, data, api.output_format)
        record = self.new_record(api, spec, t_recv_s)
        record.t_body, record.parse_s = request.t_body_s or t_recv_s, perf_counter() - t_parse_s
        record.tools, record.tool_call, record.history = len(spec.tools), spec.tool_call, spec.history
        record.answer = spec.answer
        record.accept_delay_s, conn.accept_delay_s = conn.accept_delay_s, 0.0
        if self.config.session_header:
            record.session = request.headers.get(self.config.session_header.lower())
        if self.prefix_cache is not None:  # looked up in arrival order, as an engine's scheduler would
            record.prefix_blocks, record.prefix_blocks_hit = self.prefix_cache.lookup(spec.prompt_text.split())
            self.metrics.looked_up(spec.prompt_tokens, record.prefix_blocks_hit * BLOCK_TOKENS)
        fault = self.faults.pick() if self.faults.active else None
        if fault in faults.PRE_RESPONSE:
            self._pre_response_fault(fault, request, conn, spec, record)  # type: ignore[arg-type]
        else:
            self._begin(request, conn, spec, record, fault)

    def _begin(
        self,
        request: http.Request,
        conn: SimConnection,
        spec: CompletionSpec,
        record: TraceRecord,
        fault: str | None,
        late: bool = False,
    ) -> None:
        """Start answering: the head now (streamed), tokens when the timing model produces them.

        `late`: the request was held back (`slow_headers`); its timing starts now, not at t_recv.
        """
        created_s = int(time.time())
        offset = word_offset(record.id)
        model = spec.model
        chunked = request.version == "HTTP/1.1"
        encoder = encoder_of(spec)(spec, record.id, created_s, model, offset)
        args = (conn.transport, spec, record, encoder)
        kwargs: dict[str, Any] = {
            "chunked": chunked,
            "keep_alive": request.keep_alive and (chunked or not spec.stream),
            "on_done": partial(self._generation_done, conn),
        }
        if fault is not None and spec.stream and spec.output_tokens >= 1:
            config = self.config
            generation: Generation = FaultGeneration(
                *args,
                fault=fault,
                release=self.driver.cancel,
                stall_s=config.fault_stall_ms / 1e3,
                huge_bytes=config.fault_huge_bytes,
                error_message=self._echo("simulated engine failure", request),
                **kwargs,
            )
        else:
            generation = Generation(*args, **kwargs, tokens_per_chunk=self.config.tokens_per_chunk)
        generation.seq.cached_tokens = min(spec.prompt_tokens, record.prefix_blocks_hit * BLOCK_TOKENS)
        if late:
            generation.seq.t_recv_s = perf_counter()
        generation.start()
        self.submit(conn, generation)

    def new_record(self, api: Api, spec: CompletionSpec, t_recv_s: float) -> TraceRecord:
        """The trace record of a request to `api` for `spec`, received at `t_recv_s`, numbered in arrival order."""
        record = TraceRecord(f"{api.id_prefix}-{next(self._request_numbers)}", api.name, spec.stream, t_recv_s,
                             spec.prompt_tokens)  # fmt: skip
        record.model = spec.model
        return record

    def submit(self, conn: SimConnection, generation: Generation) -> None:
        """Hand `generation` (answering on `conn`) to the timing model, once its LoRA adapter is ready."""
        seq = generation.seq
        # in arrival order, as the engine loads
        seq.t_ready_s = self.adapters.ready_s(generation.spec.model, seq.t_recv_s)
        generation.record.lora_wait_s = seq.t_ready_s - seq.t_recv_s
        self.in_flight.add(generation)
        conn.generation = generation
        self.driver.submit(generation)

    def finished(self, generation: Generation) -> None:
        """`generation` is over (finished or cancelled): traced and counted."""
        self.in_flight.discard(generation)
        self.trace.add(generation.record)
        self.metrics.finished(generation.record)

    def _pre_response_fault(
        self, fault: str, request: http.Request, conn: SimConnection, spec: CompletionSpec, record: TraceRecord
    ) -> None:
        """Inject a fault that strikes before the response (`faults.PRE_RESPONSE`)."""
        record.fault = fault
        if fault == "slow_headers":  # answered normally once the delay is over, timed from then
            delay_s = self.config.fault_slow_headers_ms / 1e3
            conn.delay(delay_s, record, partial(self._begin, request, conn, spec, record, None, late=True))
            return
        record.t_done = perf_counter()
        self.trace.add(record)
        if fault == "refuse":
            conn.reset()
            return
        if fault == "non_sse":
            encoder = encoder_of(spec)(spec, record.id, int(time.time()), spec.model, 0)
            conn.respond(request, 200, encoder.body())
            return
        if fault == "html_502":
            message = html.escape(self._echo("simulated gateway failure", request))
            title = "502 Bad Gateway"
            page = f"<html><head><title>{title}</title></head><body><h1>{title}</h1><p>{message}</p></body></html>"
            conn.respond(request, 502, page.encode(), content_type="text/html")
            return
        status = int(fault.removeprefix("http_"))
        error_type = {429: "RateLimitError", 503: "ServiceUnavailableError"}.get(status, "InternalServerError")
        extra = (f"Retry-After: {self.config.fault_retry_after_s}",) if status == 429 else ()
        error = ApiError(status, error_type, self._echo(f"simulated {fault}", request))
        conn.respond(request, status, error.body(), extra=extra)

    def abandoned(self, record: TraceRecord) -> None:
        """The client of a delayed (`slow_headers`) request went away before it started."""
        record.cancelled = True
        record.t_done = perf_counter()
        self.trace.add(record)

    def cancel(self, generation: Generation) -> None:
        """The client of `generation` disconnected: stop generating and record it."""
        self.driver.cancel(generation)
        generation.cancel()

    def _generation_done(self, conn: SimConnection, generation: Generation) -> None:
        record = generation.record
        spec = generation.spec
        if self.prefix_cache is not None and record.finish_reason is not None and spec.output_tokens:
            # a finished answer's blocks stay cached with its prompt's, for the conversation's next turn
            answer = "".join(spec.tool_call.pieces) if spec.tool_call else output_text(spec, word_offset(record.id))
            self.prefix_cache.store((spec.prompt_text + answer).split())
        self.finished(generation)
        if not record.cancelled:
            conn.response_done(generation.keep_alive)


async def serve(
    config: SimConfig, stop: asyncio.Event, on_listening: Callable[[int], None], tls: ssl.SSLContext | None = None
) -> None:
    """Serve `config` until `stop` is set (over TLS with `tls`); call `on_listening(port)` once the
    socket is bound."""
    loop = asyncio.get_running_loop()
    app = SimApp(config, build_driver(config, Timeline(loop)))

    def connection() -> SimConnection:
        return SimConnection(app)

    factory: Callable[[], asyncio.Protocol] = connection
    if config.accept_delay_ms > 0:  # the TLS handshake too starts after the delay: done by DelayedStart
        factory = partial(DelayedStart, connection, config.accept_delay_ms / 1e3, tls)
        tls = None
    if KERNEL_TIMESTAMPS:
        server = await loop.create_server(factory, sock=listener(config.host, config.port), ssl=tls)
    else:
        server = await loop.create_server(factory, config.host, config.port, reuse_address=True, backlog=4096, ssl=tls)
    try:
        on_listening(server.sockets[0].getsockname()[1])
        await stop.wait()
    finally:
        server.close()
        for conn in list(app.connections):
            conn.transport.close()
        await server.wait_closed()
