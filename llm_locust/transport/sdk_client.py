"""The openai SDK as the client (`--client openai-sdk`): what application code sees, same records.

The request goes through `openai.OpenAI` / `openai.AzureOpenAI` (`max_retries=0`, timeouts from
the settings; the whole-request timeout from the same watchdog as the fast client); each chunk
the SDK yields is timestamped when the SDK hands it over — after its own HTTP reading, SSE
parsing and pydantic model building, which is the point: fidelity with application code, at a
CPU cost per event measured in benchmarks/sdk_client_cost.py. The chunk is interpreted by
`protocol.apply_chunk` like the fast client's, into the same record, which its caller reports like the fast
client's (`runtime.route.report`).

Paths: the SDK's own — `{host}/v1/...` (openai-compatible, openai), Azure's deployments path,
and for Databricks `{host}/serving-endpoints/chat/completions` with the endpoint as the model
(the SDK cannot call `/invocations`).
"""

from __future__ import annotations

from operator import attrgetter
from time import perf_counter
from typing import Any

import openai
import orjson

from llm_locust.metrics.protocol import apply_chunk, finish
from llm_locust.metrics.record import ErrorKind, RequestRecord
from llm_locust.metrics.stream_text import TokenCounter, keep_text
from llm_locust.redact import redact
from llm_locust.transport.client import status_kind
from llm_locust.transport.endpoint_settings import EndpointSettings
from llm_locust.transport.redirects import is_redirect, redirect_reason
from llm_locust.transport.request import Prepared
from llm_locust.transport.settings import TimeoutSettings
from llm_locust.transport.timeouts import TimeoutWatchdog
from llm_locust.transport.tls import client_context, tls_problem


class SdkTransport:
    """One user's openai SDK client: `send(prepared)` sends one request and returns its record (`request.Transport`).

    `host`: the user's (with several replicas, the first: the SDK is built for one base URL, so it sends there and
    `prepared.replica` is not used; cancellation is the fast client's, refused with this one); `endpoint`: the API
    key, extra headers, provider, TLS trust; `watchdog`: the whole-request timeout, as for the fast client;
    `counter` (--tokenizer): counts the streamed text.
    """

    def __init__(
        self,
        host: str,
        endpoint: EndpointSettings,
        timeouts: TimeoutSettings,
        watchdog: TimeoutWatchdog,
        counter: TokenCounter | None,
    ) -> None:
        host = host.rstrip("/")
        common: dict[str, Any] = {
            "api_key": endpoint.api_key or "none",
            "max_retries": 0,
            "timeout": openai.Timeout(
                timeouts.request_timeout_s, connect=timeouts.connect_timeout_s, read=timeouts.read_timeout_s
            ),
            "default_headers": dict(endpoint.header),
            # the fast client's trust store; httpx reads HTTPS_PROXY / HTTP_PROXY / NO_PROXY itself
            "http_client": openai.DefaultHttpxClient(
                verify=client_context(endpoint.ca_bundle, endpoint.insecure), follow_redirects=False
            ),  # no redirect followed (`redirects`)
        }
        if endpoint.provider == "azure":
            self.sdk: Any = openai.AzureOpenAI(
                azure_endpoint=host, azure_deployment=endpoint.deployment, api_version=endpoint.api_version, **common
            )
        else:
            base = "/serving-endpoints" if endpoint.provider == "databricks" else "/v1"
            self.sdk = openai.OpenAI(base_url=host + base, **common)
        self.host = host
        self.watchdog = watchdog
        self.counter = counter

    def send(self, prepared: Prepared) -> RequestRecord:
        """Send `prepared` with the SDK (its API's `sdk_method`; its headers as the SDK's extra headers), read its
        stream to the end; return its finished record."""
        sent = prepared.api  # one the SDK sends (`check_api`): its method and the body fields it takes as arguments
        keep_answer = prepared.spec.keep_answer
        body = orjson.loads(prepared.spec.body)
        arguments = {key: body.pop(key) for key in sent.sdk_arguments}
        if prepared.headers:
            arguments["extra_headers"] = dict(prepared.headers)
        create = attrgetter(f"{sent.sdk_method}.create")(self.sdk)
        watchdog = self.watchdog
        if prepared.wait_due is not None:
            prepared.wait_due()
        record = prepared.record
        record.t_send = perf_counter()  # it leaves now
        watch = watchdog.start(record)
        texts: list[str] | None = [] if self.counter is not None or keep_answer else None
        answer_parts = sent.answer_parts if keep_answer else None
        content: list[str] = []
        reasoning: list[str] = []
        try:
            try:
                for chunk in create(**arguments, extra_body=body):
                    t = perf_counter()
                    watch.t_active_s = t
                    fields = chunk.model_dump(exclude_unset=True)
                    if texts is not None:
                        texts.append(sent.event_text(fields) or "")  # type: ignore[misc]
                    if answer_parts is not None:
                        text, thought = answer_parts(fields)
                        content.append(text or "")
                        reasoning.append(thought or "")
                    if apply_chunk(record, fields, t):
                        break
            except Exception as e:
                record.fail(*_failure(e, self.host))
            watchdog.end(watch)
            finish(record, perf_counter())
            if texts is not None:
                keep_text(record, "".join(texts), self.counter, keep_answer, ("".join(content), "".join(reasoning)))
        finally:
            watchdog.end(watch)
        return record


def _failure(error: Exception, host: str) -> tuple[ErrorKind, str]:
    """Classify an exception raised by the SDK or its HTTP library (`host`: named when its TLS is set up wrong:
    `tls.tls_problem`)."""
    problem = tls_problem(host, error)
    if problem is not None:
        return ErrorKind.TLS, problem
    text = " ".join(redact(f"{type(error).__name__}: {error}").split())[:300]  # redacted before it is cut
    if isinstance(error, openai.APIStatusError) and is_redirect(error.status_code):
        return ErrorKind.REDIRECT, redirect_reason(error.status_code, error.response.headers.get("location"))
    if isinstance(error, openai.APIStatusError):
        return status_kind(error.status_code), text
    if isinstance(error, openai.APITimeoutError) or "Timeout" in type(error).__name__:
        return ErrorKind.TIMEOUT, text
    if isinstance(error, openai.APIConnectionError):
        return ErrorKind.CONNECT, text
    if isinstance(error, openai.APIError):  # an error object inside the stream
        return ErrorKind.STREAM_ERROR, text
    if isinstance(error, OSError) or type(error).__module__.startswith("httpx"):
        return ErrorKind.TRANSPORT, text
    return ErrorKind.BAD_STREAM, text
