"""What a run printed and wrote, scanned: its error lines, and any piece of a secret."""

from __future__ import annotations

from pathlib import Path


def error_lines(output: str) -> list[str]:
    """The lines of Locust's console `output` logged at ERROR level."""
    return [line for line in output.splitlines() if "/ERROR/" in line]


FRAGMENT_CHARS = 12
"""A piece of a secret this long counts as a leak (a message cut short must not keep half a key)."""


def leaks(text: str, secrets: tuple[str, ...]) -> list[str]:
    """The secrets of which `text` holds a piece of `FRAGMENT_CHARS` characters (or all of a shorter one)."""
    found = []
    for secret in secrets:
        n = min(FRAGMENT_CHARS, len(secret))
        if any(secret[i : i + n] in text for i in range(len(secret) - n + 1)):
            found.append(secret)
    return found


def assert_no_secret(results: Path, output: str, *secrets: str) -> int:
    """No secret (nor a piece of one) in any file of `results` (CSV, JSON, HTML, log) or in the console
    output; returns the number of files scanned."""
    files = [p for p in results.rglob("*") if p.is_file()]
    assert {"summary.json", "report.html", "locust_stats.csv", "llm_timeseries.csv"} <= {p.name for p in files}
    for path in files:
        assert not leaks(path.read_text(errors="replace"), secrets), path
    assert not leaks(output, secrets)
    return len(files)
