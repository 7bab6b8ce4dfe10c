"""Bedrock's SigV4 signing (`transport.sigv4`): the region, the up-front credential check, and signatures that the
simulator's verifier (botocore recomputing them from the test credential) accepts — and refuses when anything
signed changes; refreshable credentials are read again at each signature."""

from datetime import UTC, datetime, timedelta

import pytest
from botocore.credentials import Credentials, RefreshableCredentials

from llm_locust import redact
from llm_locust.errors import ConfigError
from llm_locust.sim.sigv4 import AwsError, Credential, verify
from llm_locust.transport import sigv4

ACCESS_KEY = "AKIAIOSFODNN7EXAMPLE"
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
TOKEN = "FwoGZXIvYXdzEJr//////////wEaDPlanted+Session/Token=="
URL = "http://127.0.0.1:8123/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse-stream"
BODY = b'{"messages":[{"role":"user","content":[{"text":"Hi"}]}],"inferenceConfig":{"maxTokens":8}}'


@pytest.fixture
def aws_env(monkeypatch, tmp_path):
    """An environment with no AWS credentials, profile or region of the machine's (and no instance metadata)."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
                 "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return monkeypatch


def received(headers, url=URL):
    """The headers as the simulator parses them: lower-case names, the Host the client sends."""
    seen = {name.lower(): value for name, value in headers.items()}
    seen["host"] = url.split("/")[2]
    return seen


def test_region_from_the_option_the_host_or_the_environment(aws_env):
    assert sigv4.region("https://bedrock-runtime.eu-west-3.amazonaws.com", "us-east-2") == "us-east-2"
    assert sigv4.region("https://bedrock-runtime.eu-west-3.amazonaws.com", "") == "eu-west-3"
    assert sigv4.region("https://bedrock-runtime-fips.us-gov-west-1.amazonaws.com", "") == "us-gov-west-1"
    with pytest.raises(ConfigError, match="no AWS region: pass --aws-region"):
        sigv4.region("http://127.0.0.1:8000", "")
    aws_env.setenv("AWS_DEFAULT_REGION", "ap-south-1")
    assert sigv4.region("http://127.0.0.1:8000", "") == "ap-south-1"
    aws_env.setenv("AWS_REGION", "ca-central-1")
    assert sigv4.region("http://127.0.0.1:8000", "") == "ca-central-1"


def test_missing_or_malformed_credentials_name_what_to_set(aws_env):
    with pytest.raises(ConfigError, match="no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"):
        sigv4.check_credentials()
    aws_env.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    aws_env.setenv("AWS_SECRET_ACCESS_KEY", SECRET[:-1] + " ")
    with pytest.raises(ConfigError, match="secret access key is malformed") as refused:
        sigv4.check_credentials()
    assert SECRET[:-1] not in str(refused.value)
    assert SECRET[:-1] not in redact.redact(f"x {SECRET[:-1]} y")
    aws_env.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    aws_env.setenv("AWS_ACCESS_KEY_ID", "akia lower")
    with pytest.raises(ConfigError, match="access key id is malformed"):
        sigv4.check_credentials()
    aws_env.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    aws_env.setenv("AWS_SESSION_TOKEN", "a token")
    with pytest.raises(ConfigError, match="session token is empty or holds whitespace"):
        sigv4.check_credentials()
    aws_env.setenv("AWS_SESSION_TOKEN", TOKEN)
    sigv4.check_credentials()
    assert redact.redact(TOKEN) == redact.REDACTED
    aws_env.setenv("AWS_PROFILE", "no-such-profile")
    with pytest.raises(ConfigError, match="cannot be read"):
        sigv4.check_credentials()


def test_a_signature_the_verifier_accepts_and_what_it_refuses():
    signer = sigv4.SigV4Signer(Credentials(ACCESS_KEY, SECRET, TOKEN), "us-east-1")
    headers = received(signer.headers("POST", URL, BODY))
    assert headers["x-amz-security-token"] == TOKEN
    path = URL.split("8123", 1)[1]
    with_token = Credential(ACCESS_KEY, SECRET, TOKEN)
    verify(with_token, "POST", path, "", headers, BODY)
    refusals = [
        (Credential(ACCESS_KEY, SECRET[::-1], TOKEN), path, headers, BODY, "InvalidSignatureException"),
        (with_token, path, headers, BODY + b" ", "InvalidSignatureException"),
        (with_token, path.replace("haiku", "sonnet"), headers, BODY, "InvalidSignatureException"),
        (with_token, path, {**headers, "host": "127.0.0.1:8124"}, BODY, "InvalidSignatureException"),
        (Credential("AKIAOTHERKEY00000000", SECRET, TOKEN), path, headers, BODY, "UnrecognizedClientException"),
        (Credential(ACCESS_KEY, SECRET, TOKEN + "x"), path, headers, BODY, "UnrecognizedClientException"),
        (with_token, path, {"host": headers["host"]}, BODY, "MissingAuthenticationTokenException"),
    ]
    for credential, sent_path, sent_headers, body, kind in refusals:
        with pytest.raises(AwsError) as refused:
            verify(credential, "POST", sent_path, "", sent_headers, body)
        assert (refused.value.status, refused.value.type) == (403, kind)
    later = datetime.now(UTC) + timedelta(minutes=6)
    with pytest.raises(AwsError, match="Signature expired"):
        verify(with_token, "POST", path, "", headers, BODY, now=later)


def test_refreshable_credentials_are_read_again_at_each_signature():
    keys = iter(["AKIAFIRSTKEY00000000", "AKIASECONDKEY0000000", "AKIATHIRDKEY00000000"])

    def refresh():
        soon = datetime.now(UTC) + timedelta(seconds=1)  # inside botocore's refresh window: refreshed at each read
        return {"access_key": next(keys), "secret_key": SECRET, "token": TOKEN, "expiry_time": soon.isoformat()}

    credentials = RefreshableCredentials.create_from_metadata(refresh(), refresh, "test")
    signer = sigv4.SigV4Signer(credentials, "us-east-1")
    first = signer.headers("POST", URL, BODY)["Authorization"]
    second = signer.headers("POST", URL, BODY)["Authorization"]
    assert "Credential=AKIASECONDKEY0000000/" in first
    assert "Credential=AKIATHIRDKEY00000000/" in second
