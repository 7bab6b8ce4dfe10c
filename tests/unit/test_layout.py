"""The package layout's promises: kept import paths, stages free of Locust and gevent, no patches at import."""

import importlib
import subprocess
import sys

import pytest
from conftest import ROOT


def test_locustfile_import_paths_still_give_the_same_objects() -> None:
    """`llm_locust.plugin` / `.users` / `.shape` are thin re-exports of the objects in their stage folders (`.users`
    also of the types a scenario's call returns, documented in docs/scenarios.md): every name a locustfile imports
    today stays."""
    from llm_locust.runtime.answer import Answer, CheckedAnswer, ToolCallAnswer, Usage
    from llm_locust.runtime.plugin import install
    from llm_locust.runtime.shape import SweepShape
    from llm_locust.runtime.users import (
        ChatAgentUser,
        ChatCompletionsUser,
        CompletionsUser,
        ConverseUser,
        EmbeddingsUser,
        GeminiUser,
        LLMUser,
        MessagesAgentUser,
        MessagesUser,
        ResponsesAgentUser,
        ResponsesUser,
    )

    kept = {
        "llm_locust.plugin": {"install": install},
        "llm_locust.users": {
            "ChatCompletionsUser": ChatCompletionsUser,
            "CompletionsUser": CompletionsUser,
            "ConverseUser": ConverseUser,
            "EmbeddingsUser": EmbeddingsUser,
            "GeminiUser": GeminiUser,
            "LLMUser": LLMUser,
            "MessagesUser": MessagesUser,
            "ResponsesUser": ResponsesUser,
            "ChatAgentUser": ChatAgentUser,
            "ResponsesAgentUser": ResponsesAgentUser,
            "MessagesAgentUser": MessagesAgentUser,
            "Answer": Answer,
            "CheckedAnswer": CheckedAnswer,
            "ToolCallAnswer": ToolCallAnswer,
            "Usage": Usage,
        },
        "llm_locust.shape": {"SweepShape": SweepShape},
    }
    for path, objects in kept.items():
        module = importlib.import_module(path)
        if path == "llm_locust.users":  # also the users of APIs added since (the next test: exactly the registry's)
            assert set(module.__all__) >= set(objects), path
        else:
            assert sorted(module.__all__) == sorted(objects), path
        for name, obj in objects.items():
            assert getattr(module, name) is obj, f"{path}.{name}"


def test_the_built_in_users_are_made_from_the_api_entries() -> None:
    """Every User class an API's entry names (`Api.user`, `Api.agent_user`) is made once, from the entry — its API, an
    agent or not — and exported by `llm_locust.users` beside `LLMUser` and the answer's types; no other user is."""
    import llm_locust.users as public
    from llm_locust.apis import BUILT_IN
    from llm_locust.runtime.users import BUILT_IN_USERS, ApiUser

    named = {(a.user, a.endpoint, False) for a in BUILT_IN} | {(a.agent_user, a.endpoint, True) for a in BUILT_IN}
    named = {entry for entry in named if entry[0]}
    made = {(name, user.endpoint, user.agent) for name, user in BUILT_IN_USERS.items()}
    assert made == named and len(named) >= 10
    for name, user in BUILT_IN_USERS.items():
        assert issubclass(user, ApiUser) and user.abstract and user.__name__ == name
        assert getattr(public, name) is user
    assert sorted(public.__all__) == sorted([*BUILT_IN_USERS, "LLMUser", "Answer", "CheckedAnswer", "ToolCallAnswer",
                                             "Usage"])  # fmt: skip


PURE = (
    "llm_locust",
    "llm_locust.config",
    "llm_locust.workload",
    "llm_locust.metrics",
    "llm_locust.apis",
    "llm_locust.results",
    "llm_locust.scrape",
    "llm_locust.report",
    "llm_locust.sim",
    "llm_locust.load",
    "llm_locust.transport.ca_file",
    "llm_locust.transport.proxy",
    "llm_locust.transport.settings",
    "llm_locust.transport.endpoint_settings",
    "llm_locust.option_values",
    "llm_locust.errors",
    "llm_locust.redact",
    "llm_locust.cli",
    "llm_locust.demo",
)
"""What must run without Locust or gevent: every stage but the Locust wiring (`runtime/`, with the pacer, the
controller and the sweep shape; the `plugin`/`users`/`shape` re-exports) and the transport's I/O."""

STAGES = ("transport", "workload", "scrape", "results", "metrics", "load", "report", "sim", "export")
"""The stages: each receives its own settings group from the wiring and imports neither `config` nor `runtime`."""


