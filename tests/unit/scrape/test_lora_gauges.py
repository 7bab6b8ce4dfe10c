"""vLLM's LoRA gauge in the server maps (pure): a `name{label}` candidate reads the latest series' listed names."""

from __future__ import annotations

from llm_locust.scrape.prometheus import extract, parse
from llm_locust.scrape.server_maps import BUILTIN_MAPS, all_maps, detect, family_name, split_label

# as vLLM exports it: every label combination seen, valued at the Unix time it was last set
PAGE = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="base",engine="0"} 3
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="2",waiting_lora_adapters="",running_lora_adapters="sql"} 1700000000.5
vllm:lora_requests_info{max_lora="2",waiting_lora_adapters="chat,code",running_lora_adapters="sql,math"} 1700000005.5
vllm:lora_requests_info{max_lora="2",waiting_lora_adapters="code",running_lora_adapters="sql,math,chat"} 1700000002.5
"""


def test_label_candidates_split_and_name_their_family() -> None:
    assert split_label("vllm:lora_requests_info{running_lora_adapters}") == (
        "vllm:lora_requests_info",
        "running_lora_adapters",
    )
    assert split_label("vllm:prompt_tokens_total") == ("vllm:prompt_tokens_total", "")
    assert family_name("vllm:lora_requests_info{waiting_lora_adapters}") == "vllm:lora_requests_info"


def test_the_latest_series_gives_the_adapters_running_and_waiting() -> None:
    family, families = parse(PAGE, None, all_maps())
    assert family == "vllm"
    values = extract(families, BUILTIN_MAPS["vllm"], 0.0).values
    assert values["lora_running_adapters"] == 2 and values["lora_waiting_adapters"] == 2  # the latest series
    assert values["running"] == 3


def test_a_server_without_adapters_has_no_lora_columns_and_an_idle_one_zero() -> None:
    _, families = parse(PAGE.split("# TYPE vllm:lora")[0], None, all_maps())
    assert "lora_running_adapters" not in extract(families, BUILTIN_MAPS["vllm"], 0.0).values
    idle = '# TYPE vllm:lora_requests_info gauge\nvllm:lora_requests_info{max_lora="1",waiting_lora_adapters="",running_lora_adapters=""} 1\n'  # noqa: E501
    _, families = parse(idle, BUILTIN_MAPS["vllm"], all_maps())
    values = extract(families, BUILTIN_MAPS["vllm"], 0.0).values
    assert values["lora_running_adapters"] == 0 and values["lora_waiting_adapters"] == 0
    assert detect({"vllm:lora_requests_info"}, all_maps()) == "vllm"
