"""The web UI of a real `locust` process is safe to leave running: it listens on loopback unless told otherwise, its
start form sends nothing to a host the operator did not name, it sets no option that reaches a file, a folder, a
URL or a port (every option declared `startup_only`, and Locust's own file options), and no page of another origin
changes its state."""

from __future__ import annotations

import contextlib
import json
import secrets
import select
import socket
import subprocess
import sys
import time

import psutil
import pytest
from conftest import LOCUSTFILE, free_port, read_summary, wait_for
from harness.browser import browser_tools, chromium_page
from harness.output import leaks
from harness.proxy_server import RecordingProxy
from harness.web_ui import http, locust_web_ui, post, post_json, template_args, ui_state, wait_for_page
from locust.argument_parser import get_empty_argument_parser

from llm_locust.config.options import add_arguments
from llm_locust.sim import run_sim

SIM_ARGS = ("--ttft-ms", "5", "--itl-ms", "1", "--output-tokens", "8")
QUIET_S = 4.0
"""How long a listener must see no connection after a refused start."""
FILE_URL_PORT_OPTIONS = {
    "results_dir", "requests_jsonl", "dataset", "image", "tools_file", "tokenizer", "trace", "ca_bundle",
    "metrics_url", "metrics_map", "prometheus_port", "prometheus_host", "allow_host", "web_origin",
}  # fmt: skip
"""The options that name a file, folder, URL or port (declared on their stage's settings), all of which must be
declared start-up only; the test posts every declared one, so an option declared later is covered too."""
LOCUST_FILE_OPTIONS = ("csv_prefix", "html_file", "json_file", "logfile", "web_host", "master_bind_port", "config")
"""Some of Locust's own options that /swarm would otherwise copy into the options."""


def startup_only_options() -> list[str]:
    """The options declared `startup_only` on the stages' settings, read from the parser they are registered on."""
    parser = get_empty_argument_parser()
    add_arguments(parser)
    return [action.dest for action in parser._actions if getattr(action, "startup_only", False)]


def listening_addresses(pid: int, port: int) -> set[str]:
    """The local addresses on which process `pid` listens at TCP `port`."""
    return {
        c.laddr.ip
        for c in psutil.Process(pid).net_connections(kind="tcp")
        if c.status == "LISTEN" and c.laddr.port == port
    }


def other_addresses() -> list[str]:
    """This machine's non-loopback IPv4 addresses."""
    return [
        a.address
        for addresses in psutil.net_if_addrs().values()
        for a in addresses
        if a.family == socket.AF_INET and not a.address.startswith("127.")
    ]


def test_web_ui_listens_on_loopback_by_default_and_says_how_to_expose_it(tmp_path):
    """No --web-host: the process's one listening socket on the web port is 127.0.0.1 (read from the kernel through
    psutil); where the machine has another IPv4 address, a connection to the port there is refused."""
    with run_sim(*SIM_ARGS) as sim:
        command = ["-f", str(LOCUSTFILE), "--host", sim.url, "--results-dir", str(tmp_path)]
        with locust_web_ui(*command, web_host=None) as web:
            wait_for_page(web.url, 30)
            port = int(web.url.rpartition(":")[2])
            addresses = listening_addresses(web.process.pid, port)
            refused = {}
            for address in other_addresses():
                with socket.socket() as probe:
                    probe.settimeout(2)
                    refused[address] = probe.connect_ex((address, port)) != 0
    assert addresses == {"127.0.0.1"}, addresses
    assert all(refused.values()), refused  # {} on a machine with loopback only: the socket's address is the check
    lines = [line for line in web.output.splitlines() if "web UI on " in line]
    assert len(lines) == 1 and f"web UI on 127.0.0.1:{port} only" in lines[0], lines
    assert "--web-host 0.0.0.0 --web-login" in lines[0] and "SSH tunnel" in lines[0]


