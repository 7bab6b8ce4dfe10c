"""PNG images of the charts (for slides and pull requests), drawn by kaleido in a Chromium browser.

kaleido drives an installed Chrome/Chromium (on Debian: `apt-get install chromium`); it finds
it on PATH or through BROWSER_PATH. All charts are drawn in one browser session, with plotly.js
from the plotly package and nothing fetched from the network.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import kaleido

from llm_locust.report.figure import Chart

BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
PNG_WIDTH_PX = 1400


def find_browser() -> str | None:
    """Path of a Chrome/Chromium executable (BROWSER_PATH first), or None."""
    explicit = os.environ.get("BROWSER_PATH")
    if explicit and Path(explicit).exists():
        return explicit
    return next((path for name in BROWSER_NAMES if (path := shutil.which(name))), None)


DRAW_TRIES = 2
"""How many times a chart is asked of the browser: kaleido draws the others when one fails, and returns the failure
(a busy machine's run once lost two charts of a report this way, silently); the charts it failed get one more try."""


def write_pngs(charts: list[Chart], folder: Path) -> tuple[list[Path], str | None]:
    """Write `folder/KEY.png` for each chart; return (paths written, why some or all were not, or None)."""
    if not charts:
        return [], None
    browser = find_browser()
    if browser is None:
        return [], "no Chrome/Chromium found (install it, e.g. `apt-get install chromium`, or set BROWSER_PATH)"
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.png"):  # a previous report's charts (this folder is the report's own)
        stale.unlink()
    paths = [folder / f"{chart.key}.png" for chart in charts]
    os.environ.setdefault("BROWSER_PATH", browser)
    jobs = [
        {"fig": chart.figure, "path": path, "opts": {"format": "png", "width": PNG_WIDTH_PX,
                                                     "height": chart.figure.layout.height or 500}}
        for chart, path in zip(charts, paths, strict=True)
    ]  # fmt: skip
    errors: tuple[BaseException, ...] = ()
    for _ in range(DRAW_TRIES):
        try:  # mathjax off: it would be fetched from a CDN (the charts have no LaTeX)
            errors = tuple(kaleido.write_fig_from_object_sync(jobs, kopts={"mathjax": False}) or ())
        except Exception as e:  # kaleido/choreographer raise their own types when the browser fails to start
            return [], f"the browser failed to draw them ({_said(e)})"
        jobs = [job for job in jobs if not job["path"].exists()]  # kaleido removes the file of a chart it failed
        if not jobs:
            return paths, None
    written = [path for path in paths if path.exists()]
    failed = ", ".join(job["path"].stem for job in jobs)
    why = f": {_said(errors[0])}" if errors else ""
    return written, f"{len(jobs)} of {len(paths)} charts could not be drawn ({failed}{why})"


def _said(error: BaseException) -> str:
    """`error` in one line: its type and the start of its text."""
    return f"{type(error).__name__}: {' '.join(str(error).split())[:200]}"
