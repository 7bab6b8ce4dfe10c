"""The `llm-locust sim` command line: its options (`add_arguments`, defaults from `SimConfig`), the `SimConfig` they
name (`config_from_args`) and its problems (`config_problem`, pure)."""

from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path
from typing import Any

from llm_locust.sim import faults, sigv4
from llm_locust.sim.apis import APIS
from llm_locust.sim.config import SimConfig
from llm_locust.sim.latency import Latency, parse_latency

_APIS = "\n".join(f"  {api.name}: POST {api.paths[0]}" for api in APIS)
"""Each API the simulator serves at its own path, for the help text (every path: docs/simulator.md)."""
_DESCRIPTION = f"""\
OpenAI-compatible server with known timing, to check load-test measurements against ground truth.
APIs (at their own paths; the providers' too, docs/simulator.md):
{_APIS}
Other endpoints: GET /v1/models, GET /health, GET /metrics (vLLM names),
GET /gpu-metrics (simulated GPUs in DCGM-exporter format, utilisation = batch occupancy),
GET /node-metrics (this host's /proc in node-exporter format),
GET /sim/trace (per-request ground truth, perf_counter seconds: the kernel's receive time of the
request, every token write; the injected fault; the tool call answered and the earlier ones carried;
the answer given to a recognised question or a structured output),
POST /sim/reset (clear the trace).
Prompt tokens = whitespace-separated words of the prompt/messages (at least 1).
"""


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Show defaults and keep the description's line breaks."""


