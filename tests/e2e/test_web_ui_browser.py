"""End to end in a real browser: headless Chromium starts a run from Locust's web UI (master + 2 worker
processes against the simulator), reads the LLM tab and the /llm page, and checks what they show
against /llm/stats.json and summary.json. Screenshots are kept as test artifacts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from conftest import LOCUSTFILE, ROOT, read_summary, wait_for
from harness.browser import browser_tools, chromium_page, open_final_llm_page, open_llm_page
from harness.web_ui import locust_web_ui

from llm_locust.metrics.client_error import client_error_text
from llm_locust.sim import run_sim

ARTIFACTS = ROOT / "results" / "test-artifacts" / "web_ui"
LATENCIES = (("TTFT", "ttft"), ("TPOT", "tpot"), ("ITL", "itl"), ("E2E", "e2e"))


def fmt(value: Any) -> str:
    """A number as the LLM tab shows it."""
    return "-" if value is None or value == "" else f"{value:.2f}"


def percentiles(stats: dict[str, Any], prefix: str = "") -> str:
    """'p50 / p90 / p99' as the LLM tab shows it, from a distribution or a time-series row."""
    return " / ".join(fmt(stats[f"{prefix}{p}"]) for p in ("p50", "p90", "p99"))


def read_tab(page) -> dict[str, tuple[str, str]]:
    """The LLM tab's table: metric -> (last window, whole run)."""
    rows = page.eval_on_selector_all("table tbody tr", "rs => rs.map(r => [...r.cells].map(c => c.innerText))")
    return {cells[0]: (cells[1], cells[2]) for cells in rows if len(cells) == 3}


