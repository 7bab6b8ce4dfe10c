"""Pure unit tests of the simulator's parts that need no sockets: engine, HTTP parser, wire format."""

from __future__ import annotations

import json

import pytest

from llm_locust.sim import http
from llm_locust.sim.apis import parse_completion
from llm_locust.sim.apis.chat import ChatEncoder
from llm_locust.sim.apis.wire import ApiError, CompletionSpec
from llm_locust.sim.engine import BatchingEngine, BatchingParams, FixedTiming, Sequence, WarmupDrift
from llm_locust.sim.latency import Latency


def test_fixed_timing_due_times_are_absolute() -> None:
    timing = FixedTiming(Latency("fixed", 200.0), itl_s=0.02)
    seq = Sequence(prompt_tokens=1, output_tokens=5, t_recv_s=100.0)
    timing.start(seq)
    assert timing.due_s(seq, 0) == pytest.approx(100.2)
    assert timing.due_s(seq, 4) == pytest.approx(100.28)
    assert timing.tokens_due(seq, 100.19) == 0
    assert timing.tokens_due(seq, 100.2401) == 3
    seq.emitted = 3
    assert timing.tokens_due(seq, 200.0) == 2


def _engine(max_batch: int = 2) -> BatchingEngine:
    return BatchingEngine(
        BatchingParams(max_batch=max_batch, decode_step_s=0.01, decode_step_s_per_seq=0.001, prefill_s_per_token=1e-4)
    )


def test_batching_step_durations_admission_and_ttft() -> None:
    engine = _engine(max_batch=2)
    a, b, c = (Sequence(prompt_tokens=10, output_tokens=2, t_recv_s=0.0) for _ in range(3))
    assert engine.submit(a, 0.0) is True  # idle engine starts a step with `a` admitted
    assert engine.step_end_s == pytest.approx(0.01 + 0.001 * 1 + 1e-4 * 10)
    assert engine.submit(b, 0.001) is False and engine.submit(c, 0.002) is False
    assert engine.complete_step() == [a]  # a's first token at the end of its admission step
    # next step starts at the previous end (absolute), admits b (c waits: batch full)
    step1_end = 0.011 + 0.001
    assert engine.step_end_s == pytest.approx(step1_end + 0.01 + 0.002 + 1e-3)
    assert b.t_admit_s == pytest.approx(step1_end) and c.t_admit_s is None
    assert engine.complete_step() == [a, b]
    assert a.done and engine.running == [b, c]  # a's slot goes to c at the next step start
    assert c.queue_s > 0 and c.t_admit_s == pytest.approx(b.t_admit_s + 0.013)
    engine.complete_step()
    engine.complete_step()
    assert engine.step_end_s is None and c.done


def test_batching_cancel_frees_slot() -> None:
    engine = _engine(max_batch=1)
    a, b = Sequence(1, 100, 0.0), Sequence(1, 1, 0.0)
    engine.submit(a, 0.0)
    engine.submit(b, 0.0)
    engine.cancel(a)
    assert engine.complete_step() == []
    assert engine.running == [b]
    assert engine.complete_step() == [b]
    assert engine.step_end_s is None


def test_request_parser_incremental_and_pipelined() -> None:
    parser = http.RequestParser()
    raw = b"POST /v1/completions?x=1 HTTP/1.1\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbody"
    raw += b"GET /health HTTP/1.1\r\n\r\n"
    requests = []
    for i in range(len(raw)):
        requests += parser.feed(raw[i : i + 1])
    assert [(r.method, r.path, r.body) for r in requests] == [
        ("POST", "/v1/completions", b"body"),
        ("GET", "/health", b""),
    ]
    assert requests[0].query == "x=1" and not requests[0].keep_alive and requests[1].keep_alive


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 411),
        (b"garbage\r\n\r\n", 400),
    ],
)
def test_request_parser_errors(raw: bytes, status: int) -> None:
    with pytest.raises(http.HttpError) as info:
        http.RequestParser().feed(raw)
    assert info.value.status == status


