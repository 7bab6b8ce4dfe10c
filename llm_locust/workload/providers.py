"""Who is on the other end: request paths and auth per provider, length-control fields per server.

Providers (`--provider`): `openai-compatible` (any base URL: vLLM, SGLang, TGI, llama.cpp, ...),
`openai`, `azure` (deployment + api-version in the path, `api-key` header), `databricks`
(serving endpoint invocations, bearer token), `anthropic` (the Messages API only: `x-api-key`
and `anthropic-version` headers), `gemini` (the Gemini API's `streamGenerateContent` only: the `x-goog-api-key`
header, from GOOGLE_API_KEY or GEMINI_API_KEY as Google's SDK reads them) and `vertex` (Vertex AI: its
OpenAI-compatible chat completions and Gemini's `streamGenerateContent`, the project and location in the path,
`--vertex-project`, `--vertex-location`) and `bedrock` (Amazon Bedrock's runtime: its OpenAI-compatible chat
completions under `/openai/v1` and its ConverseStream API, with a Bedrock API key as bearer token or else a SigV4
signature per request, `transport.sigv4`). The short-lived bearer tokens of azure (Entra ID), databricks (OAuth M2M)
and vertex (Google OAuth) are `transport.tokens`'.

APIs (the user class's endpoint, registered in `apis.APIS`): each `Api` gives its path per provider, its
length field and whether a field can force the output length (`messages` has none, so `--ignore-eos` is
refused), and whether the openai SDK sends it; `check_api` refuses the combinations that cannot work before
the test starts.

Server families (`--server-family`) say which request fields make an output exactly
`max_tokens` long when `--ignore-eos` is given — checked against each server's source:
vLLM and SGLang read `ignore_eos` and `min_tokens`; llama.cpp's server reads `ignore_eos` and
`n_predict`; TGI's and OpenAI's chat APIs have no such field (nothing can force the length).
OpenAI's reasoning models reject `max_tokens` on chat: the `openai` family sends
`max_completion_tokens` instead. llama.cpp's server closes the connection after every streamed
response although its headers offer keep-alive: the fast client sends a request that met such a
stale connection (closed before any byte of the response) once more on a new connection
(`transport.client.FastTransport`, counted as `connections.retried_stale`), so no family needs
`Connection: close`.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from llm_locust.apis import api
from llm_locust.errors import ConfigError

PROVIDERS = ("openai-compatible", "openai", "azure", "databricks", "anthropic", "gemini", "vertex", "bedrock")
FAMILIES = ("vllm", "sglang", "llamacpp", "tgi", "openai", "anthropic")
API_KEY_ENV = {"openai-compatible": "OPENAI_API_KEY", "openai": "OPENAI_API_KEY", "azure": "AZURE_OPENAI_API_KEY",
               "databricks": "DATABRICKS_TOKEN", "anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY",
               "vertex": "GOOGLE_OAUTH_ACCESS_TOKEN", "bedrock": "AWS_BEARER_TOKEN_BEDROCK"}  # fmt: skip
KEY_ENV_FIRST = {"gemini": "GOOGLE_API_KEY"}
"""A provider's variable read before its `API_KEY_ENV` one when it is set (Google's SDK prefers GOOGLE_API_KEY)."""
ANTHROPIC_VERSION = "2023-06-01"
"""The `anthropic-version` header sent with `--provider anthropic` (the Messages API's stable version)."""
_DEFAULT_FAMILY = {"openai-compatible": "vllm", "openai": "openai", "azure": "openai", "databricks": "openai",
                   "anthropic": "anthropic", "gemini": "openai", "vertex": "openai", "bedrock": "openai"}  # fmt: skip
NO_MODEL_LIST = ("gemini", "vertex")
"""Providers with no `/v1/models` list to take a default model from (Google's): `--model` (or `--model-mix`) is
needed (Bedrock's too: `transport.endpoint_settings` asks for it naming Bedrock's model ids)."""
_NO_LENGTH_CONTROL = {
    "tgi": "TGI",
    "openai": "OpenAI (and Azure OpenAI, Databricks, Google, Bedrock)",
    "anthropic": "Anthropic",
}


def server_family(family: str, provider: str) -> str:
    """The family to use: `family` if given, else the provider's usual one."""
    return family or _DEFAULT_FAMILY[provider]


def check_length_control(family: str, ignore_eos: bool) -> None:
    """ConfigError if `--ignore-eos` asks for exact output lengths the family cannot give."""
    if ignore_eos and family in _NO_LENGTH_CONTROL:
        raise ConfigError(
            f"--ignore-eos: {_NO_LENGTH_CONTROL[family]} has no request field that forces the output length "
            f"(--server-family {family}); drop --ignore-eos, outputs will stop at end-of-sequence or max_tokens"
        )


def check_api(
    provider: str,
    family: str,
    endpoint: str,
    ignore_eos: bool,
    client: str,
    tools: bool = False,
    response_format: str = "",
) -> None:
    """ConfigError if `endpoint` (the locustfile's API) cannot be measured with these options (`tools`: its requests
    carry --tools / --tools-file; `response_format`: --response-format's kind, "" for none)."""
    served = api(endpoint)
    name = served.title
    if provider not in served.paths:
        if provider == "anthropic":
            raise ConfigError(
                f"--provider anthropic serves the Messages API only, not {name}: run -f locustfiles/messages.py"
            )
        if provider == "gemini":
            raise ConfigError(
                f"--provider gemini serves {api('gemini').title} only, not {name}: run -f locustfiles/gemini.py"
            )
        if endpoint == "gemini":
            raise ConfigError(f"{name} needs --provider gemini (the Gemini API) or --provider vertex (Vertex AI)")
        if len(served.paths) == 1:  # an API of one provider (Bedrock's ConverseStream)
            raise ConfigError(f"{name} needs --provider {next(iter(served.paths))}")
        if provider == "bedrock":
            raise ConfigError(
                f"--provider bedrock serves chat completions and ConverseStream, not {name}: run -f "
                "locustfiles/chat.py or -f locustfiles/converse.py"
            )
        raise ConfigError(
            f"--provider {provider} does not serve {name} under a deployment: use --provider openai-compatible with "
            "the base URL that serves it"
        )
    if ignore_eos and not served.forces_length:
        raise ConfigError(
            f"--ignore-eos: {name} has no request field that forces the output length; drop --ignore-eos, "
            "outputs will stop at end-of-sequence or max_tokens"
        )
    if tools and served.tools is None:
        raise ConfigError(
            f"--tools / --tools-file: {name} takes no tools; use chat, the Responses, Messages or Gemini API"
        )
    if response_format:
        if served.response_format is None:
            raise ConfigError(f"--response-format: {name} takes no structured output; use chat, text completions or "
                              "the Responses API")  # fmt: skip
        served.response_format(response_format, {}, family)  # ConfigError when the family's server takes none
    if client != "fast" and not served.sdk_method:
        raise ConfigError(f"--client {client} measures chat and text completions only, not {name}: use --client fast")


def length_fields(family: str, endpoint: str, max_tokens: int, ignore_eos: bool) -> dict[str, Any]:
    """The body fields of `endpoint` that set the output length (`max_tokens` tokens, exactly if `ignore_eos`);
    none for an API without an output length."""
    served = api(endpoint)
    if not served.max_tokens_field:
        return {}
    name = served.family_max_tokens_fields.get(family, served.max_tokens_field)
    outer, dot, inner = name.partition(".")  # a nested field: {"generationConfig": {"maxOutputTokens": N}}
    fields: dict[str, Any] = {outer: {inner: max_tokens} if dot else max_tokens}
    if ignore_eos and served.forces_length:
        if family in ("vllm", "sglang"):
            fields.update(ignore_eos=True, min_tokens=max_tokens)
        elif family == "llamacpp":
            fields.update(ignore_eos=True, n_predict=max_tokens)
    return fields


def provider_headers(provider: str) -> dict[str, str]:
    """Request headers the provider needs besides auth (`anthropic`: `anthropic-version`, also without a key)."""
    return {"anthropic-version": ANTHROPIC_VERSION} if provider == "anthropic" else {}


def completion_path(
    provider: str, endpoint: str, deployment: str = "", api_version: str = "", project: str = "", location: str = ""
) -> str:
    """The path (and query) to POST requests of `endpoint` to (`check_api` has refused the impossible ones); a `{model}`
    in it stays, filled per request (`model_path`)."""
    path = api(endpoint).paths[provider]
    return path.format(deployment=quote(deployment, safe=""), api_version=quote(api_version, safe=""),
                       project=quote(project, safe=""), location=quote(location, safe=""), model="{model}")  # fmt: skip


def model_path(path: str, model: str) -> str:
    """`path` (`completion_path`'s) with its `{model}`, if any, filled in with `model`, URL-quoted."""
    return path.replace("{model}", quote(model, safe="")) if "{model}" in path else path


def auth_headers(provider: str, api_key: str) -> dict[str, str]:
    """The authentication header for `provider` (none without a key)."""
    if not api_key:
        return {}
    if provider == "azure":
        return {"api-key": api_key}
    if provider == "anthropic":
        return {"x-api-key": api_key}
    if provider == "gemini":
        return {"x-goog-api-key": api_key}
    return {"Authorization": f"Bearer {api_key}"}


def parse_header(text: str) -> tuple[str, str]:
    """'Name: value' -> (name, value); ConfigError naming --header (the value is never shown)."""
    name, colon, value = text.partition(":")
    name = name.strip()
    if not colon or not name or any(c.isspace() for c in name):
        raise ConfigError("--header: expected 'Name: value' with a name without spaces (the value is not shown)")
    return name, value.strip()