def add_arguments(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `sim` sub-command and its options to `subparsers` and return its parser (`cli.add_parser` sets what
    it runs)."""
    d = SimConfig()
    parser = subparsers.add_parser(
        "sim",
        help="run the built-in OpenAI-compatible simulator",
        description=_DESCRIPTION,
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--host", default=d.host, help="address to listen on")
    parser.add_argument("--port", type=int, default=d.port, help="TCP port (0 = pick a free one)")
    parser.add_argument(
        "--replicas",
        type=int,
        default=d.replicas,
        help="serve this many independent replicas (own batch, queue, trace and metrics each) on consecutive ports "
        "from --port (each on a free port with --port 0), for a comma-separated --host",
    )
    parser.add_argument(
        "--model", default=d.model, help="served model name; requests naming another model get HTTP 404"
    )
    parser.add_argument(
        "--timing",
        choices=("fixed", "batching"),
        default=d.timing,
        help="fixed: constant TTFT and ITL; batching: continuous batching with a queue",
    )
    timing = parser.add_argument_group("fixed timing")
    timing.add_argument(
        "--ttft-ms",
        type=_latency,
        default=d.ttft_ms,
        metavar="MS|DIST",
        help="time to first token, ms: a number, or a distribution drawn per request (lognormal:median=MS,sigma=S, "
        "uniform:LOW,HIGH) whose quantiles are known",
    )
    timing.add_argument("--ttft-seed", type=int, default=d.ttft_seed, metavar="N", help="seed of the --ttft-ms draws")
    timing.add_argument("--itl-ms", type=float, default=d.itl_ms, help="inter-token latency, ms")
    timing.add_argument(
        "--warmup-drift-s",
        type=float,
        default=d.warmup_drift_s,
        help="a warming-up server: TTFT starts at 3x --ttft-ms at the first request and falls linearly to it over "
        "this many seconds (0: none)",
    )
    parser.add_argument(
        "--output-tokens",
        type=int,
        default=d.output_tokens,
        help="natural response length in tokens, when the request does not cap it (max_tokens)",
    )
    parser.add_argument(
        "--tokens-per-chunk",
        type=int,
        default=d.tokens_per_chunk,
        help="output tokens per streamed event after the first, sent when the chunk's last token is produced "
        "(as with speculative decoding); usage still counts every token",
    )
    batching = parser.add_argument_group(
        "batching timing",
        "step duration = decode-step-ms + decode-step-ms-per-seq x running batch"
        " + prefill-us-per-token x prompt tokens admitted in the step",
    )
    batching.add_argument("--max-batch", type=int, default=d.max_batch, help="running batch size, sequences")
    batching.add_argument(
        "--prefill-us-per-token", type=float, default=d.prefill_us_per_token, help="prefill cost, µs per token"
    )
    batching.add_argument("--decode-step-ms", type=float, default=d.decode_step_ms, help="base decode step, ms")
    batching.add_argument(
        "--decode-step-ms-per-seq",
        type=float,
        default=d.decode_step_ms_per_seq,
        help="extra decode step time per running sequence, ms",
    )
    parser.add_argument(
        "--session-header",
        default=d.session_header,
        help="record this request header's value per request in GET /sim/trace (session), as an affinity router "
        "reads it",
    )
    parser.add_argument(
        "--prefix-cache-blocks",
        type=int,
        default=d.prefix_cache_blocks,
        help="prefix cache capacity in 512-token blocks (LRU; 0 = no cache): cached prompt tokens cost no prefill, "
        "so TTFT (fixed) or the step's prefill (batching) shrinks by the cached share; hits on /metrics and /sim/trace",
    )
    parser.add_argument(
        "--gpus", type=int, default=d.gpus, help="simulated GPUs on GET /gpu-metrics (DCGM-exporter format)"
    )
    parser.add_argument(
        "--trace-limit",
        type=int,
        default=d.trace_limit,
        help="finished requests kept for GET /sim/trace, count (oldest dropped)",
    )
    parser.add_argument(
        "--api-key",
        default=d.api_key,
        help="require 'Authorization: Bearer API_KEY' (or 'x-api-key', Google's 'x-goog-api-key') on /v1/* and "
        "/v1beta/* (else HTTP 401, like a real endpoint; a wrong x-goog-api-key: HTTP 400, as Google answers)",
    )
    parser.add_argument(
        "--sigv4",
        default=d.sigv4,
        metavar="ACCESS_KEY:SECRET[:SESSION_TOKEN]",
        help="require an AWS SigV4 signature of this test credential (or @FILE holding it) on /v1/*, /openai/v1/* and "
        "/model/*, recomputed with botocore: else HTTP 403 in AWS's error shape (GET /sim/auth counts both)",
    )
    parser.add_argument("--tls-cert", default=d.tls_cert, help="serve HTTPS with this PEM certificate (chain)")
    parser.add_argument("--tls-key", default=d.tls_key, help="PEM private key of --tls-cert")
    parser.add_argument(
        "--accept-delay-ms",
        type=float,
        default=d.accept_delay_ms,
        help="each new connection waits this long before it is read (its TLS handshake, its first request), ms",
    )
    add_fault_arguments(parser)
    add_model_arguments(parser)
    add_tool_call_arguments(parser)
    add_token_arguments(parser)
    add_answer_arguments(parser)
    parser.add_argument(
        "--ready-file",
        type=Path,
        default=None,
        help="once listening, write the actual port number to this file (one line per replica)",
    )
    return parser


def add_token_arguments(parser: argparse.ArgumentParser) -> None:
    """The token endpoints' and the token verifier's options (`llm_locust.sim.oauth`)."""
    d = SimConfig()
    group = parser.add_argument_group(
        "token endpoints",
        "Databricks' /oidc/v1/token, Entra ID's /{tenant}/oauth2/v2.0/token and Google's /token issue short-lived "
        "bearer tokens; GET /sim/tokens counts them",
    )
    group.add_argument(
        "--token-lifetime-s", type=float, default=d.token_lifetime_s, help="lifetime of an issued token, seconds"
    )
    group.add_argument(
        "--oauth-client",
        default=d.oauth_client,
        help="CLIENT_ID:SECRET the Databricks and Entra ID token endpoints accept (others: HTTP 401)",
    )
    group.add_argument(
        "--google-key-file",
        default=d.google_key_file,
        help="a Google service-account key file: assertions signed with its key get tokens",
    )
    group.add_argument(
        "--require-token",
        action="store_true",
        default=d.require_token,
        help="completion requests need a bearer token issued here and unexpired (else HTTP 401)",
    )


def add_fault_arguments(parser: argparse.ArgumentParser) -> None:
    """The fault-injection options (see `llm_locust.sim.faults` for what each kind does)."""
    d = SimConfig()
    group = parser.add_argument_group(
        "fault injection",
        "each completion request gets at most one fault, drawn with the given probabilities; "
        "GET /sim/trace names the fault of each request",
    )
    group.add_argument(
        "--fault",
        dest="faults",
        action="append",
        type=_fault_type,
        default=[],
        metavar="KIND=P",
        help=f"inject fault KIND with probability P (repeatable); kinds: {', '.join(faults.KINDS)}",
    )
    group.add_argument("--fault-seed", type=int, default=d.fault_seed, help="seed of the fault draws")
    group.add_argument("--fault-stall-ms", type=float, default=d.fault_stall_ms, help="silence of a stall, ms")
    group.add_argument(
        "--fault-slow-headers-ms", type=float, default=d.fault_slow_headers_ms, help="delay of slow headers, ms"
    )
    group.add_argument(
        "--fault-huge-bytes", type=int, default=d.fault_huge_bytes, help="text size of a huge chunk, bytes"
    )
    group.add_argument(
        "--fault-retry-after-s", type=int, default=d.fault_retry_after_s, help="Retry-After of an HTTP 429, s"
    )
    group.add_argument(
        "--echo-headers",
        action="store_true",
        default=d.echo_headers,
        help="every error answer (HTTP error bodies, the html_502 page, the stream_error event) quotes all "
        "request headers, credentials included, as some servers do: checks that a client never prints them",
    )


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The several-models options (see `llm_locust.sim.lora`)."""
    d = SimConfig()
    group = parser.add_argument_group(
        "several models (LoRA adapters)",
        "the first of --models is the base model, the others its adapters; GET /sim/trace names each request's "
        "model, GET /metrics counts requests per model and exports vLLM's vllm:lora_requests_info",
    )
    group.add_argument(
        "--models",
        type=_models_type,
        default=d.models,
        metavar="A,B,...",
        help="serve these models instead of --model (GET /v1/models lists them; a request naming another gets HTTP "
        "404)",
    )
    group.add_argument(
        "--max-loras",
        type=int,
        default=d.max_loras,
        help="adapters resident at once (LRU, as vLLM's --max-loras); a request for another one waits "
        "--lora-load-ms before its prefill (0 = all resident)",
    )
    group.add_argument(
        "--lora-load-ms", type=float, default=d.lora_load_ms, help="time to load an adapter that is not resident, ms"
    )


def _models_type(text: str) -> tuple[str, ...]:
    """argparse type of --models: comma-separated, distinct, non-empty names."""
    names = tuple(name.strip() for name in text.split(","))
    if not all(names) or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"expected distinct comma-separated names, e.g. base,lora1; got {text!r}")
    return names


