"""The scenario client (`self.llm`) and the example scenarios (locustfiles/scenarios/), through master + 2 workers
against the simulator: named requests as Locust rows, `breakdowns.name` in summary.json and `name` in
requests.jsonl, each counted as the simulator served them (joined through the server's request id)."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path
from types import ModuleType

import gevent
import pytest
from conftest import ROOT, options, quit_master, read_summary, run_local, start_master_and_workers
from locust import task

from llm_locust.metrics.record import ErrorKind
from llm_locust.results.request_lines import REQUESTS_FILE
from llm_locust.runtime.users import ChatCompletionsUser, LLMUser
from llm_locust.sim import run_sim

EXAMPLES = ROOT / "locustfiles" / "scenarios"


def load(path: Path) -> ModuleType:
    """The locustfile at `path`, imported."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def run_distributed(sim, tmp_path: Path, user_classes: list, users: int, seconds: float, *extra: str):
    """Master + 2 workers running `user_classes` against `sim` for `seconds`, stopped gracefully (each user ends its
    task: every request sent is reported); (master environment, summary, requests.jsonl lines, simulator trace)."""
    opts = options("--host", sim.url, "--results-dir", str(tmp_path), "--requests-jsonl", *extra)
    master_env, master, _ = start_master_and_workers(opts, user_classes=user_classes)
    master_env.stop_timeout = 3  # the workers' too (the spawn message): a stopped user ends its task first
    master.start(users, spawn_rate=users)
    gevent.sleep(seconds)
    master.stop()  # returns once the workers' users have ended their tasks
    gevent.sleep(3.5)  # the workers' next stats report: the last requests' metrics
    quit_master(master_env)
    lines = [json.loads(line) for line in (tmp_path / REQUESTS_FILE).read_text().splitlines()]
    return master_env, read_summary(tmp_path), lines, sim.trace()


def check_names(master_env, summary: dict, lines: list[dict], served: list[dict], names: set[str]) -> Counter:
    """Every request of the run was served once and has its line; per name, the Locust row, the `name` breakdown and
    the lines count the same requests. The count per name."""
    served_ids = {record["id"] for record in served}
    assert len(served_ids) == len(served) == len(lines)
    assert {line["request_id"] for line in lines} == served_ids
    per_name = Counter(line["name"] for line in lines)
    assert set(per_name) == names, per_name
    rows = {name: entry for (name, method), entry in master_env.runner.stats.entries.items() if method == "POST"}
    breakdown = {entry["label"]: entry for entry in summary["breakdowns"]["name"]}
    for name, n in per_name.items():
        assert rows[name].num_requests == n, name
        counted = breakdown[name]
        assert counted["requests_ok"] + counted["requests_failed"] + counted["requests_cancelled"] == n, name
        assert rows[name].num_failures == counted["requests_failed"], name
    return per_name


@pytest.fixture(scope="module")
def sim():
    with run_sim("--ttft-ms", "10", "--itl-ms", "2", "--output-tokens", "12", "--tool-call-rate", "0.6") as sim:
        yield sim


def test_retrieval_embeds_then_answers(sim, tmp_path):
    sim.reset()
    module = load(EXAMPLES / "retrieval.py")
    master_env, summary, lines, served = run_distributed(sim, tmp_path, [module.RetrievalUser], 4, 2.5)
    per_name = check_names(master_env, summary, lines, served, {"embed question", "answer with context"})
    assert per_name["embed question"] == per_name["answer with context"] > 10
    assert summary["failures"] == {}