def test_a_host_typed_into_the_form_that_the_operator_did_not_name_gets_nothing(tmp_path):
    """POST /swarm with the host of a loopback listener that is not --host (alone, or beside --host's): refused in the
    form's answer, no test starts, and the listener sees no connection; /user (the class picker's edit of a user
    class) with that host is refused too. Then the operator's own host starts a test as before."""
    with run_sim(*SIM_ARGS) as sim, socket.socket() as stranger:
        stranger.bind(("127.0.0.1", 0))
        stranger.listen(16)
        foreign = f"http://127.0.0.1:{stranger.getsockname()[1]}"
        command = ["-f", str(LOCUSTFILE), "--host", sim.url, "--results-dir", str(tmp_path), "--api-key", "sk-x"]
        with locust_web_ui(*command) as web:
            ui = web.url
            wait_for_page(ui, 30)
            answers = []
            for host in (foreign, f"{sim.url},{foreign}", foreign.replace("http://", "http://user:pw@")):
                form = {"user_count": 2, "spawn_rate": 2, "host": host, "max_tokens": "8", "api_key": ""}
                answers.append(post(f"{ui}/swarm", form))
            status, _ = post_json(f"{ui}/user", {"user_class_name": "ChatUser", "host": foreign})
            states = [ui_state(ui)]
            pending, _, _ = select.select([stranger], [], [], QUIET_S)  # a connection attempt would be pending
            states.append(ui_state(ui))
            form = {"user_count": 2, "spawn_rate": 2, "host": sim.url, "max_tokens": "8", "interval_s": "1"}
            allowed = post(f"{ui}/swarm", form)
            wait_for(lambda: len(sim.trace()) >= 4, 20, "requests to --host")
            http(f"{ui}/stop", {})
            summary = wait_for(lambda: (tmp_path / "summary.json").exists() and read_summary(tmp_path), 20, "summary")
    for code, answer in answers:
        assert code == 200 and answer["success"] is False, answer  # the form's own answer: Locust's page shows it
        assert answer["message"].startswith(f"host '{foreign}' refused") and "\n" not in answer["message"], answer
        assert "user:pw" not in answer["message"]
    assert status == 400
    assert states == ["ready", "ready"] and pending == []  # nothing started, nothing sent
    assert allowed == (200, {"success": True, "message": "Swarming started", "host": sim.url})
    assert summary["throughput"]["requests_ok"] >= 4 and summary["failures"] == {}


def test_each_startup_only_option_posted_to_swarm_is_refused_and_absent_from_the_form(tmp_path):
    """Every option declared start-up only (and some of Locust's own file options) posted with an otherwise good
    form: HTTP 400, one line naming the field, no test started, no request sent, no file or folder made; none is a
    field of the form. The same form without them starts a test."""
    declared = startup_only_options()
    assert set(declared) >= FILE_URL_PORT_OPTIONS, FILE_URL_PORT_OPTIONS - set(declared)
    planted = tmp_path / "planted"
    results = tmp_path / "results"
    with run_sim(*SIM_ARGS) as sim:
        command = ["-f", str(LOCUSTFILE), "--host", sim.url, "--results-dir", str(results)]
        with locust_web_ui(*command) as web:
            ui = web.url
            page = wait_for_page(ui, 30)
            form_fields = set(template_args(page)["extra_options"])
            good = {"user_count": 2, "spawn_rate": 2, "host": sim.url, "max_tokens": "8", "interval_s": "1"}
            answers = {}
            for name in (*declared, *LOCUST_FILE_OPTIONS):
                value = "true" if name in ("requests_jsonl", "insecure") else str(planted / name)
                answers[name] = post(f"{ui}/swarm", {**good, name: value})
            state = ui_state(ui)
            sent = len(sim.trace())
            started = post(f"{ui}/swarm", good)
            wait_for(lambda: len(sim.trace()) >= 4, 20, "requests of the good form")
            http(f"{ui}/stop", {})
            wait_for(lambda: (results / "summary.json").exists() and read_summary(results), 20, "summary")
    assert "max_tokens" in form_fields and not form_fields & {*declared, *LOCUST_FILE_OPTIONS}
    for name, (code, answer) in answers.items():
        assert code == 400 and answer["success"] is False, (name, answer)
        assert answer["message"].startswith(f"{name}: set only when llm-locust starts"), answer
        assert "\n" not in answer["message"]
    assert state == "ready" and sent == 0 and not planted.exists()
    assert started[1]["success"] is True