def test_llm_view_in_headless_chromium(fast_sim, tmp_path):
    _, _, image_module = browser_tools()
    results = tmp_path / "results"
    command = ["-f", str(LOCUSTFILE), "--processes", "2", "--host", fast_sim.url, "--results-dir", str(results)]
    problems: list[str] = []
    shots: dict[str, Path] = {}
    with locust_web_ui(*command) as web:
        ui = web.url
        with chromium_page(viewport={"width": 1400, "height": 1000}) as page:
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            api = page.request

            def get_json(path: str) -> dict[str, Any]:
                response = api.get(ui + path)
                assert response.ok, (path, response.status)
                return response.json()

            def workers_ready() -> bool:
                try:
                    return get_json("/stats/requests").get("worker_count") == 2
                except Exception:
                    return False

            wait_for(workers_ready, 30, "the web UI with 2 workers")

            # -- start a run from the form, with LLM settings in its custom parameters
            page.goto(ui + "/")
            page.fill("input[name=userCount]", "4")
            page.fill("input[name=spawnRate]", "4")
            page.get_by_text("Custom parameters").click()
            fields = {"maxTokens": "8", "promptTokens": "32", "intervalS": "1", "slo": "ttft_p90_ms=5000", "seed": "7"}
            for name, value in fields.items():
                page.fill(f"input[name={name}]", value)
            page.check("input[name=ignoreEos]")
            page.get_by_role("button", name="Start").click()

            wait_for(lambda: (s := get_json("/llm/stats.json"))["last_window"] and s["in_flight"] > 0, 30,
                     "a complete window and requests in flight")  # fmt: skip

            # -- the LLM tab while running: the last complete window is the JSON's row of that time
            page.get_by_role("tab", name="LLM", exact=True).click()
            page.wait_for_selector("text=Last complete window")

            def live_tab_matches_json() -> bool:
                tab = read_tab(page)
                snap = get_json("/llm/stats.json")
                rows = {row["time"]: row for row in snap["history"]}
                row = rows.get(tab.get("Window / run start", ("",))[0])
                if row is None or tab["Output tokens/s"][0] != fmt(row["output_tokens_per_s"]):
                    return False
                return all(tab[f"{x} ms p50 / p90 / p99"][0] == percentiles(row, f"{k}_ms_") for x, k in LATENCIES)

            wait_for(live_tab_matches_json, 15, "the LLM tab's last window to match /llm/stats.json")
            tab = read_tab(page)
            assert tab["Users (now / max)"][0] == "4"
            assert 1 <= int(tab["Requests in flight (now)"][0]) <= 4
            shots["llm_tab_running"] = tmp_path / "llm_tab_running.png"
            page.screenshot(path=shots["llm_tab_running"])

            # -- stop from the UI; once final, the tab's whole-run column is summary.json
            page.get_by_role("button", name="Stop").click()
            final = wait_for(lambda: (s := get_json("/llm/stats.json"))["final"] and s, 30, "the final summary")
            summary = read_summary(results)
            assert final["summary"] == summary  # the JSON endpoint serves exactly what summary.json holds
            # Locust's UI stops polling when the test stops: the tab shows the final numbers once reloaded
            page.reload()
            page.get_by_role("tab", name="LLM", exact=True).click()
            page.wait_for_selector("text=final", timeout=15_000)
            tab = read_tab(page)
            t, m = summary["throughput"], summary["metrics"]
            assert tab["Output tokens/s"][1] == fmt(t["output_tokens_per_s"])
            assert tab["Requests/s (successful)"][1] == fmt(t["requests_per_s"])
            assert tab["Requests ok / failed"][1] == f"{t['requests_ok']} / {t['requests_failed']}"
            for label, key in LATENCIES:
                assert tab[f"{label} ms p50 / p90 / p99"][1] == percentiles(m[f"{key}_ms"]), label
            assert tab["Failures by kind"][1] == "none" and tab["Results folder"] == ("final", str(results))
            shots["llm_tab_final"] = tmp_path / "llm_tab_final.png"
            page.screenshot(path=shots["llm_tab_final"])

            # -- the /llm page, through the link Locust's UI shows on every tab
            page.click("#llm-view-link")
            page.wait_for_selector("body[data-final='1']", timeout=15_000)
            field = lambda name: page.inner_text(f"[data-field='{name}']")  # noqa: E731
            for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
                for stat in ("p50", "p90", "p99", "max"):
                    assert field(f"run.{key}.{stat}") == fmt(m[key][stat]), (key, stat)
                assert field(f"run.{key}.count") == str(m[key]["count"])
            assert field("run.output_tokens_per_s") == fmt(t["output_tokens_per_s"])
            assert field("run.requests_ok") == str(t["requests_ok"]) and field("workers") == "2"
            rows_with_ttft = [r for r in final["history"] if r["ttft_ms_p50"] != ""]
            points = page.get_attribute("#chart-ttft polyline[data-series='ttft_ms_p99']", "points")
            assert len(points.split()) == len(rows_with_ttft) >= 3
            href = page.get_attribute("[data-link='summary']", "href")
            assert json.loads(api.get(f"{ui}/{href.removeprefix('./')}").body()) == summary
            shots["llm_page"] = tmp_path / "llm_page.png"
            page.screenshot(path=shots["llm_page"], full_page=True)

            stats = get_json("/stats/requests")
    output = web.output

    assert problems == [], problems
    # the form's settings reached the run (and the workers)
    assert summary["settings"]["slo"] == ["ttft_p90_ms=5000"] and summary["settings"]["seed"] == 7
    assert str(summary["settings"]["prompt_tokens"]) == "32" and summary["settings"]["ignore_eos"] is True
    assert m["output_tokens"]["min"] == m["output_tokens"]["max"] == 8
    assert summary["run"]["workers_max"] == 2 and t["requests_ok"] >= 20 and summary["failures"] == {}
    assert [(r["slo"], r["ok"]) for r in summary["slo"]] == [("ttft_p90_ms=5000", True)]
    assert t["slo_attainment"] == 1.0
    # Locust's own numbers count real requests only: no LLM rows in the stats, nor in the total
    rows = {(s["method"], s["name"]): s for s in stats["stats"]}
    assert set(rows) == {("POST", "/v1/chat/completions"), ("GET", "/v1/models"), ("", "Aggregated")}
    assert rows[("POST", "/v1/chat/completions")]["num_requests"] == t["requests_ok"] + t["requests_failed"]
    assert rows[("", "Aggregated")]["num_requests"] == t["requests_ok"] + rows[("GET", "/v1/models")]["num_requests"]
    assert "Traceback" not in output, output[-3000:]

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for name, path in shots.items():
        image = image_module.open(path).convert("RGB")
        colors = image.getcolors(maxcolors=1 << 20) or []
        assert len(colors) > 20, f"{name}: blank screenshot"
        shutil.copy(path, ARTIFACTS / path.name)
    print(f"screenshots: {ARTIFACTS}")