@pytest.mark.parametrize("stage", STAGES)
def test_stage_imports_neither_config_nor_runtime(stage: str) -> None:
    """No module of the stage imports `llm_locust.config` or `llm_locust.runtime`, not even under TYPE_CHECKING or
    inside a function."""
    import ast
    from pathlib import Path

    import llm_locust

    found = []
    for path in sorted((Path(llm_locust.__file__).parent / stage).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):  # `from llm_locust import config` names the package as an alias
                module = node.module or ""
                names = [f"{module}.{alias.name}" for alias in node.names] if module == "llm_locust" else [module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            if any(name.startswith(("llm_locust.config", "llm_locust.runtime")) for name in names):
                found.append(f"{path.name}:{node.lineno}")
    assert found == [], f"{stage} imports config or runtime: {found}"


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


def test_chosen_metric_subsets_name_only_declared_metrics() -> None:
    """Charts and tables that show a chosen subset of the metrics name only latencies declared in
    `metrics/declarations.py` (the /llm page's cards and breakdowns too), and the /llm page's series are columns of
    llm_timeseries.csv."""
    import re

    from llm_locust.metrics.declarations import latencies, names
    from llm_locust.metrics.drift import DRIFT_LATENCIES
    from llm_locust.metrics.vocabulary import SERIES_PERCENTILES, latency_key
    from llm_locust.report.charts import CURVE_METRICS
    from llm_locust.report.distributions import STEP_METRICS
    from llm_locust.report.tables import row_latencies
    from llm_locust.report.timeline import TIMELINE_LATENCIES
    from llm_locust.results.files import timeseries_columns
    from llm_locust.runtime.webui import PAGE, page_html

    for subset in (CURVE_METRICS, STEP_METRICS, DRIFT_LATENCIES, TIMELINE_LATENCIES, row_latencies()):
        assert set(subset) <= set(names()), subset
    page_series = set(re.findall(r'\["(\w+_ms_p\d+)"', page_html()))
    assert page_series, "the page's chart series were not found"
    assert page_series <= {latency_key(m, p) for m in names(latencies(series=True)) for p in SERIES_PERCENTILES}
    assert page_series <= set(timeseries_columns())
    page_picks = set(re.findall(r"\bm\.(\w+)_ms\b", PAGE.read_text(encoding="utf-8")))  # its cards and breakdowns
    assert page_picks and page_picks <= set(names()), page_picks


def test_results_writer_never_reaches_back_into_run_state() -> None:
    """The `RunState`'s lead (`lead.Lead`) owns the `ResultsWriter` and hands it `WriterInputs`; the writer imports
    neither the lead nor the state."""
    import ast
    from pathlib import Path

    from llm_locust.runtime import results_writer

    tree = ast.parse(Path(results_writer.__file__).read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not imported & {"llm_locust.runtime.state", "llm_locust.runtime.lead"}


def test_a_user_reaches_only_the_users_part_of_the_state() -> None:
    """The state is split by role (`runtime/state.py`); what a user runs on — the scenario client, the users part
    and the shared part — imports nothing of the lead's (its module, the load controller, the results writer) nor the
    whole state, even indirectly; the users module itself reaches its part through `plugin.user_context` only."""
    graph = _module_imports()
    lead_side = {f"llm_locust.runtime.{m}" for m in ("state", "lead", "control", "results_writer", "live_export")}

    def reached(module: str) -> set[str]:
        seen: set[str] = set()
        todo = [module]
        while todo:
            for imported in graph.get(todo.pop(), ()):
                if imported not in seen:
                    seen.add(imported)
                    todo.append(imported)
        return seen

    for module in ("llm_client", "users_part", "shared"):
        assert not reached(f"llm_locust.runtime.{module}") & lead_side, module
    assert not graph["llm_locust.runtime.users"] & lead_side


def _module_imports(package: str = "llm_locust") -> dict[str, set[str]]:
    """Every module of `package` → the `llm_locust` modules it imports anywhere in its source (at the top, in a
    function, under TYPE_CHECKING); `from package import name` counts as importing `package.name` when that is a
    module."""
    import ast
    import importlib.util
    import pkgutil
    from pathlib import Path

    def is_module(name: str) -> bool:
        try:
            return importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:
            return False

    root = importlib.import_module(package)
    graph: dict[str, set[str]] = {}
    for name in [package, *(m.name for m in pkgutil.walk_packages(root.__path__, f"{package}."))]:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None, name
        tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
        parent_package = name if spec.submodule_search_locations else name.rpartition(".")[0]
        imported: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package, one level up per further dot
                    parent = parent_package.rsplit(".", node.level - 1)[0] if node.level > 1 else parent_package
                    base = f"{parent}.{base}" if base else parent
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    imported.add(full if is_module(full) else base)
        graph[name] = {module for module in imported if module.startswith("llm_locust")}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of `graph` (its modules in order, the first repeated at the end), [] when there is none."""
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> list[str]:
        if name in path:
            return [*path[path.index(name) :], name]
        if name in done:
            return []
        for imported in sorted(graph.get(name, ())):
            if found := visit(imported, [*path, name]):
                return found
        done.add(name)
        return []

    for name in sorted(graph):
        if found := visit(name, []):
            return found
    return []


def test_simulator_imports_no_client_module() -> None:
    """The simulator is the oracle the client is checked against: it imports nothing of `llm_locust` outside `sim/`
    (constants it shares with the client are its own copies, checked equal in tests/unit/sim/test_sim_units.py)."""
    graph = _module_imports("llm_locust.sim")
    assert len(graph) > 10, sorted(graph)
    outside = {
        name: sorted(m for m in imported if not m.startswith("llm_locust.sim")) for name, imported in graph.items()
    }
    assert {name: modules for name, modules in outside.items() if modules} == {}


def test_simulator_has_no_import_cycle() -> None:
    """No module of `sim/` imports, directly or through others, a module that imports it back."""
    assert _cycle(_module_imports("llm_locust.sim")) == []


LAYERS = (
    ("llm_locust", "llm_locust.errors"),
    ("llm_locust.option_values", "llm_locust.redact"),
    ("llm_locust.metrics",),
    ("llm_locust.apis",),
    ("llm_locust.workload", "llm_locust.scrape", "llm_locust.transport"),
    ("llm_locust.load",),
    ("llm_locust.results", "llm_locust.export"),
    ("llm_locust.report",),
    ("llm_locust.config",),
    ("llm_locust.runtime", "llm_locust.sim"),
    ("llm_locust.plugin", "llm_locust.users", "llm_locust.shape", "llm_locust.demo"),
    ("llm_locust.cli",),
)
"""The import direction, lowest first: a module imports only its own stage and the stages of lower layers. The
stages of one layer know nothing of each other: the transport imports nothing of the workload (nor of the load or the
wiring, above it) — what it needs of them (the due-time wait, the token counter, the next send due) reaches it as
values. The simulator (`llm_locust.sim`) imports nothing outside itself and only `demo` and `cli` start it. Only the
locustfiles' entry points (`plugin`, `users`, `shape`) import `runtime`."""


def _layer(module: str) -> tuple[int, str]:
    """(layer, stage) of an `llm_locust` module: its stage is the package right under `llm_locust`."""
    stage = ".".join(module.split(".")[:2])
    for index, stages in enumerate(LAYERS):
        if stage in stages:
            return index, stage
    raise AssertionError(f"{module}: in no layer of LAYERS")


def test_every_module_imports_only_its_stage_and_lower_layers() -> None:
    """The import-direction contract, for every module of the package (imports inside functions and under
    TYPE_CHECKING included); and no import cycle anywhere."""
    graph = _module_imports()
    assert len(graph) > 100, len(graph)
    wrong = []
    for module, imported in sorted(graph.items()):
        layer, stage = _layer(module)
        for target in sorted(imported):
            target_layer, target_stage = _layer(target)
            if target_stage != stage and target_layer >= layer:
                wrong.append(f"{module} -> {target}")
    assert wrong == []

    def importers(stage: str) -> set[str]:
        """The modules outside `stage` that import it."""
        return {
            m for m, imported in graph.items() if not m.startswith(stage) and any(t.startswith(stage) for t in imported)
        }

    assert importers("llm_locust.runtime") <= {"llm_locust.plugin", "llm_locust.users", "llm_locust.shape"}
    assert importers("llm_locust.sim") <= {"llm_locust.demo", "llm_locust.cli"}
    assert _cycle(graph) == []


def test_every_cited_markdown_file_is_in_the_repository() -> None:
    """Every `*.md` file that code, docs or config names (`docs/metrics.md`, a relative link `../../README.md`) exists
    in the repository: relative to its root or to the citing file's folder. Web addresses are not citations."""
    import re

    root = ROOT
    tracked = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout.split()
    cited = re.compile(r"(?<![\w/.:-])(?:\.\.?/)*[\w-]+(?:/[\w.-]+)*\.md\b")
    web = re.compile(r"[a-z]+://\S+")
    missing, count = [], 0
    for name in tracked:
        path = root / name
        if path.suffix not in (".py", ".md", ".toml", ".cfg", ".txt", ".yml", ".yaml", ".html", ".js", ".sh", "") or (
            not path.is_file()
        ):
            continue
        text = web.sub("", path.read_text(encoding="utf-8", errors="replace"))
        for ref in cited.findall(text):
            count += 1
            if not ((root / ref).is_file() or (path.parent / ref).is_file()):
                missing.append(f"{name}: {ref}")
    assert count > 50, count
    assert missing == []


def test_settings_groups_are_the_stages_own_and_their_fields_distinct() -> None:
    """`Settings` holds one group per stage, each defined in a stage's package, and no field name is in two groups:
    summary.json's flat "settings" mapping (`Settings.public`) loses none."""
    from dataclasses import fields
    from typing import get_type_hints

    from llm_locust.config.settings import Settings

    groups = get_type_hints(Settings)
    assert {cls.__module__.split(".")[1] for cls in groups.values()} <= set(STAGES)
    names = [f.name for cls in groups.values() for f in fields(cls)]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