def test_support_chat_checks_the_answer_and_follows_up_when_asked(sim, tmp_path):
    sim.reset()
    module = load(EXAMPLES / "support_chat.py")
    master_env, summary, lines, served = run_distributed(sim, tmp_path, [module.SupportUser], 4, 3)
    per_name = check_names(master_env, summary, lines, served, {"refund", "refund follow-up", "outage"})
    checked = {entry["label"]: entry for entry in summary["breakdowns"]["name"]}["refund"]
    # a follow-up exactly when the check failed the refund answer: counted as `check`, its timings kept
    assert checked["failures"].get("check", 0) == per_name["refund follow-up"] > 0
    assert summary["failures"] == {"check": per_name["refund follow-up"]}
    assert per_name["refund"] > per_name["outage"] > 0  # weights 3 : 1
    failed = [line for line in lines if line["error_kind"] == "check"]
    assert len(failed) == per_name["refund follow-up"] and all(line["t_first"] and line["t_last"] for line in failed)
    assert summary["metrics"]["ttft_failed_ms"]["count"] == len(failed)


def test_agent_runs_its_tools_between_steps(sim, tmp_path):
    sim.reset()
    module = load(EXAMPLES / "agent_tools.py")
    master_env, summary, lines, served = run_distributed(sim, tmp_path, [module.AgentUser], 4, 2.5)
    names = {line["name"] for line in lines}
    assert {"step 1", "step 2"} <= names <= {f"step {n}" for n in range(1, module.MAX_STEPS + 1)}
    check_names(master_env, summary, lines, served, names)
    assert summary["failures"] == {}
    by_id = {record["id"]: record for record in served}
    steps = Counter(int(line["name"].split()[1]) for line in lines)
    called = Counter(int(line["name"].split()[1]) for line in lines if by_id[line["request_id"]]["tool_call"])
    for step in range(1, module.MAX_STEPS):  # a next step exactly after each answer that called a tool
        assert steps[step + 1] == called[step], (steps, called)
    for line in lines:  # which carries back the results the functions computed, one per call
        record = by_id[line["request_id"]]
        if line["name"] != "step 1":
            assert record["carried_tool_results"] and record["carried_tool_results"] == record["carried_tool_calls"]


def test_sequential_taskset_mixes_chat_responses_and_embeddings(sim, tmp_path):
    sim.reset()
    module = load(EXAMPLES / "mixed_sequence.py")
    master_env, summary, lines, served = run_distributed(sim, tmp_path, [module.ResearchUser], 3, 2.5)
    per_name = check_names(master_env, summary, lines, served, {"draft", "expand", "index"})
    assert per_name["draft"] >= per_name["expand"] >= per_name["index"] >= per_name["draft"] - 3  # in order
    assert {line["endpoint"] for line in lines} == {"chat", "responses", "embeddings"}
    assert summary["failures"] == {}


class ScriptedChat(LLMUser):
    """The built-in chat user's request, written as a scenario."""

    @task
    def ask(self):
        self.llm.chat.completions.create(messages=[{"role": "user", "content": "one two three"}], max_tokens=24)


class BuiltInChat(ChatCompletionsUser):
    pass


def truth_ms(served: list[dict]) -> dict[str, list[float]]:
    """The simulator's own TTFT (request received to first token written) and ITL of every request, ms."""
    ttft = [(r["token_times"][0] - r["t_recv"]) * 1e3 for r in served]
    itl = [(b - a) * 1e3 for r in served for a, b in zip(r["token_times"], r["token_times"][1:], strict=False)]
    return {"ttft_ms": ttft, "itl_ms": itl}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


