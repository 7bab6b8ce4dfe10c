"""The report page: one self-contained HTML file (plotly.js inline, no network needed to view it).

Each chart's figure is embedded as JSON in `<script type="application/json" data-chart=KEY>`
and drawn into `<div id=KEY>` by a few lines of script once the page loads; when every chart is
drawn, `<body data-charts-rendered=N>` is set (the browser test waits for it).
"""

from __future__ import annotations

import html
import math
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plotly.offline import get_plotlyjs

from llm_locust import __version__
from llm_locust.report.figure import Chart

_STYLE = """
body { font-family: system-ui, -apple-system, Segoe UI, Roboto, sans-serif; margin: 0 auto; max-width: 1400px;
       padding: 16px 24px; color: #222; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ddd; }
.sub { color: #666; margin-top: 0; }
.banner { background: #fff3cd; border: 1px solid #e0b252; border-left: 6px solid #d9534f; padding: 8px 12px;
          margin: 8px 0; border-radius: 4px; }
.note { background: #eef4fb; border-left: 4px solid #5b9bd5; padding: 6px 12px; margin: 6px 0; }
.pick { background: #e8f5e9; border-left: 6px solid #2e7d32; padding: 8px 12px; margin: 8px 0; font-size: 1.1em; }
.nopick { background: #fdecea; border-left: 6px solid #c62828; padding: 8px 12px; margin: 8px 0; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; }
th { background: #f5f5f5; } td:first-child, th:first-child { text-align: left; }
td.t { text-align: left; } td.ok { color: #2e7d32; } td.fail { color: #c62828; font-weight: bold; }
.chart { width: 100%; } .desc { color: #555; max-width: 1100px; }
"""

_RENDER = """
(function () {
  var blocks = document.querySelectorAll('script[type="application/json"][data-chart]');
  var pending = [];
  blocks.forEach(function (block) {
    var figure = JSON.parse(block.textContent);
    pending.push(Plotly.newPlot(block.dataset.chart, figure.data, figure.layout,
                                {responsive: true, displaylogo: false}));
  });
  Promise.all(pending).then(function () { document.body.dataset.chartsRendered = String(pending.length); });
})();
"""


@dataclass
class Section:
    """A block of the page before the charts: a heading and HTML fragments (already escaped)."""

    title: str
    parts: list[str] = field(default_factory=list)


def fmt(value: Any) -> str:
    """A table cell: numbers to 4 significant digits (integers whole), None/NaN as '-', escaped."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) < 1e15):
        return f"{int(value):,}"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e6 else f"{value:,.0f}"
    return html.escape(str(value))


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], classes: Iterable[Sequence[str]] | None = None) -> str:
    """An HTML table; `classes` optionally gives a CSS class per cell (e.g. ok / fail)."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = []
    class_rows = iter(classes) if classes is not None else None
    for row in rows:
        cells_class = next(class_rows) if class_rows is not None else [""] * len(row)
        pairs = zip(row, cells_class, strict=True)
        cells = "".join(
            f'<td class="{css}">{fmt(v)}</td>' if (css := c or _text_class(v)) else f"<td>{fmt(v)}</td>"
            for v, c in pairs
        )
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _text_class(value: Any) -> str:
    """CSS class of a cell without one: `t` (left-aligned) for text."""
    return "t" if isinstance(value, str) else ""


def heading(text: str) -> str:
    """A sub-heading (one run's table)."""
    return f"<h3>{html.escape(text)}</h3>"


def banner(text: str) -> str:
    """A warning banner."""
    return f'<div class="banner">⚠ {html.escape(text)}</div>'


def note(text: str) -> str:
    """An informational note."""
    return f'<div class="note">{html.escape(text)}</div>'


def paragraph(text: str, css_class: str) -> str:
    """A styled paragraph (`pick`, `nopick`)."""
    return f'<div class="{css_class}">{html.escape(text)}</div>'


def _chart_html(chart: Chart) -> list[str]:
    """A chart's heading, description, element and figure JSON."""
    data = chart.figure.to_json().replace("</", "<\\/")
    return [
        f'<h2 id="h-{chart.key}">{html.escape(chart.title)}</h2>',
        f'<p class="desc">{html.escape(chart.description)}</p>',
        f'<div class="chart" id="{chart.key}"></div>',
        f'<script type="application/json" data-chart="{chart.key}">{data}</script>',
    ]


def render(
    title: str, subtitle: str, banners: list[str], sections: list[Section], charts: list[Chart], lead: int = 0
) -> str:
    """The whole page as a string: banners, the first `lead` charts (what the page opens on), the sections, the
    other charts."""
    generated = time.strftime("%Y-%m-%d %H:%M:%S %z")
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style>",
        f'<script type="text/javascript">{get_plotlyjs()}</script>',
        "</head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="sub">{html.escape(subtitle)} · generated {generated} by llm-locust {__version__}</p>',
        *(banner(text) for text in banners),
    ]
    for chart in charts[:lead]:
        out += _chart_html(chart)
    for section in sections:
        out.append(f"<h2>{html.escape(section.title)}</h2>")
        out.extend(section.parts)
    for chart in charts[lead:]:
        out += _chart_html(chart)
    out += [f"<script>{_RENDER}</script>", "</body></html>"]
    return "\n".join(out)


def write_page(output: Path, page: str) -> Path:
    """Write `page` to `output` (its folder made if missing) whole or not at all: a temporary file renamed over it, so
    a reader never sees half a page; returns `output`."""
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(output.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, output)
    return output