def test_request_parser_expect_continue() -> None:
    parser = http.RequestParser()
    assert parser.feed(b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n") == []
    assert parser.awaiting_continue


def _spec(body: dict, natural: int = 128) -> CompletionSpec:
    return parse_completion(json.dumps(body).encode(), "chat", ("m",), natural)


def test_prompt_tokens_are_words() -> None:
    messages = [
        {"role": "system", "content": "a  b\nc"},
        {"role": "user", "content": [{"type": "text", "text": "d e"}]},
    ]
    assert _spec({"messages": messages}).prompt_tokens == 5
    assert _spec({"messages": [{"role": "user", "content": ""}]}).prompt_tokens == 1
    spec = parse_completion(b'{"prompt": [[1, 2, 3], "x y"]}', "completions", ("m",), 10)
    assert spec.prompt_tokens == 5


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"messages": [{"content": "x"}], "max_tokens": 0}, "max_tokens"),
        ({"messages": [{"content": "x"}], "max_tokens": 2, "min_tokens": 3}, "min_tokens"),
        ({"messages": []}, "messages"),
        ({"messages": [{"content": "x"}], "max_tokens": "5"}, "max_tokens"),
    ],
)
def test_invalid_requests(body: dict, message: str) -> None:
    with pytest.raises(ApiError) as info:
        _spec(body)
    assert info.value.status == 400 and message in info.value.message


def test_event_encoder_builds_valid_json() -> None:
    spec = _spec({"messages": [{"content": "x"}], "max_tokens": 3, "stream": True})
    encoder = ChatEncoder(spec, "chatcmpl-7", 1, "m", offset=5)
    events = [json.loads(b"".join(encoder.token_event(i))[6:]) for i in range(3)]
    assert [e["choices"][0]["finish_reason"] for e in events] == [None, None, "length"]
    assert all(e["id"] == "chatcmpl-7" and e["choices"][0]["delta"]["content"].startswith(" ") for e in events)
    assert json.loads(encoder.usage_event()[6:])["usage"]["completion_tokens"] == 3


def test_the_simulators_own_constants_equal_the_clients() -> None:
    """The simulator keeps its own copies of what it shares with the client (it imports no client module): the
    prefix block size, the kernel receive-time socket option and its decoding, and each API's path and content type
    (Gemini's and ConverseStream's, with the model in them, routed to them; Bedrock's chat routed to chat)."""
    import socket
    import struct
    import time

    from llm_locust.apis import APIS as ENDPOINTS
    from llm_locust.sim import prefix_cache, receive_time
    from llm_locust.sim.apis import BY_NAME, route
    from llm_locust.transport import kernel_time
    from llm_locust.workload import prefix_blocks, providers

    assert prefix_cache.BLOCK_TOKENS == prefix_blocks.BLOCK_TOKENS
    for name in ("SO_TIMESTAMPNS", "CMSG_BYTES", "KERNEL_TIMESTAMPS"):
        assert getattr(receive_time, name) == getattr(kernel_time, name), name
    assert receive_time.PLAUSIBLE_AGE_S == kernel_time._PLAUSIBLE_AGE_S
    assert sorted(BY_NAME) == sorted(ENDPOINTS)
    for endpoint, api in BY_NAME.items():  # the OpenAI path, or the one provider's (Bedrock's ConverseStream)
        client = ENDPOINTS[endpoint]
        if client.streams:
            assert api.content_type == client.framing.content_type, endpoint
        if "openai" in client.paths or len(client.paths) == 1:
            provider = "openai" if "openai" in client.paths else next(iter(client.paths))
            assert api.paths[0] == providers.completion_path(provider, endpoint), endpoint
    for provider in ("gemini", "vertex"):  # paths naming the model: routed to the API, the model taken from them
        path, _, query = providers.model_path(providers.completion_path(provider, "gemini", "", "", "p", "l"),
                                              "gemini-2.5-flash").partition("?")  # fmt: skip
        assert route(path, query) == (BY_NAME["gemini"], "gemini-2.5-flash"), provider
    converse = providers.model_path(providers.completion_path("bedrock", "converse"), "amazon.nova-lite-v1:0")
    assert route(converse, "") == (BY_NAME["converse"], "amazon.nova-lite-v1:0")
    assert route(providers.completion_path("bedrock", "chat"), "") == (BY_NAME["chat"], None)
    now = time.perf_counter()
    wall = time.time()
    for age_s in (0.25, 0.0, -1.0, 120.0):  # plausible, now, in the future, too old
        seconds = wall - age_s
        payload = struct.pack("@qq", int(seconds), int(seconds % 1 * 1e9))
        ancillary = [(socket.SOL_SOCKET, kernel_time.SO_TIMESTAMPNS, payload)]
        sim_s = receive_time.kernel_arrival(ancillary, now)
        client_s = kernel_time.kernel_arrival(ancillary, now)
        assert sim_s == pytest.approx(client_s, abs=0.01), age_s
    assert receive_time.kernel_arrival([], now) == kernel_time.kernel_arrival([], now) == now