@pytest.mark.alone  # p50s within 1 ms of the trace
@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_scripted_chat_user_measures_as_the_built_in_one(tmp_path, pki, scheme):
    """Against the simulator's fixed timing, the scenario and the built-in user give the same TTFT and ITL: p50
    within 1 ms of what the simulator did (its trace); the p99 is bounded loosely (a loaded machine's stalls)."""
    tls = ("--tls-cert", str(pki / "good.crt"), "--tls-key", str(pki / "good.key")) if scheme == "https" else ()
    trust = ("--ca-bundle", str(pki / "ca.pem")) if scheme == "https" else ()
    with run_sim("--ttft-ms", "50", "--itl-ms", "10", "--output-tokens", "24", *tls) as sim:
        for user in (ScriptedChat, BuiltInChat):
            sim.reset()
            folder = tmp_path / user.__name__
            opts = options("--host", sim.url, "--max-tokens", "24", "--results-dir", str(folder),
                           *trust)  # fmt: skip
            run_local(opts, users=4, seconds=3, user_classes=[user], stop_timeout_s=3)
            summary = read_summary(folder)
            assert summary["failures"] == {} and summary["throughput"]["requests_ok"] >= 20, user
            truth = truth_ms([r for r in sim.trace() if r["token_times"]])
            for metric in ("ttft_ms", "itl_ms"):
                for q, key in ((50, "p50"), (99, "p99")):
                    measured, true = summary["metrics"][metric][key], percentile(truth[metric], q)
                    print(f"{scheme} {user.__name__} {metric} {key}: {measured:.3f} ms, truth {true:.3f} ms")
                    # the p99 of ~40 TTFTs and ~1,000 gaps on 2 cores shared by a dozen test processes: one stall of
                    # either process moves it by tens of ms (measured under load: p50 within 0.4 ms, p99 within 0-26 ms)
                    assert abs(measured - true) < (1.0 if key == "p50" else 50.0), (user.__name__, metric, key)


class Judged(LLMUser):
    """Fails one answer in two by its own check; raises in its own code once."""

    judged = 0

    @task
    def ask(self):
        Judged.judged += 1
        with self.llm.chat.completions.create(messages=[{"role": "user", "content": "hi"}], max_tokens=8,
                                              name="judged", catch_response=True) as answer:  # fmt: skip
            assert answer.ok and answer.text and answer.request_id and answer.ttft_s and len(answer.itl_s) == 7
            if Judged.judged % 2:
                answer.failure("odd")
            if Judged.judged == 4:
                raise RuntimeError("the scenario's own bug")


def test_a_check_failure_is_counted_with_its_timings_and_a_scenario_error_loses_nothing(fast_sim, tmp_path):
    fast_sim.reset()
    opts = options("--host", fast_sim.url, "--results-dir", str(tmp_path), "--requests-jsonl")
    env = run_local(opts, users=1, seconds=1.5, user_classes=[Judged], stop_timeout_s=3)
    summary = read_summary(tmp_path)
    lines = [json.loads(line) for line in (tmp_path / REQUESTS_FILE).read_text().splitlines()]
    served = fast_sim.trace()
    assert len(lines) == len(served) == Judged.judged  # the request whose task raised is counted too
    failed = [line for line in lines if line["error_kind"] == "check"]
    assert summary["failures"] == {"check": len(failed)} and len(failed) == (Judged.judged + 1) // 2
    assert all(line["t_first"] and line["t_last"] and line["output_tokens"] == 8 for line in failed)
    assert summary["metrics"]["ttft_failed_ms"]["count"] == len(failed)
    row = env.stats.entries[("judged", "POST")]
    assert row.num_requests == len(lines) and row.num_failures == len(failed)
    assert any("the scenario's own bug" in error["msg"] for error in env.runner.exceptions.values())  # Locust's


def test_the_smallest_scenario_is_the_one_the_readme_shows(fast_sim, tmp_path):
    """README's "Write your own scenario" and docs/scenarios.md open with locustfiles/scenario.py (at most 15 lines),
    which runs."""
    code = (ROOT / "locustfiles" / "scenario.py").read_text().split('"""', 2)[2].strip()
    assert len(code.splitlines()) <= 15
    for page in ("README.md", "docs/scenarios.md"):
        assert f"```python\n{code}\n```" in (ROOT / page).read_text(), page
    module = load(ROOT / "locustfiles" / "scenario.py")
    fast_sim.reset()
    opts = options("--host", fast_sim.url, "--results-dir", str(tmp_path))
    env = run_local(opts, users=2, seconds=1, user_classes=[module.Assistant], stop_timeout_s=3)
    assert env.stats.entries[("ask", "POST")].num_requests == len(fast_sim.trace()) > 0
    assert [entry["label"] for entry in read_summary(tmp_path)["breakdowns"]["name"]] == ["ask"]


