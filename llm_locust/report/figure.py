"""What every figure module shares: the `Chart` record, run colours, the common layout."""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go
from plotly.colors import qualitative

from llm_locust.metrics.declarations import label

PALETTE = qualitative.Plotly


def latency_title(metric: str) -> str:
    """A latency's chart title: its declared label, E2E spelled out ("E2E latency")."""
    return "E2E latency" if metric == "e2e" else label(metric)


@dataclass(frozen=True)
class Chart:
    """One figure of the report: `key` names its HTML element and PNG file."""

    key: str
    title: str
    description: str
    figure: go.Figure


def run_color(index: int) -> str:
    """The colour of the `index`-th run (same in every chart)."""
    return PALETTE[index % len(PALETTE)]


def with_alpha(color: str, alpha: float) -> str:
    """`#rrggbb` as an `rgba(...)` string with opacity `alpha` (band fills)."""
    red, green, blue = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red},{green},{blue},{alpha})"


def finish(figure: go.Figure, height_px: int, title: str) -> go.Figure:
    """Apply the common layout (white template, legend on top, margins) and return `figure`."""
    figure.update_layout(
        template="plotly_white",
        height=height_px,
        title={"text": title, "x": 0.01},
        margin={"l": 60, "r": 20, "t": 110, "b": 50},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1 + 45 / height_px, "xanchor": "right", "x": 1},
        hovermode="closest",
    )
    return figure
