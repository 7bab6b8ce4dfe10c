"""The package layout's promises: kept import paths, stages free of Locust and gevent, no patches at import."""

import importlib
import subprocess
import sys

import pytest


def test_locustfile_import_paths_still_give_the_same_objects() -> None:
    """`llm_locust.plugin` / `.users` / `.shape` are thin re-exports of the objects in their stage folders."""
    from llm_locust.runtime.plugin import install
    from llm_locust.runtime.shape import SweepShape
    from llm_locust.runtime.users import (
        ChatCompletionsUser,
        CompletionsUser,
        EmbeddingsUser,
        MessagesUser,
        ResponsesUser,
    )

    kept = {
        "llm_locust.plugin": {"install": install},
        "llm_locust.users": {
            "ChatCompletionsUser": ChatCompletionsUser,
            "CompletionsUser": CompletionsUser,
            "EmbeddingsUser": EmbeddingsUser,
            "MessagesUser": MessagesUser,
            "ResponsesUser": ResponsesUser,
        },
        "llm_locust.shape": {"SweepShape": SweepShape},
    }
    for path, objects in kept.items():
        module = importlib.import_module(path)
        assert sorted(module.__all__) == sorted(objects), path
        for name, obj in objects.items():
            assert getattr(module, name) is obj, f"{path}.{name}"


PURE = (
    "llm_locust",
    "llm_locust.config",
    "llm_locust.workload",
    "llm_locust.metrics",
    "llm_locust.results",
    "llm_locust.scrape",
    "llm_locust.report",
    "llm_locust.sim",
    "llm_locust.load",
    "llm_locust.transport.ca_file",
    "llm_locust.transport.proxy",
    "llm_locust.errors",
    "llm_locust.redact",
    "llm_locust.cli",
    "llm_locust.demo",
)
"""What must run without Locust or gevent: every stage but the Locust wiring (`runtime/`, with the pacer, the
controller and the sweep shape; the `plugin`/`users`/`shape` re-exports) and the transport's I/O."""

IMPORT_ALL = """
import importlib, pkgutil, sys
root = importlib.import_module(sys.argv[1])
names = [root.__name__]
if hasattr(root, "__path__"):
    names += [m.name for m in pkgutil.walk_packages(root.__path__, root.__name__ + ".")]
for name in names:
    importlib.import_module(name)
print(" ".join(sorted(m for m in ("locust", "gevent", "geventhttpclient") if m in sys.modules)))
"""


def _run_python(code: str, *args: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.mark.parametrize("package", PURE)
def test_stage_imports_neither_locust_nor_gevent(package: str) -> None:
    """Importing the package and all its submodules in a fresh interpreter loads no Locust and no gevent."""
    if package == "llm_locust":  # the top level only: its subpackages are checked one by one
        loaded = _run_python(
            "import sys, llm_locust; print(' '.join(m for m in ('locust', 'gevent') if m in sys.modules))"
        )
    else:
        loaded = _run_python(IMPORT_ALL, package)
    assert loaded == "", f"{package} imports {loaded}"


def test_importing_every_module_leaves_geventhttpclient_alone() -> None:
    """No module patches geventhttpclient's ConnectionPool at import; `transport.patches.install()` does, once."""
    code = """
import importlib, pkgutil, sys
from geventhttpclient.connectionpool import ConnectionPool
before = dict(vars(ConnectionPool))
import llm_locust
for m in pkgutil.walk_packages(llm_locust.__path__, "llm_locust."):
    importlib.import_module(m.name)
changed = sorted(k for k in set(before) | set(vars(ConnectionPool)) if before.get(k) is not vars(ConnectionPool).get(k))
from llm_locust.transport import patches
patches.install()
first = dict(vars(ConnectionPool))
patches.install()
again = sorted(k for k in first if first[k] is not vars(ConnectionPool)[k])
installed = sorted(k for k in first if first[k] is not before.get(k))
print(",".join(changed), "|", ",".join(installed), "|", ",".join(again))
"""
    changed, installed, again = (part.strip() for part in _run_python(code).split("|"))
    assert changed == "", f"importing llm_locust changed ConnectionPool.{changed}"
    assert installed == "_connect_socket,_create_tcp_socket,_is_socket_alive,_setup_proxy,get_socket"
    assert again == "", "a second install() changed ConnectionPool again"


def test_chosen_metric_subsets_name_only_vocabulary_metrics() -> None:
    """Charts and tables that show a chosen subset of the metrics name only metrics of `metrics/vocabulary.py`, and
    the /llm page's series are columns of llm_timeseries.csv."""
    import re

    from llm_locust.metrics.vocabulary import LATENCY_METRICS, SERIES_LATENCIES, SERIES_PERCENTILES, latency_key
    from llm_locust.report.charts import CURVE_METRICS, LOAD_METRICS
    from llm_locust.report.distributions import STEP_METRICS
    from llm_locust.report.tables import LATENCY_KEYS
    from llm_locust.results.files import TIMESERIES_COLUMNS
    from llm_locust.runtime.webui import PAGE, PAGE_LATENCIES

    for subset in (CURVE_METRICS, LOAD_METRICS, STEP_METRICS, LATENCY_KEYS, PAGE_LATENCIES):
        assert set(subset) <= set(LATENCY_METRICS), subset
    page_series = set(re.findall(r'\["(\w+_ms_p\d+)"', PAGE.read_text(encoding="utf-8")))
    assert page_series, "the page's chart series were not found"
    assert page_series <= {latency_key(m, p) for m in SERIES_LATENCIES for p in SERIES_PERCENTILES}
    assert page_series <= set(TIMESERIES_COLUMNS)


def test_results_writer_never_reaches_back_into_run_state() -> None:
    """`RunState` owns the `ResultsWriter` and hands it `RunSources`; the writer does not import the state."""
    import ast
    from pathlib import Path

    from llm_locust.runtime import results_writer

    tree = ast.parse(Path(results_writer.__file__).read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "llm_locust.runtime.state" not in imported