def test_form_changes_take_effect_with_header_set(tmp_path):
    """`--header` given on the command line: its field in the form is empty (its value is never in the
    page), a field changed in the form takes effect, and the header is still sent (the simulator echoes
    it in the error body of some requests: Locust's failures table shows it redacted)."""
    browser_tools()  # skips the test, saying why, without Chromium
    token = "hdr-BROWSER-SECRET-5e6f7a8b"
    results = tmp_path / "results"
    sim_args = ("--ttft-ms", "5", "--itl-ms", "1", "--output-tokens", "32", "--echo-headers", "--fault", "http_500=0.2")
    with run_sim(*sim_args) as sim:
        command = ["-f", str(LOCUSTFILE), "--host", sim.url, "--model", "llm-locust-sim", "--max-tokens", "32",
                   "--ignore-eos", "--header", f"A-Route-Token: {token}", "--results-dir", str(results)]  # fmt: skip
        pages: list[str] = []
        with locust_web_ui(*command) as web:
            ui = web.url
            with chromium_page(viewport={"width": 1400, "height": 1000}) as page:
                api = page.request

                def ui_up() -> bool:
                    try:
                        return api.get(ui + "/stats/requests").ok
                    except Exception:
                        return False

                wait_for(ui_up, 30, "the web UI")
                page.goto(ui + "/")
                page.fill("input[name=userCount]", "2")
                page.fill("input[name=spawnRate]", "2")
                page.get_by_text("Custom parameters").click()
                assert page.input_value("input[name=header]") == ""  # masked, and no default in the page
                for name, value in {"maxTokens": "8", "intervalS": "1"}.items():
                    page.fill(f"input[name={name}]", value)
                pages.append(page.content())
                page.get_by_role("button", name="Start").click()

                def failures_seen() -> bool:
                    return sum(e["occurrences"] for e in api.get(ui + "/stats/requests").json()["errors"]) >= 2

                wait_for(failures_seen, 30, "failed requests")
                page.get_by_role("tab", name="Failures").click()
                page.wait_for_selector("text=simulated http_500")
                pages.append(page.content())
                page.get_by_role("button", name="Stop").click()
                wait_for(lambda: api.get(ui + "/llm/stats.json").json()["final"], 30, "the final summary")
        output = web.output
    summary = read_summary(results)  # the form's values took effect
    assert "keeping the previous settings" not in output, output[-3000:]
    assert summary["settings"]["max_tokens"] == "8" and summary["settings"]["interval_s"] == 1
    assert summary["settings"]["header"] == ["A-Route-Token"]
    assert summary["metrics"]["output_tokens"]["max"] == 8
    assert "a-route-token: [REDACTED]" in pages[-1]  # sent with every request, shown redacted
    for text in (*pages, output, *(p.read_text() for p in results.iterdir())):
        assert token not in text


