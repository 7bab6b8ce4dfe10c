"""A --metrics-url's credentials are sent as the request's transport sends --host's: percent-decoded Basic auth (the
value the secrets registry knows), never in the URL fetched; never to where a redirect points."""

from __future__ import annotations

import base64

from gevent.pywsgi import WSGIServer
from harness.recording_server import RecordingServer

from llm_locust.scrape.scraper import ServerScraper, UrlState, _request
from llm_locust.scrape.server_maps import all_maps


def test_metrics_url_credentials_are_decoded_into_basic_auth():
    request = _request("http://user:Sec'ret&%3C%3E%22%25%20Pw@127.0.0.1:9/metrics")
    assert request.full_url == "http://127.0.0.1:9/metrics"
    token = request.get_header("Authorization").removeprefix("Basic ")
    assert base64.b64decode(token).decode() == "user:Sec'ret&<>\"% Pw"


def test_a_redirected_scrape_is_a_failure_and_its_credentials_go_nowhere(tmp_path):
    """A --metrics-url answering 307 to another port: the scrape fails (HTTP 307) and the other port gets nothing — the
    Basic credentials would go with a followed redirect."""
    with RecordingServer() as target:
        redirector = WSGIServer(("127.0.0.1", 0), _redirect_to(target.url), log=None, error_log=None)
        redirector.start()
        try:
            scraper = ServerScraper(tmp_path, (), 1.0, all_maps(), 0.0)
            state = UrlState(f"http://user:pw-secret-1@127.0.0.1:{redirector.server_port}/metrics")
            scraper.scrape_url(state)
            scraper.close()
        finally:
            redirector.stop(timeout=0)
        assert target.requests == []
    assert (state.ok, state.failed) == (0, 1) and "307" in (state.last_error or ""), state.last_error


def _redirect_to(url: str):
    def app(_environ, start_response):
        start_response("307 Temporary Redirect", [("Location", url + "/metrics"), ("Content-Length", "0")])
        return [b""]

    return app