def test_an_answer_reads_its_record():
    """What a scenario reads of an answer is its measured record: text apart from reasoning, tool calls parsed."""
    from llm_locust.metrics.record import RequestRecord, ToolCall
    from llm_locust.users import Answer, ToolCallAnswer, Usage  # the public path docs/scenarios.md gives

    record = RequestRecord("chat", t_send=1.0, t_first=1.05, t_last=1.2, content_text="Hi", reasoning_text="hmm",
                           tool_calls=(ToolCall("c1", "add", '{"a": 1, "b": 2}'), ToolCall("c2", "f", '{"a": ')),
                           prompt_tokens=9, usage_completion_tokens=4, finish_reason="tool_calls",
                           server_request_id="chatcmpl-1")  # fmt: skip
    record.itl_us.extend([50_000, 100_000])
    answer = Answer(record, "ask")
    assert (answer.text, answer.reasoning, answer.finish_reason, answer.request_id) == ("Hi", "hmm", "tool_calls",
                                                                                          "chatcmpl-1")  # fmt: skip
    assert answer.tool_calls == (ToolCallAnswer("c1", "add", {"a": 1, "b": 2}), ToolCallAnswer("c2", "f", {}))
    call = answer.tool_calls[0]  # an object with attributes, as documented, not a dict
    assert (call.id, call.name, call.arguments) == ("c1", "add", {"a": 1, "b": 2})
    assert answer.usage == Usage(9, 4, None) and answer.itl_s == (0.05, 0.1)
    assert answer.ttft_s == pytest.approx(0.05) and answer.e2e_s == pytest.approx(0.2)
    assert answer.ok and answer.error is None and answer.record is record
    record.fail(ErrorKind.CHECK, "no amount")
    assert not answer.ok and answer.error == "check: no amount"


class ScriptedGemini(LLMUser):
    """A scenario of Gemini calls, as Google's SDK names them, judged on the answer's text."""

    @task
    def ask(self):
        with self.llm.models.generate_content_stream(
            contents=[{"role": "user", "parts": [{"text": "one two three"}]}],
            systemInstruction={"parts": [{"text": "be brief"}]},
            generationConfig={"maxOutputTokens": 6},
            name="gemini-ask",
            catch_response=True,
        ) as answer:
            if (
                answer.usage.completion_tokens != 6
                or len(answer.text.split()) != 6
                or answer.finish_reason != "MAX_TOKENS"
            ):
                answer.failure(f"unexpected answer: {answer.text!r} {answer.usage} {answer.finish_reason}")


def test_a_gemini_scenario_names_the_model_in_the_path(sim, tmp_path, monkeypatch):
    """`self.llm.models.generate_content_stream(...)` with --provider gemini: the run's model in the path (none in
    the body: the simulator refuses one there), the key in x-goog-api-key, the answer's text, usage and finish
    reason as Gemini streamed them; every request served once and counted under its name."""
    monkeypatch.setenv("GEMINI_API_KEY", "AIza-scenario-key")
    sim.reset()
    master_env, summary, lines, served = run_distributed(
        sim, tmp_path, [ScriptedGemini], 2, 2.0, "--provider", "gemini", "--model", "llm-locust-sim"
    )
    per_name = check_names(master_env, summary, lines, served, {"gemini-ask"})
    assert per_name["gemini-ask"] >= 10 and summary["failures"] == {}
    assert {line["endpoint"] for line in lines} == {"gemini"} and {r["model"] for r in served} == {"llm-locust-sim"}
    assert {r["prompt_tokens"] for r in served} == {5} and {line["prompt_tokens"] for line in lines} == {5}