def test_live_knee_chart_gains_points_during_a_spawn_rate_ramp(tmp_path):
    """Locust's own ramp (-u 8 -r 1, no load shape) against the batching simulator: the /llm page's latency-against-
    throughput and latency-against-users charts gain a point per closed time window while users are added, coloured
    by users. The screenshot is kept in the test's folder."""
    _, _, image_module = browser_tools()
    batching = ("--timing", "batching", "--max-batch", "4", "--decode-step-ms", "8", "--decode-step-ms-per-seq", "1")
    with run_sim(*batching) as sim:
        command = ["-f", str(LOCUSTFILE), "--autostart", "--autoquit", "5", "-u", "8", "-r", "1", "--run-time", "16s",
                   "--host", sim.url, "--max-tokens", "16", "--ignore-eos", "--interval-s", "1",
                   "--results-dir", str(tmp_path / "results")]  # fmt: skip
        problems: list[str] = []
        with locust_web_ui(*command) as web:
            ui = web.url
            with chromium_page(viewport={"width": 1400, "height": 1000}) as page:
                page.on("pageerror", lambda e: problems.append(f"page error: {e}"))

                open_llm_page(page, ui, 30)
                chart = "#knee-ttft-throughput circle.knee-point"

                def windows() -> set[str]:
                    return set(page.eval_on_selector_all(chart, "cs => cs.map(c => c.dataset.window)"))

                first = wait_for(windows, 20, "a first window in the live knee chart")
                users_first = page.eval_on_selector_all(chart, "cs => cs.map(c => Number(c.dataset.users))")
                wait_for(lambda: len(windows()) >= len(first) + 3, 20, "more windows while the ramp goes on")
                running = page.inner_text("#state")
                users_later = page.eval_on_selector_all(chart, "cs => cs.map(c => Number(c.dataset.users))")
                fills = set(page.eval_on_selector_all(chart, "cs => cs.map(c => c.getAttribute('stroke'))"))
                per_stat = {s: page.locator(f"{chart}[data-stat='{s}']").count() for s in ("p50", "p90", "p99")}
                by_users = page.locator("#knee-tpot-users circle.knee-point").count()
                shot = tmp_path / "llm_knee_live.png"
                page.screenshot(path=shot, full_page=True)
        output = web.output
    print(f"screenshot: {shot}")
    assert problems == [], problems
    assert running.lower().startswith(("running", "spawning")), running  # the points came while the test ran
    assert max(users_later) > max(users_first) and len(set(users_later)) >= 3  # the ramp, window by window
    assert len(fills) >= 3  # coloured by users
    assert per_stat["p50"] == per_stat["p90"] == per_stat["p99"] >= len(first) + 3  # one point per window and stat
    assert by_users == per_stat["p50"] * 3
    colors = image_module.open(shot).convert("RGB").getcolors(maxcolors=1 << 20) or []
    assert len(colors) > 20, "blank screenshot"
    assert "Traceback" not in output, output[-3000:]


def test_a_scenarios_names_are_a_table_of_the_llm_page(fast_sim, tmp_path):
    """locustfiles/scenarios/support_chat.py with the web UI: once final, the /llm page draws the "by name" table,
    one row per name with summary.json's counts of it."""
    browser_tools()  # skips the test, saying why, without Chromium
    results = tmp_path / "results"
    # the check fails most refund answers (by design): no error-rate gate
    command = ["-f", str(ROOT / "locustfiles" / "scenarios" / "support_chat.py"), "--host", fast_sim.url,
               "--results-dir", str(results), "--autostart", "-u", "3", "-r", "3", "--run-time", "3s",
               "--autoquit", "30", "--max-error-rate", "1"]  # fmt: skip
    problems: list[str] = []
    with locust_web_ui(*command) as web, chromium_page(viewport={"width": 1400, "height": 1000}) as page:
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        open_final_llm_page(page, web.url, 30)
        table = page.locator("table[data-dimension='name']")
        field = lambda name: table.locator(f"[data-field='{name}']").inner_text()  # noqa: E731
        entries = read_summary(results)["breakdowns"]["name"]
        assert {entry["label"] for entry in entries} == {"refund", "refund follow-up", "outage"}
        for entry in entries:
            prefix = f"name.run.{entry['label']}"
            assert field(f"{prefix}.label") == entry["label"]
            assert field(f"{prefix}.requests_ok") == str(entry["requests_ok"]), entry["label"]
            assert field(f"{prefix}.requests_failed") == str(entry["requests_failed"]), entry["label"]
        assert page.inner_text("#breakdowns h3") == "by name"
    assert problems == [], problems
    assert "Traceback" not in web.output, web.output[-3000:]