def test_the_refusal_of_a_foreign_host_shows_in_the_browser_form(tmp_path):
    """Headless Chromium types a foreign host into Locust's start form and presses Start: the form shows the refusal's
    line, the test does not start, and the foreign listener sees no connection."""
    browser_tools()  # skips the test, saying why, without Chromium
    with run_sim(*SIM_ARGS) as sim, socket.socket() as stranger:
        stranger.bind(("127.0.0.1", 0))
        stranger.listen(16)
        foreign = f"http://127.0.0.1:{stranger.getsockname()[1]}"
        command = ["-f", str(LOCUSTFILE), "--host", sim.url, "--results-dir", str(tmp_path)]
        with locust_web_ui(*command) as web, chromium_page(viewport={"width": 1400, "height": 1000}) as page:
            wait_for_page(web.url, 30)
            page.goto(web.url + "/")
            page.fill("input[name=userCount]", "2")
            page.fill("input[name=spawnRate]", "2")
            page.fill("input[name=host]", foreign)
            page.get_by_role("button", name="Start").click()
            page.wait_for_selector(f"text=host '{foreign}' refused", timeout=15_000)
            pending, _, _ = select.select([stranger], [], [], QUIET_S)
            state, sent = ui_state(web.url), sim.trace()
    assert state == "ready" and pending == [] and sent == []


@pytest.mark.parametrize("processes", [(), ("--processes", "2")], ids=["local", "processes"])
def test_a_page_of_another_origin_cannot_send_the_users_through_its_proxy(tmp_path, processes):
    """The attack of issue 41: a page of another origin POSTs /user {proxy_host, proxy_port} (every user through a
    "proxy" listening on a private port of 127.0.0.1), then /swarm, with the headers a browser sends (Origin, with and
    without Sec-Fetch-Site; Referer alone). Each is refused (HTTP 403, one line naming the page's origin), and so is
    its /stop; no test starts. A client without those headers (curl) is no browser and passes the origin check, but
    /user's allow-list refuses the proxy fields (HTTP 400 naming the field) and accepts a weight. Then the UI's own
    page starts a test and stops it: the proxy received 0 requests and no secret (before: every request of the test
    — 258 in one run — with the key and the --header value), --host all of them."""
    key, value = f"sk-{secrets.token_hex(12)}", f"hv-{secrets.token_hex(12)}"
    with run_sim(*SIM_ARGS) as sim, RecordingProxy() as proxy:
        port = int(proxy.url.rpartition(":")[2])
        command = ["-f", str(LOCUSTFILE), "--host", sim.url, "--results-dir", str(tmp_path), "--api-key", key,
                   "--header", f"X-Planted: {value}", *processes]  # fmt: skip
        with locust_web_ui(*command) as web:
            ui = web.url
            wait_for_page(ui, 30)
            attacker = "http://127.0.0.1:5555"
            pages = ({"Origin": attacker, "Sec-Fetch-Site": "same-site"}, {"Origin": attacker},
                     {"Referer": f"{attacker}/a.html"}, {"Origin": "null", "Sec-Fetch-Site": "cross-site"})  # fmt: skip
            edit = {"user_class_name": "ChatUser", "proxy_host": "127.0.0.1", "proxy_port": port}
            form = {"user_count": 4, "spawn_rate": 4, "host": sim.url, "max_tokens": "8", "interval_s": "1"}
            attacks = []
            for headers in pages:
                attacks.append(post_json(f"{ui}/user", edit, headers))
                attacks.append(post(f"{ui}/swarm", form, headers))
            time.sleep(2)  # a started test's first requests would be there by now
            state, sent = ui_state(ui), len(sim.trace())
            plain = [
                post_json(f"{ui}/user", edit),
                post_json(f"{ui}/user", {"user_class_name": "ChatUser", "weight": 1}),
            ]
            own = {"Origin": ui, "Sec-Fetch-Site": "same-origin", "Referer": f"{ui}/"}
            started = post(f"{ui}/swarm", form, own)
            wait_for(lambda: len(sim.trace()) >= 8 and ui_state(ui) == "running", 20, "requests to --host")
            stop_refused = post(f"{ui}/stop", {}, pages[0])
            running = ui_state(ui)
            stopped = post(f"{ui}/stop", {}, own)
            summary = wait_for(lambda: (tmp_path / "summary.json").exists() and read_summary(tmp_path), 20, "summary")
    keyed = [headers for _line, headers in proxy.requests if key in str(headers)]
    assert proxy.requests == [], f"{len(proxy.requests)} requests reached the proxy, {len(keyed)} with the key"
    assert not leaks(str(proxy.requests), (key, value))
    for code, answer in attacks:
        answer = json.loads(answer) if isinstance(answer, bytes) else answer
        assert code == 403 and answer["success"] is False, answer
        path = answer["message"].partition(":")[0]
        assert (
            path in ("POST /user", "POST /swarm")
            and "cross-origin request refused: from a page of " in answer["message"]
        )
        assert f"not of this web UI ({ui})" in answer["message"] and "\n" not in answer["message"]
    assert state == "ready" and sent == 0
    assert plain[0][0] == 400 and json.loads(plain[0][1])["message"].startswith(
        "proxy_host: the web UI may change only"
    )
    assert plain[1][0] == 201
    assert started == (200, {"success": True, "message": "Swarming started", "host": sim.url})
    assert stop_refused[0] == 403 and running == "running" and stopped[0] == 200
    assert summary["throughput"]["requests_ok"] >= 8 and summary["failures"] == {}