def add_tool_call_arguments(parser: argparse.ArgumentParser) -> None:
    """The tool-call options (see `llm_locust.sim.apis.tools`)."""
    d = SimConfig()
    group = parser.add_argument_group(
        "tool calls",
        "a chat, Responses or Messages request offering function tools may be answered with a tool\n"
        "call (its tool_choice obeyed): one of its tools, arguments built from the tool's schema,\n"
        "streamed one word per token event in the API's own format; GET /sim/trace records each\n"
        "call and the earlier calls and results a request carries",
    )
    group.add_argument(
        "--tool-call-rate",
        type=float,
        default=d.tool_call_rate,
        metavar="P",
        help="probability that a request offering tools is answered with a tool call instead of text",
    )
    group.add_argument(
        "--tool-call-malformed-rate",
        type=float,
        default=d.tool_call_malformed_rate,
        metavar="P",
        help="probability that a tool call's arguments are not valid JSON (closing brace left out)",
    )
    group.add_argument(
        "--tool-call-seed", type=int, default=d.tool_call_seed, metavar="N", help="seed of the tool-call draws"
    )


def add_answer_arguments(parser: argparse.ArgumentParser) -> None:
    """The answer options (see `llm_locust.sim.answers`)."""
    d = SimConfig()
    group = parser.add_argument_group(
        "answers",
        "a prompt holding a built-in set's arithmetic or multiple-choice question (builtin:arithmetic,\n"
        "builtin:choice) is answered from the truth the simulator computes, right or wrong by a draw;\n"
        "a request asking for a JSON schema (or JSON object) in its API's field is answered with JSON\n"
        "valid for it, or invalid by a draw; GET /sim/trace records each answer, GET /metrics counts them",
    )
    group.add_argument(
        "--accuracy", type=float, default=d.accuracy, metavar="P", help="probability that a question is answered right"
    )
    group.add_argument(
        "--degrade-above-batch",
        type=int,
        default=d.degrade_above_batch,
        metavar="N",
        help="a request admitted into a running batch of more than N sequences is right with probability "
        "--degraded-accuracy instead (0 = never)",
    )
    group.add_argument(
        "--degraded-accuracy",
        type=float,
        default=d.degraded_accuracy,
        metavar="Q",
        help="probability that a question is answered right above --degrade-above-batch",
    )
    group.add_argument(
        "--invalid-json-rate",
        type=float,
        default=d.invalid_json_rate,
        metavar="R",
        help="probability that a structured output's JSON is made invalid (its closing character left out)",
    )
    group.add_argument("--answer-seed", type=int, default=d.answer_seed, metavar="N", help="seed of the answers' draws")


