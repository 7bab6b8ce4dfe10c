"""The simulator as Bedrock's runtime over loopback: ConverseStream's route (the model in the path, fields Bedrock
refuses), its event-stream answer as botocore reads it, and `--sigv4`'s refusals in AWS's error shape, counted."""

from __future__ import annotations

import http.client
import json
from urllib.parse import quote

from botocore.credentials import Credentials
from botocore.eventstream import EventStreamBuffer

from llm_locust.sim import run_sim
from llm_locust.transport.sigv4 import SigV4Signer

MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
ACCESS_KEY, SECRET = "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
BODY = {"messages": [{"role": "user", "content": [{"text": "one two three"}]}], "system": [{"text": "be brief"}],
        "inferenceConfig": {"maxTokens": 3}}  # fmt: skip


def post(port: int, path: str, body: dict, headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", path, body=json.dumps(body).encode(), headers=headers or {})
    return conn.getresponse()


def signed(port: int, path: str, body: dict, secret: str = SECRET) -> dict[str, str]:
    url = f"http://127.0.0.1:{port}{path}"
    return dict(
        SigV4Signer(Credentials(ACCESS_KEY, secret), "us-east-1").headers("POST", url, json.dumps(body).encode())
    )


def test_converse_stream_answers_in_event_stream_messages_botocore_reads():
    path = f"/model/{quote(MODEL, safe='')}/converse-stream"
    with run_sim("--ttft-ms", "5", "--itl-ms", "1", "--models", MODEL) as sim:
        response = post(sim.port, path, BODY)
        assert response.status == 200 and response.getheader("content-type") == "application/vnd.amazon.eventstream"
        request_id = response.getheader("x-amzn-RequestId")
        buffer = EventStreamBuffer()
        buffer.add_data(response.read())
        messages = [(m.headers[":event-type"], json.loads(m.payload)) for m in buffer]
        refused = post(sim.port, path, {**BODY, "model": MODEL})
        unknown = post(sim.port, "/model/other/converse-stream", BODY)
        (served,) = sim.trace()
    kinds = [kind for kind, _ in messages]
    assert kinds == ["messageStart", *["contentBlockDelta"] * 3, "contentBlockStop", "messageStop", "metadata"]
    assert messages[-2][1] == {"stopReason": "max_tokens"}
    assert messages[-1][1]["usage"] == {"inputTokens": 5, "outputTokens": 3, "totalTokens": 8}
    assert (served["id"], served["model"], served["endpoint"]) == (request_id, MODEL, "converse")
    assert refused.status == 400 and b"extraneous key [model] is not permitted" in refused.read()
    assert unknown.status == 404


def test_sigv4_refusals_in_aws_error_shape_and_counted():
    path = f"/model/{quote(MODEL, safe='')}/converse-stream"
    with run_sim("--ttft-ms", "5", "--itl-ms", "1", "--models", MODEL, "--sigv4", f"{ACCESS_KEY}:{SECRET}") as sim:
        ok = post(sim.port, path, BODY, signed(sim.port, path, BODY))
        ok.read()
        unsigned = post(sim.port, path, BODY)
        wrong = post(sim.port, path, BODY, signed(sim.port, path, BODY, secret=SECRET[::-1]))
        other_body = post(sim.port, path, {**BODY, "system": []}, signed(sim.port, path, BODY))
        bearer = post(sim.port, "/openai/v1/chat/completions", {"messages": []}, {"Authorization": "Bearer x"})
        auth = sim.auth()
    assert ok.status == 200
    for response, kind in ((unsigned, "MissingAuthenticationTokenException"), (wrong, "InvalidSignatureException"),
                           (other_body, "InvalidSignatureException"),
                           (bearer, "MissingAuthenticationTokenException")):  # fmt: skip
        assert response.status == 403 and response.getheader("x-amzn-ErrorType").startswith(f"{kind}:"), kind
        assert set(json.loads(response.read())) == {"message"}
    assert auth == {"verified": 1, "refused": 4}