def test_pages_of_a_web_origin_may_start_and_stop_a_test_and_a_bad_one_is_one_line(tmp_path):
    """Behind a reverse proxy the UI's pages come from the proxy's origin (https://locust.example.com), not the address
    the UI is reached at: named with --web-origin, its pages start and stop a test, another origin's do not. A
    --web-origin that is not an origin ends the process at start: exit code 2, one line naming it."""
    with run_sim(*SIM_ARGS) as sim:
        command = ["-f", str(LOCUSTFILE), "--host", sim.url, "--results-dir", str(tmp_path / "r"), "--web-origin",
                   "https://locust.example.com"]  # fmt: skip
        with locust_web_ui(*command) as web:
            ui = web.url
            wait_for_page(ui, 30)
            proxied = {"Origin": "https://locust.example.com", "Sec-Fetch-Site": "cross-site"}
            other = {"Origin": "https://other.example.com", "Sec-Fetch-Site": "cross-site"}
            form = {"user_count": 2, "spawn_rate": 2, "host": sim.url, "max_tokens": "8"}
            refused = post(f"{ui}/swarm", form, other)
            started = post(f"{ui}/swarm", form, proxied)
            wait_for(lambda: len(sim.trace()) >= 4 and ui_state(ui) == "running", 20, "requests to --host")
            stopped = post(f"{ui}/stop", {}, proxied)
            wait_for(lambda: ui_state(ui) == "stopped", 20, "the test's stop")
    bad = subprocess.run([sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--host", "http://127.0.0.1:9",
                          "--web-port", str(free_port()), "--web-origin", "locust.example.com"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert refused[0] == 403 and "from a page of https://other.example.com" in refused[1]["message"]
    assert started[1]["success"] is True and stopped == (200, {"success": True, "message": "Test stopped"})
    errors = [line for line in (bad.stdout + bad.stderr).splitlines() if "--web-origin" in line]
    assert bad.returncode == 2 and len(errors) == 1, bad.stderr[-2000:]
    assert errors[0].endswith(
        "--web-origin locust.example.com: expected an origin, scheme://host[:port], e.g. https://locust.example.com"
    )


ATTACK_PAGE = """<!doctype html><script>
async function attack(ui, proxyPort, host) {
  const edit = {user_class_name: "ChatUser", proxy_host: "127.0.0.1", proxy_port: proxyPort};
  await fetch(ui + "/user", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"},
                             body: JSON.stringify(edit)});
  await fetch(ui + "/swarm", {method: "POST", mode: "no-cors",
                              headers: {"Content-Type": "application/x-www-form-urlencoded"},
                              body: "user_count=4&spawn_rate=4&max_tokens=8&host=" + encodeURIComponent(host)});
  const form = document.createElement("form");  // a plain form post too: no script needed on the attacker's side
  form.method = "POST"; form.action = ui + "/swarm"; form.target = "sink";
  for (const [name, value] of [["user_count", "4"], ["spawn_rate", "4"], ["host", host]]) {
    const input = document.createElement("input"); input.name = name; input.value = value; form.appendChild(input);
  }
  document.body.appendChild(form); form.submit();
  return "sent";
}
</script><body><iframe name="sink"></iframe></body>"""


def test_a_page_of_another_origin_in_a_real_browser_starts_nothing(tmp_path):
    """Headless Chromium opens an attacker's page on another port of 127.0.0.1 (the same site, another origin), whose
    script POSTs /user with a proxy on a private port and /swarm (fetch, no-cors), and submits a form to /swarm:
    the browser sends them (with its own Origin and Sec-Fetch-Site), the UI refuses each (403, logged in one line
    naming the page's origin), no test starts, the proxy and --host receive nothing. Then Locust's own page in the
    same browser starts a test: the UI's own origin passes."""
    browser_tools()  # skips the test, saying why, without Chromium
    with run_sim(*SIM_ARGS) as sim, RecordingProxy() as proxy:
        port = int(proxy.url.rpartition(":")[2])
        command = ["-f", str(LOCUSTFILE), "--host", sim.url, "--results-dir", str(tmp_path), "--api-key", "sk-planted"]
        site = tmp_path / "site"
        site.mkdir()
        (site / "attack.html").write_text(ATTACK_PAGE)
        attacker_port = free_port()
        attacker = f"http://127.0.0.1:{attacker_port}/attack.html"
        server = subprocess.Popen([sys.executable, "-m", "http.server", str(attacker_port), "--bind", "127.0.0.1"],
                                  cwd=site, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        with contextlib.closing(_Ended(server)), locust_web_ui(*command) as web, chromium_page() as page:
            wait_for(lambda: _answers(attacker), 20, "the attacker's page")
            ui = web.url
            wait_for_page(ui, 30)
            page.goto(attacker)
            assert page.evaluate("([ui, port, host]) => attack(ui, port, host)", [ui, port, sim.url]) == "sent"
            time.sleep(2)  # a started test's first requests would be there by now
            state, sent = ui_state(ui), len(sim.trace())
            assert proxy.requests == [] and sent == 0, f"{len(proxy.requests)} requests via the proxy, {sent} at --host"
            page.goto(ui + "/")
            page.fill("input[name=userCount]", "2")
            page.fill("input[name=spawnRate]", "2")
            page.get_by_role("button", name="Start").click()
            wait_for(lambda: len(sim.trace()) >= 4, 20, "the test started on the UI's own page")
            http(f"{ui}/stop", {})
    assert proxy.requests == [] and state == "ready"
    refusals = [line for line in web.output.splitlines() if "cross-origin request refused" in line]
    assert [line.split("web UI: ", 1)[1].split(":", 1)[0] for line in refusals] == [
        "POST /user", "POST /swarm", "POST /swarm"]  # fmt: skip
    assert all(f"from a page of http://127.0.0.1:{attacker_port} (Sec-Fetch-Site: same-site)" in x for x in refusals)


def _answers(url: str) -> bool:
    try:
        return bool(http(url))
    except OSError:
        return False


class _Ended:
    """A process terminated (and waited for) when closed."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
