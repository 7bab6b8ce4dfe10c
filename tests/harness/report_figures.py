"""The report's charts as the browser gets them: the plotly figure JSON embedded in the HTML, read back."""

from __future__ import annotations

import base64
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