def _fault_type(text: str) -> tuple[str, float]:
    """argparse type of --fault: a FaultSpecError becomes argparse's one-line usage error."""
    try:
        return faults.parse_fault(text)
    except faults.FaultSpecError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _latency(text: str) -> Latency:
    """argparse type of --ttft-ms: a ValueError becomes argparse's one-line usage error."""
    try:
        return parse_latency(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def config_from_args(args: argparse.Namespace) -> SimConfig:
    """Return the SimConfig named by parsed `sim` arguments."""
    values = {f.name: getattr(args, f.name) for f in fields(SimConfig)}
    values["faults"] = tuple(values["faults"])
    if values["sigv4"].startswith("@"):  # a file holding the credential, kept off the command line
        values["sigv4"] = Path(values["sigv4"][1:]).read_text().strip()
    return SimConfig(**values)


def config_problem(config: SimConfig) -> str | None:
    """The first problem of `config` as one line naming its option (None: none): fault specs, the SigV4 credential,
    counts and rates out of range."""
    try:
        faults.FaultPicker(config.faults, config.fault_seed)
        if config.sigv4:
            sigv4.Credential.parse(config.sigv4)
            sigv4.check_botocore()
    except (faults.FaultSpecError, ValueError) as e:
        return str(e)
    if config.replicas < 1:
        return f"--replicas must be at least 1, got {config.replicas}"
    if config.tokens_per_chunk < 1:
        return f"--tokens-per-chunk must be at least 1, got {config.tokens_per_chunk}"
    if config.prefix_cache_blocks < 0:
        return f"--prefix-cache-blocks must be >= 0, got {config.prefix_cache_blocks}"
    if config.warmup_drift_s < 0:
        return f"--warmup-drift-s must be >= 0, got {config.warmup_drift_s}"
    if config.accept_delay_ms < 0:
        return f"--accept-delay-ms must be >= 0, got {config.accept_delay_ms}"
    for option, rate in (("--tool-call-rate", config.tool_call_rate),
                         ("--tool-call-malformed-rate", config.tool_call_malformed_rate),
                         ("--accuracy", config.accuracy), ("--degraded-accuracy", config.degraded_accuracy),
                         ("--invalid-json-rate", config.invalid_json_rate)):  # fmt: skip
        if not 0.0 <= rate <= 1.0:
            return f"{option} must be a probability in [0, 1], got {rate}"
    if config.degrade_above_batch < 0:
        return f"--degrade-above-batch must be >= 0, got {config.degrade_above_batch}"
    if config.gpus < 1:
        return f"--gpus must be at least 1, got {config.gpus}"
    if config.max_loras < 0 or config.lora_load_ms < 0:
        return f"--max-loras and --lora-load-ms must be >= 0, got {config.max_loras} and {config.lora_load_ms}"
    if config.token_lifetime_s <= 0:
        return f"--token-lifetime-s must be > 0, got {config.token_lifetime_s}"
    return None
