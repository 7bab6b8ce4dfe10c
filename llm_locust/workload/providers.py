"""Which API each provider serves and where, and the fields that set an output's length per server family.

APIs (the user class's endpoint, registered in `apis.APIS`): each `Api` gives its path per provider, its
length field and whether a field can force the output length (`messages` has none, so `--ignore-eos` is
refused), and whether the openai SDK sends it; `check_api` refuses the combinations that cannot work before
the test starts. The providers themselves, their auth and the server families: `transport.providers`.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from llm_locust.apis import APIS, BUILT_IN, api
from llm_locust.errors import ConfigError


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
    if provider not in served.paths:  # what the provider serves instead, from the APIs' paths, and the fix
        serves = [f"{a.title} (locustfiles/{a.endpoint}.py)" if a in BUILT_IN else a.title
                  for a in APIS.values() if provider in a.paths]  # fmt: skip
        fix = (
            "use --provider openai-compatible with the base URL that serves it"
            if "openai-compatible" in served.paths
            else f"{name} needs " + " or ".join(f"--provider {p}" for p in served.paths)
        )
        raise ConfigError(f"--provider {provider} does not serve {name}: it serves {', '.join(serves)} only; {fix}")
    if ignore_eos and not served.forces_length:
        raise ConfigError(
            f"--ignore-eos: {name} has no request field that forces the output length; drop --ignore-eos, "
            "outputs will stop at end-of-sequence or max_tokens"
        )
    if tools and served.tools is None:
        raise ConfigError(
            f"--tools / --tools-file: {name} takes no tools; use one that does: "
            + ", ".join(entry.title for entry in APIS.values() if entry.tools is not None)
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
