"""The workload's settings (`WorkloadSettings`): what each request carries, validated from Locust's parsed options.

Files (dataset, tokenizer, images) are read once here, so that a bad one fails at start with its name. Pure:
`config.settings` assembles it with the other stages' settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from llm_locust.errors import ConfigError
from llm_locust.option_values import as_list, build, optional_int, shown_as
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

    extra_body: dict[str, Any]
    prompt_tokens: LengthDist = field(metadata=shown_as(str))
    max_tokens: LengthDist = field(metadata=shown_as(str))
    ignore_eos: bool
    seed: int | None
    prefix_tokens: int
    prefix_pool: int
    prefix_zipf: float
    session_header: str
    tokenizer: str
    dataset: str
    dataset_format: str
    response_format: str
    schema: str
    image: tuple[str, ...]
    image_size: tuple[int, int] | None
    embedding_batch: int
    session_turns: LengthDist = field(metadata=shown_as(str))
    think_time_s: DurationDist = field(metadata=shown_as(str))
    tools: int
    tools_file: str
    tool_result_tokens: LengthDist = field(metadata=shown_as(str))
    tool_latency_ms: LengthDist = field(metadata=shown_as(str))
    max_agent_steps: int
    model_mix: ModelMix = field(default=ModelMix(), metadata=shown_as(str))

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
        if options.embedding_batch < 1:
            raise ConfigError(f"--embedding-batch must be >= 1, got {options.embedding_batch}")
        if options.prefix_tokens < 0:
            raise ConfigError(f"--prefix-tokens must be >= 0, got {options.prefix_tokens}")
        if options.prefix_pool < 1:
            raise ConfigError(f"--prefix-pool must be >= 1, got {options.prefix_pool}")
        if options.prefix_pool > 1 and not options.prefix_tokens:
            raise ConfigError(
                f"--prefix-pool {options.prefix_pool} needs --prefix-tokens T (the length of each prefix)"
            )
        if not options.prefix_zipf >= 0:
            raise ConfigError(f"--prefix-zipf must be >= 0, got {options.prefix_zipf}")
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
        if options.tools < 0:
            raise ConfigError(f"--tools must be >= 0 (0: none), got {options.tools}")
        if options.tools and options.tools_file:
            raise ConfigError("--tools and --tools-file exclude each other: synthetic tools, or a file's")
        if options.tools_file:
            load_tool_sets(options.tools_file)  # a bad file fails now, with its name and line
        if options.max_agent_steps < 1:
            raise ConfigError(f"--max-agent-steps must be >= 1, got {options.max_agent_steps}")
        images = tuple(as_list(options.image))
        for path in images:
            file_data_url(path)
        return build(
            cls,
            options,
            extra_body=extra_body,
            seed=optional_int(options.seed, "--seed"),
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