def test_the_llm_page_draws_only_what_is_true(fast_sim, tmp_path):
    """A plain-HTTP run with 1 s windows: while it runs, the still-open windows are not drawn as a drop of output
    tok/s and req/s (those charts hold the closed windows only, the latency charts every window); the TCP-connect
    axis tells its sub-millisecond ticks apart; no TLS-handshake chart (plain HTTP has none); once final, the client's
    error budget in the words of summary.json's `client_error`."""
    browser_tools()  # skips the test, saying why, without Chromium
    results = tmp_path / "results"
    command = ["-f", str(LOCUSTFILE), "--host", fast_sim.url, "--results-dir", str(results), "--autostart", "-u", "4",
               "-r", "4", "--run-time", "8s", "--autoquit", "30", "--interval-s", "1", "--max-tokens", "16",
               "--ignore-eos"]  # fmt: skip
    problems: list[str] = []
    with locust_web_ui(*command) as web, chromium_page(viewport={"width": 1400, "height": 1000}) as page:
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        ui = web.url

        open_llm_page(page, ui, 30)

        def drawn() -> dict[str, Any] | None:
            """The page drawn from the snapshot it is handed (its own render), when that has closed and open windows."""
            snap = page.evaluate("async () => { const s = await (await fetch('./llm/stats.json')).json(); "
                                 "render(s); return s; }")  # fmt: skip
            history = snap["history"]
            closed = [r for r in history if not r.get("partial") and r["output_tokens_per_s"] != ""]
            busy = [r for r in closed if r["output_tokens_per_s"]]
            return snap if len(busy) >= 2 and any(r.get("partial") for r in history) and not snap["final"] else None

        snap = wait_for(drawn, 20, "closed windows with tokens and a window still open")
        history = snap["history"]
        closed = [r for r in history if not r.get("partial")]
        points = lambda chart, series: page.get_attribute(  # noqa: E731
            f"#chart-{chart} polyline[data-series='{series}']", "points"
        ).split()
        assert len(points("throughput", "output_tokens_per_s")) == len(closed), history
        assert len(points("requests", "requests_per_s")) == len(closed), history
        assert len(points("ttft", "ttft_ms_p50")) == len([r for r in history if r["ttft_ms_p50"] != ""])
        connect = [float(r["connect_ms_p99"]) for r in history if r["connect_ms_p99"] != ""]
        labels = page.eval_on_selector_all(
            "#chart-connect svg text[text-anchor='end']", "ts => ts.map(t => t.textContent)"
        )
        ticks = labels[:5]  # the y axis's, bottom up (then the x axis's end)
        assert len(set(ticks)) == 5 and float(ticks[0]) == 0, (ticks, connect)
        assert abs(float(ticks[-1]) - 1.1 * max(connect)) <= 0.5 * 10 ** -(len(ticks[-1].split(".")[-1])), ticks
        assert page.is_visible("#chart-connect") and not page.is_visible("#chart-tls_handshake")
        open_final_llm_page(page, ui, 30)
        text = page.inner_text("[data-field='client_error']")
    summary = read_summary(results)
    assert summary["client_error"] and text.endswith(client_error_text(summary["client_error"])), text
    assert text.startswith("Client error, the most the client can have moved p50 / p99: TTFT ")
    assert problems == [], problems
    assert "Traceback" not in web.output, web.output[-3000:]