def test_both_read_the_wall_clocks_offset_between_two_perf_counter_readings():
    """The offset that turns a kernel receive time into perf_counter's clock is read bracketed, in both copies: the
    same offset, within microseconds, as the closest of many bracketed readings (a reading taken with a perf_counter
    read before it would take a pause of the process in between for an offset)."""
    import time

    from llm_locust.sim import receive_time
    from llm_locust.transport import kernel_time

    best_s, offset_s = float("inf"), 0.0
    for _ in range(50):
        before = time.perf_counter()
        wall = time.time()
        after = time.perf_counter()
        if after - before < best_s:
            best_s, offset_s = after - before, wall - (before + after) / 2
    for read in (receive_time.wall_minus_perf_s, kernel_time.wall_minus_perf_s):
        assert min(abs(read() - offset_s) for _ in range(5)) < 50e-6


def test_warmup_drift_decays_ttft_from_3x_to_1x() -> None:
    timing = FixedTiming(Latency("fixed", 100.0), itl_s=0.01, drift=WarmupDrift(4.0))
    first = Sequence(prompt_tokens=1, output_tokens=3, t_recv_s=50.0)  # the first request sets the origin
    middle = Sequence(prompt_tokens=1, output_tokens=3, t_recv_s=52.0)
    late = Sequence(prompt_tokens=1, output_tokens=3, t_recv_s=60.0)
    for seq in (first, middle, late):
        timing.start(seq)
    assert timing.due_s(first, 0) - 50.0 == pytest.approx(0.3)
    assert timing.due_s(middle, 0) - 52.0 == pytest.approx(0.2)
    assert timing.due_s(late, 1) - 60.0 == pytest.approx(0.11)
    assert timing.tokens_due(middle, 52.19) == 0 and timing.tokens_due(middle, 52.2) == 1


def test_every_api_module_is_registered_and_routed_at_each_of_its_paths() -> None:
    """An API is its module: every module of `sim/apis` declaring an `API` is registered, named as the module; each
    path it declares routes to it — the model taken from a path naming it (URL-quoted), its required query enforced."""
    import pkgutil
    import re
    from importlib import import_module

    from llm_locust.sim import apis

    declared = {info.name for info in pkgutil.iter_modules(apis.__path__)
                if hasattr(import_module(f"{apis.__name__}.{info.name}"), "API")}  # fmt: skip
    assert declared == set(apis.BY_NAME) and len(apis.APIS) == len(declared) >= 7
    for api in apis.APIS:
        for path in api.paths:
            concrete = re.sub(r"\{(\w+)\}", lambda place: "nova-v1%3A0" if place[1] == "model" else "p", path)
            model = "nova-v1:0" if "{model}" in path else None
            serving = next((other for other in apis.APIS if api.name in other.serves_too and path in other.paths), api)
            assert apis.route(concrete, f"a=1&{api.query}") == (serving, model), path
            if api.query:
                with pytest.raises(ApiError) as info:
                    apis.route(concrete, "a=1")
                assert info.value.status == 400 and api.query in info.value.message
    assert apis.route("/v1/nothing", "") == (None, None)
    assert apis.route("/model/m/converse-stream/x", "") == (None, None)


def test_a_path_two_apis_declare_routes_to_the_one_serving_both() -> None:
    """`wire.Api.serves_too`: a path two APIs declare routes to the one that serves the other too, whatever their
    order; two that declare one path and neither serves the other are refused."""
    from llm_locust.sim import apis
    from llm_locust.sim.apis.wire import Api

    def declared(name: str, serves_too: tuple[str, ...] = ()) -> Api:
        return Api(name=name, paths=("/v1/x", f"/v1/{name}"), id_prefix=name, parse=lambda *_: None,  # type: ignore
                   encoder=lambda *_: None, serves_too=serves_too)  # type: ignore  # fmt: skip

    one, both = declared("one"), declared("both", ("one",))
    for order in ((one, both), (both, one)):
        table = apis.by_path(order)
        assert table == {"/v1/x": both, "/v1/one": one, "/v1/both": both}
    with pytest.raises(ValueError, match="/v1/x: declared by one and other, neither serving the other"):
        apis.by_path((one, declared("other")))
