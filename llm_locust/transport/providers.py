"""Who is on the other end: the providers (`--provider`), their auth and headers, and the server families.

Providers: `openai-compatible` (any base URL: vLLM, SGLang, TGI, llama.cpp, ...),
`openai`, `azure` (deployment + api-version in the path, `api-key` header), `databricks`
(serving endpoint invocations, bearer token), `anthropic` (the Messages API only: `x-api-key`
and `anthropic-version` headers), `gemini` (the Gemini API's `streamGenerateContent` only: the `x-goog-api-key`
header, from GOOGLE_API_KEY or GEMINI_API_KEY as Google's SDK reads them) and `vertex` (Vertex AI: its
OpenAI-compatible chat completions and Gemini's `streamGenerateContent`, the project and location in the path,
`--vertex-project`, `--vertex-location`) and `bedrock` (Amazon Bedrock's runtime: its OpenAI-compatible chat
completions under `/openai/v1` and its own streaming API, with a Bedrock API key as bearer token or else a SigV4
signature per request, `sigv4`). The short-lived bearer tokens of azure (Entra ID), databricks (OAuth M2M)
and vertex (Google OAuth) are `tokens`'. Which API each provider serves, at which path: `workload.providers`.

Server families (`--server-family`) say which request fields make an output exactly
`max_tokens` long when `--ignore-eos` is given (`workload.providers.length_fields`) — checked against each server's
source: vLLM and SGLang read `ignore_eos` and `min_tokens`; llama.cpp's server reads `ignore_eos` and
`n_predict`; TGI's and OpenAI's chat APIs have no such field (nothing can force the length).
OpenAI's reasoning models reject `max_tokens` on chat: the `openai` family sends
`max_completion_tokens` instead. llama.cpp's server closes the connection after every streamed
response although its headers offer keep-alive: the fast client sends a request that met such a
stale connection (closed before any byte of the response) once more on a new connection
(`client.FastTransport`, counted as `connections.retried_stale`), so no family needs
`Connection: close`.
"""

from __future__ import annotations

from llm_locust.errors import ConfigError

PROVIDERS = ("openai-compatible", "openai", "azure", "databricks", "anthropic", "gemini", "vertex", "bedrock")
FAMILIES = ("vllm", "sglang", "llamacpp", "tgi", "openai", "anthropic")
API_KEY_ENV = {"openai-compatible": "OPENAI_API_KEY", "openai": "OPENAI_API_KEY", "azure": "AZURE_OPENAI_API_KEY",
               "databricks": "DATABRICKS_TOKEN", "anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY",
               "vertex": "GOOGLE_OAUTH_ACCESS_TOKEN", "bedrock": "AWS_BEARER_TOKEN_BEDROCK"}  # fmt: skip
KEY_ENV_FIRST = {"gemini": "GOOGLE_API_KEY"}
"""A provider's variable read before its `API_KEY_ENV` one when it is set (Google's SDK prefers GOOGLE_API_KEY)."""
KEY_REQUIRED = ("gemini",)
"""Providers that answer no request without an API key and have no other auth here: refused at start without one."""
ANTHROPIC_VERSION = "2023-06-01"
"""The `anthropic-version` header sent with `--provider anthropic` (the Messages API's stable version)."""
_DEFAULT_FAMILY = {"openai-compatible": "vllm", "openai": "openai", "azure": "openai", "databricks": "openai",
                   "anthropic": "anthropic", "gemini": "openai", "vertex": "openai", "bedrock": "openai"}  # fmt: skip
NO_MODEL_LIST = {"gemini": "gemini-2.5-flash", "vertex": "gemini-2.5-flash"}
"""Providers with no `/v1/models` list to take a default model from (Google's), with a model id as an example:
`--model` (or `--model-mix`) is needed (Bedrock's too: `endpoint_settings` asks for it naming Bedrock's model ids)."""
_NO_LENGTH_CONTROL = {
    "tgi": "TGI",
    "openai": "OpenAI (and Azure OpenAI, Databricks, Google, Bedrock)",
    "anthropic": "Anthropic",
}


def key_variables(provider: str) -> tuple[str, ...]:
    """The environment variables `provider`'s API key is read from when --api-key-env names none, in order."""
    return (*((KEY_ENV_FIRST[provider],) if provider in KEY_ENV_FIRST else ()), API_KEY_ENV[provider])


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


def provider_headers(provider: str) -> dict[str, str]:
    """Request headers the provider needs besides auth (`anthropic`: `anthropic-version`, also without a key)."""
    return {"anthropic-version": ANTHROPIC_VERSION} if provider == "anthropic" else {}


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
