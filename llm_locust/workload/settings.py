"""The workload's settings (`WorkloadSettings`): what each request carries, validated from Locust's parsed options;
each option declared on its field.

Files (dataset, tokenizer, images) are read once here, so that a bad one fails at start with its name. Pure:
`config.settings` assembles it with the other stages' settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from llm_locust.apis.shapes import RESPONSE_FORMATS
from llm_locust.errors import ConfigError
from llm_locust.option_values import as_list, at_least, build, option, optional_float, optional_int, shown_as
from llm_locust.workload.datasets import FORMATS as DATASET_FORMATS
from llm_locust.workload.datasets import REFERENCE, load_dataset
from llm_locust.workload.input_images import file_data_url, parse_size
from llm_locust.workload.lengths import LengthDist, parse_length
from llm_locust.workload.model_mix import ModelMix, parse_model_mix
from llm_locust.workload.sessions import DurationDist, parse_duration
from llm_locust.workload.structured import load_schema
from llm_locust.workload.tokens import token_counter
from llm_locust.workload.tools import ToolSet, load_tool_sets, synthetic_tools


@dataclass(frozen=True)
class WorkloadSettings:
    """Prompts and their lengths (synthetic, shared prefixes, or a dataset), output lengths, images, the seed, the
    tokenizer that counts, the session header, the embeddings batch, the extra body fields, the model mix, and the
    synthetic multi-turn sessions' turns and think time; agent sessions' tools (`tools` synthetic ones, or
    `tools_file`), the length of a tool's result (tokens), its latency (ms; fixed 0: no wait) and the most steps of a
    session."""

    extra_body: dict[str, Any] = field(
        metadata=option("JSON object merged into every request body, e.g. '{\"temperature\": 0}'")
    )
    prompt_tokens: LengthDist = field(
        metadata=option(
            "Synthetic prompt length in tokens: N, uniform:MIN,MAX, normal:MEAN,SD[,MIN,MAX], "
            "lognormal:MEAN,SD[,MIN,MAX]",
            "128",
        )
        | shown_as(str)
    )
    max_tokens: LengthDist = field(
        metadata=option("max_tokens of each request: N or a distribution", "128") | shown_as(str)
    )
    temperature: float | None = field(
        metadata=option(
            "Sampling temperature of each request of the built-in users, in each API's own field, beside "
            "its length field (temperature, or in the object holding the length); default: none sent, the server's own",
            None,
            check=at_least(0),
        )
    )
    ignore_eos: bool = field(
        metadata=option(
            "Make every output exactly max_tokens long with the fields of --server-family (vLLM/SGLang: ignore_eos + "
            "min_tokens; llama.cpp: ignore_eos + n_predict)",
            False,
        )
    )
    seed: int | None = field(metadata=option("Seed of prompts, lengths and arrival times (default: random)", None))
    prefix_tokens: int = field(
        metadata=option("Shared prefix in front of every synthetic prompt, in tokens", 0, check=at_least(0))
    )
    prefix_pool: int = field(
        metadata=option(
            "Number of distinct --prefix-tokens prefixes (system prompts, templates); each request draws one",
            1,
            check=at_least(1),
        )
    )
    prefix_zipf: float = field(
        metadata=option(
            "Draw the --prefix-pool prefixes Zipf-distributed with this exponent S (prefix k with weight 1/(k+1)^S); "
            "0: uniformly",
            0.0,
            check=at_least(0),
        )
    )
    session_header: str = field(
        metadata=option(
            "Send each conversation's session id in this HTTP header (routers with session affinity); a "
            "conversation's turns always go from one user, in order"
        )
    )
    tokenizer: str = field(
        metadata=option(
            "Local tokenizer.json (Hugging Face tokenizers) to count prompt tokens exactly, and each response's "
            "streamed text (checked against the server's usage)",
            startup_only=True,
        )
    )
    dataset: str = field(
        metadata=option(
            "Prompt file: .jsonl, .json (ShareGPT conversations) or .csv; or a built-in set with known answers, "
            "generated from --seed: builtin:arithmetic, builtin:choice or builtin:json (N items: builtin:NAME:N)",
            startup_only=True,
        )
    )
    dataset_format: str = field(
        metadata=option("Format of --dataset (default: from its extension)", choices=DATASET_FORMATS, or_blank=True)
    )
    response_format: str = field(
        metadata=option(
            "Ask for structured output in each API's own field (chat response_format, Responses text.format, text "
            "completions the server family's): json_schema (--schema FILE, or each dataset row's schema) or "
            "json_object; the answers are scored for validity",
            choices=RESPONSE_FORMATS,
            or_blank=True,
        )
    )
    schema: str = field(
        metadata=option(
            "JSON schema file sent with --response-format json_schema (a dataset row's own schema wins)",
            startup_only=True,
        )
    )
    image: tuple[str, ...] = field(
        metadata=option("Image file attached to every chat request (repeatable)", None, repeat=True, startup_only=True)
    )
    image_size: tuple[int, int] | None = field(
        metadata=option("Attach a generated WIDTHxHEIGHT PNG to every chat request")
    )
    embedding_batch: int = field(
        metadata=option(
            "Inputs per request of an API that counts inputs: embeddings' texts, a reranker's documents",
            1,
            check=at_least(1),
        )
    )
    session_turns: LengthDist = field(
        metadata=option(
            "Turns of each synthetic session (N or a distribution like --prompt-tokens): each turn sends the whole "
            "history, the answers as returned, plus a new --prompt-tokens user message; 1: one-turn requests",
            "1",
        )
        | shown_as(str)
    )
    think_time_s: DurationDist = field(
        metadata=option(
            "Pause before each later turn of a session, seconds: S, uniform:MIN,MAX, exponential:MEAN or "
            "lognormal:MEAN,SD",
            "0",
        )
        | shown_as(str)
    )
    tools: int = field(
        metadata=option(
            "Agent sessions (locustfiles/agent.py): N synthetic function schemas in every request's tools (seeded by "
            "--seed; the APIs with tool forms, docs/apis.md)",
            0,
            check=at_least(0, "0: none"),
        )
    )
    tools_file: str = field(
        metadata=option(
            "Agent sessions: tool sets from a JSON Lines file, one per line (BFCL entries with 'function', "
            '{"tools": [...]}, or one function schema per line); each session draws one',
            startup_only=True,
        )
    )
    tool_result_tokens: LengthDist = field(
        metadata=option("Agent sessions: length of each tool result sent back, in tokens: N or a distribution", "128")
        | shown_as(str)
    )
    tool_latency_ms: LengthDist = field(
        metadata=option(
            "Agent sessions: time a tool takes before its result is sent back, ms: 0, N or a distribution (e.g. "
            "lognormal:300,200)",
            "0",
        )
        | shown_as(str)
    )
    max_agent_steps: int = field(
        metadata=option(
            "Agent sessions: most requests per session; it ends earlier when an answer has no tool call",
            8,
            check=at_least(1),
        )
    )
    model_mix: ModelMix = field(
        default=ModelMix(),
        metadata=option(
            "Several models in one run, e.g. base=3,lora1=1: each request names one, drawn by weight (seeded by "
            "--seed); a 'model' breakdown in the results. Excludes --model"
        )
        | shown_as(str),
    )

    @classmethod
    def from_options(cls, options: Any) -> WorkloadSettings:
        """Validated from `options`; ConfigError naming the bad option."""
        extra_body: dict[str, Any] = {}
        if options.extra_body:
            try:
                extra_body = orjson.loads(options.extra_body)
            except orjson.JSONDecodeError as e:
                raise ConfigError(f"--extra-body is not valid JSON: {e}") from None
            if not isinstance(extra_body, dict):
                raise ConfigError("--extra-body must be a JSON object, e.g. '{\"temperature\": 0}'")
        if options.prefix_pool > 1 and not options.prefix_tokens:
            raise ConfigError(
                f"--prefix-pool {options.prefix_pool} needs --prefix-tokens T (the length of each prefix)"
            )
        name = options.session_header
        if ":" in name or any(c.isspace() for c in name):
            raise ConfigError(f"--session-header {name!r}: expected a header name, without ':' or spaces")
        if options.tokenizer:
            token_counter(options.tokenizer)  # a bad file fails now, with its name
        if options.dataset:
            load_dataset(options.dataset, options.dataset_format, optional_int(options.seed, "--seed"))
            if options.response_format == "json_schema" and not options.schema:
                _check_row_schemas(options.dataset, options.dataset_format, optional_int(options.seed, "--seed"))
            if options.sweep_prompt_tokens:
                raise ConfigError(
                    "--sweep-prompt-tokens and --dataset exclude each other: the dataset sets the prompts"
                )
        if options.schema:
            if options.response_format != "json_schema":
                raise ConfigError("--schema goes with --response-format json_schema (the schema the answers must "
                                  "satisfy)")  # fmt: skip
            load_schema(options.schema)
        elif options.response_format == "json_schema" and not options.dataset:
            raise ConfigError("--response-format json_schema needs --schema FILE, or a --dataset whose every row has "
                              "a 'schema' (e.g. builtin:json)")  # fmt: skip
        model_mix = parse_model_mix(options.model_mix)
        if model_mix and options.model:
            raise ConfigError(
                f"--model-mix and --model {options.model} exclude each other: the mix names every request's model"
            )
        session_turns = parse_length(options.session_turns, "--session-turns")
        if str(session_turns) != "1" and (options.dataset or options.trace):
            source = "--dataset" if options.dataset else "--trace"
            raise ConfigError(f"--session-turns and {source} exclude each other: the {source[2:]}'s conversations "
                              "set the turns")  # fmt: skip
        if options.tools and options.tools_file:
            raise ConfigError("--tools and --tools-file exclude each other: synthetic tools, or a file's")
        if options.tools_file:
            load_tool_sets(options.tools_file)  # a bad file fails now, with its name and line
        images = tuple(as_list(options.image))
        for path in images:
            file_data_url(path)
        return build(
            cls,
            options,
            extra_body=extra_body,
            seed=optional_int(options.seed, "--seed"),
            temperature=optional_float(options, "temperature"),
            prompt_tokens=parse_length(options.prompt_tokens, "--prompt-tokens"),
            max_tokens=parse_length(options.max_tokens, "--max-tokens"),
            session_turns=session_turns,
            think_time_s=parse_duration(options.think_time_s, "--think-time-s"),
            image=images,
            image_size=parse_size(options.image_size) if options.image_size else None,
            model_mix=model_mix,
            tool_result_tokens=parse_length(options.tool_result_tokens, "--tool-result-tokens"),
            tool_latency_ms=LengthDist("fixed", 0) if str(options.tool_latency_ms).strip() in ("0", "") else
            parse_length(options.tool_latency_ms, "--tool-latency-ms"),
        )  # fmt: skip

    @property
    def response_schema(self) -> Mapping[str, Any] | None:
        """The `--schema` file's JSON schema (None without one)."""
        return load_schema(self.schema) if self.schema else None

    @property
    def tool_sets(self) -> tuple[ToolSet, ...]:
        """The tool sets a session draws from: the --tools-file's, or one of --tools synthetic tools; () without
        tools."""
        if self.tools_file:
            return load_tool_sets(self.tools_file)
        return (synthetic_tools(self.tools, self.seed),) if self.tools else ()


def _check_row_schemas(dataset: str, fmt: str, seed: int | None) -> None:
    """ConfigError unless every request of `dataset` carries a reference with a JSON schema (what --response-format
    json_schema sends without --schema)."""
    for conversation in load_dataset(dataset, fmt, seed):
        for request in conversation:
            reference = request.get(REFERENCE)
            if reference is None or reference.schema is None:
                raise ConfigError(f"--response-format json_schema: a row of --dataset {dataset} has no 'schema'; "
                                  "give --schema FILE for the rows without one")  # fmt: skip
