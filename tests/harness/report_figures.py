"""The report's charts as the browser gets them: the plotly figure JSON embedded in the HTML, read back; and its
tables, as text."""

from __future__ import annotations

import base64
import html
import json
import re
from typing import Any

import numpy as np


def figures(html_text: str) -> dict[str, dict[str, Any]]:
    """The plotly figures embedded in the report, by chart key."""
    found = re.findall(r'<script type="application/json" data-chart="([^"]+)">(.*?)</script>', html_text, re.S)
    return {key: json.loads(data) for key, data in found}


def array(value: Any) -> np.ndarray:
    """A figure array: plain list, or plotly's typed array {dtype, bdata}."""
    if isinstance(value, dict) and "bdata" in value:
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"])).astype(float)
    return np.array([np.nan if v is None else v for v in value], dtype=float)


def trace(figure: dict[str, Any], **meta: Any) -> dict[str, Any]:
    """The one trace whose meta has every given key/value."""
    matches = [t for t in figure["data"] if all((t.get("meta") or {}).get(k) == v for k, v in meta.items())]
    assert len(matches) == 1, (meta, [t.get("meta") for t in figure["data"]])
    return matches[0]


def table_after(html_text: str, heading: str, level: int = 3) -> list[dict[str, str]]:
    """The rows of the first table after the heading `<h{level}>heading</h{level}>` (a sub-heading by default), each
    {column header: cell text}."""
    start = html_text.index(f"<h{level}>{html.escape(heading)}</h{level}>")
    table = html_text[start : html_text.index("</table>", start)]
    headers = [html.unescape(h) for h in re.findall(r"<th>(.*?)</th>", table)]
    rows = re.findall(r"<tr>(.*?)</tr>", table.split("</thead>", 1)[1], re.S)
    cells = [[html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)] for row in rows]
    return [dict(zip(headers, row, strict=True)) for row in cells]
