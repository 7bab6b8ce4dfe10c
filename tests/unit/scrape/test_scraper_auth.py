"""A --metrics-url's credentials are sent as the request's transport sends --host's: percent-decoded Basic auth (the
value the secrets registry knows), never in the URL fetched."""

from __future__ import annotations

import base64

from llm_locust.scrape.scraper import _request


def test_metrics_url_credentials_are_decoded_into_basic_auth():
    request = _request("http://user:Sec'ret&%3C%3E%22%25%20Pw@127.0.0.1:9/metrics")
    assert request.full_url == "http://127.0.0.1:9/metrics"
    token = request.get_header("Authorization").removeprefix("Basic ")
    assert base64.b64decode(token).decode() == "user:Sec'ret&<>\"% Pw"
