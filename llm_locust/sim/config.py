"""The simulator's settings: one frozen value object built by the CLI and passed down."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from llm_locust.sim.latency import Latency

TimingName = Literal["fixed", "batching"]
DEFAULT_TTFT = Latency("fixed", 200.0)


@dataclass(frozen=True, slots=True)
class SimConfig:
    """Everything `llm-locust sim` can be told; units are in the field names.

    Fixed model: token i of a response is due at t_recv + its TTFT + i * itl_ms (its TTFT: a draw of `ttft_ms`).
    Batching model: see `llm_locust.sim.engine.BatchingEngine`.
    """

    host: str = "127.0.0.1"
    port: int = 8000
    replicas: int = 1
    """Independent servers (own batch, queue, trace, metrics) in this process, on `port`, `port` + 1, ... (each on
    a free port of its own when `port` is 0)."""
    model: str = "llm-locust-sim"
    timing: TimingName = "fixed"
    ttft_ms: Latency = DEFAULT_TTFT
    """The fixed model's TTFT: constant, or a distribution drawn once per request (`llm_locust.sim.latency`)."""
    ttft_seed: int = 0
    """Seed of the TTFT draws (the n-th request gets the n-th draw)."""
    itl_ms: float = 20.0
    warmup_drift_s: float = 0.0
    """Fixed model: a server that warms up — TTFT starts at `engine.DRIFT_FACTOR` times `ttft_ms` at its first
    request and falls linearly to `ttft_ms` over this many seconds (`engine.WarmupDrift`); 0: no drift."""
    output_tokens: int = 128
    tokens_per_chunk: int = 1
    """Output tokens per streamed event after the first (which goes alone, at TTFT); a chunk leaves when its last
    token is produced (coalescing, speculative decoding). Faulted responses keep one token per event."""
    max_batch: int = 64
    prefill_us_per_token: float = 50.0
    decode_step_ms: float = 10.0
    decode_step_ms_per_seq: float = 0.2
    session_header: str = ""
    """A request header whose value GET /sim/trace records per request (`session`), as a router with session
    affinity would read it; empty: none."""
    prefix_cache_blocks: int = 0
    """Capacity of the prefix cache (`llm_locust.sim.prefix_cache`) in 512-token blocks; 0: no cache. Cached tokens
    cost no prefill: the fixed model's TTFT and the batching model's prefill shrink by the cached share."""
    trace_limit: int = 100_000
    gpus: int = 1
    """Simulated GPUs on GET /gpu-metrics (DCGM-exporter format)."""
    api_key: str = ""
    """When set, /v1/* and /v1beta/* (and Bedrock's /openai/v1/*, /model/*) requests without `Authorization: Bearer
    <api_key>` (or its `x-api-key` or `x-goog-api-key` header) get HTTP 401 (a wrong `x-goog-api-key`: HTTP 400, as
    Google answers)."""
    sigv4: str = ""
    """`ACCESS_KEY:SECRET[:SESSION_TOKEN]`: requests to those paths must carry a SigV4 signature of this credential,
    recomputed with botocore (`llm_locust.sim.sigv4`; else HTTP 403, AWS's error shape); a request without one may
    still carry the API key when `api_key` is set too."""
    tls_cert: str = ""
    """PEM certificate (chain) to serve HTTPS with, together with `tls_key`; empty: plain HTTP."""
    tls_key: str = ""
    accept_delay_ms: float = 0.0
    """How long each new connection waits after the accept before it is read (its TLS handshake, its first request):
    a known set-up delay that the client's connection phases must show; 0: none."""
    faults: tuple[tuple[str, float], ...] = ()
    """(kind, probability) pairs, see `llm_locust.sim.faults`."""
    fault_seed: int = 0
    fault_stall_ms: float = 5000.0
    fault_slow_headers_ms: float = 5000.0
    fault_huge_bytes: int = 1_048_576
    fault_retry_after_s: int = 1
    echo_headers: bool = False
    """Error answers quote every request header (see `llm_locust.sim.faults`)."""
    models: tuple[str, ...] = ()
    """Several served models (`--models`): the first is the base, the others its LoRA adapters (`llm_locust.sim.lora`);
    empty: `model` alone."""
    max_loras: int = 0
    """Adapters resident at once (vLLM's --max-loras); a request for another one loads it, evicting the least
    recently used; 0: every adapter resident, nothing loaded."""
    lora_load_ms: float = 0.0
    """How long loading an adapter holds back the prefill of the request that needs it, ms."""

    @property
    def served(self) -> tuple[str, ...]:
        """The served model names, the base first: `models`, else `model` alone."""
        return self.models or (self.model,)

    tool_call_rate: float = 0.0
    """Probability that a chat, Responses or Messages request offering function `tools` is answered with a tool call
    instead of text (`llm_locust.sim.apis.tools`); 0: never."""
    tool_call_malformed_rate: float = 0.0
    """Probability that a tool call's arguments are not valid JSON (their closing brace left out)."""
    tool_call_seed: int = 0
    """Seed of the tool-call draws (whether, which tool, its arguments, malformed)."""
    token_lifetime_s: float = 3600.0
    """Lifetime of the bearer tokens its token endpoints issue (`llm_locust.sim.oauth`), seconds."""
    oauth_client: str = ""
    """`CLIENT_ID:SECRET` its Databricks and Entra token endpoints accept; empty: they refuse every client."""
    google_key_file: str = ""
    """A Google service-account key file: its Google token endpoint accepts assertions signed with its key."""
    require_token: bool = False
    """Completion requests need a bearer token issued here and unexpired (else HTTP 401)."""
    accuracy: float = 1.0
    """Probability that a question the simulator recognises is answered right (`llm_locust.sim.answers`)."""
    degrade_above_batch: int = 0
    """A request admitted into a running batch of more than this many sequences is right with probability
    `degraded_accuracy` instead; 0: never."""
    degraded_accuracy: float = 1.0
    invalid_json_rate: float = 0.0
    """Probability that a structured output's JSON is made invalid."""
    answer_seed: int = 0
    """Seed of the answers' draws (right or wrong, invalid JSON, the values)."""
