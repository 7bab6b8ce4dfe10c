"""Headless Chromium for the browser tests: one way to find it, start it and open a page."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                "--no-first-run", "--disable-sync", "--disable-quic"]  # fmt: skip
"""Headless Chromium on a machine without a network or a sandbox (as root)."""


def browser_tools() -> tuple[str, Any, Any]:
    """(Chromium's path, playwright.sync_api, PIL.Image) for a browser test; skips it, saying why, when
    one is missing."""
    from llm_locust.report.images import find_browser

    browser = find_browser()
    if browser is None:
        pytest.skip("no Chromium on this machine (make browser, or apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (dev dependency) not installed")
    image_module = pytest.importorskip("PIL.Image", reason="pillow (dev dependency) not installed")
    return browser, sync_api, image_module


@contextlib.contextmanager
def chromium_page(**page_options: Any) -> Iterator[Any]:
    """A page (Playwright's sync `Page`) of headless Chromium, the browser closed when the block ends; `page_options`
    go to `Browser.new_page` (e.g. `viewport`). Skips the test, saying why, when Chromium or Playwright is missing."""
    browser, sync_api, _image_module = browser_tools()
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=browser, args=BROWSER_ARGS)
        try:
            yield chromium.new_page(**page_options)
        finally:
            chromium.close()


def open_llm_page(page: Any, url: str, timeout_s: float) -> None:
    """Open the /llm page of the web UI at `url` on `page` as soon as the UI answers (waiting up to `timeout_s`)."""
    from conftest import wait_for

    def opened() -> bool:
        try:
            return page.goto(url + "/llm").ok
        except Exception:
            return False

    wait_for(opened, timeout_s, "the /llm page")


def open_final_llm_page(page: Any, url: str, timeout_s: float) -> None:
    """Wait (up to `timeout_s`) for the run of the web UI at `url` to have its final summary (/llm/stats.json), then
    open its /llm page on `page` and wait until the page has drawn it."""
    from conftest import wait_for

    def final() -> bool:
        try:
            return page.request.get(url + "/llm/stats.json").json()["final"]
        except Exception:
            return False

    wait_for(final, timeout_s, "the run's final summary")
    page.goto(url + "/llm")
    page.wait_for_selector("body[data-final='1']", timeout=15_000)
