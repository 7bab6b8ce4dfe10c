"""Pure workload pieces: length distributions, exact prompts, dataset loading and errors, images, providers."""

from __future__ import annotations

import random
import statistics
import struct
import time
import zlib

import pytest
from harness.tokenizer import build_tokenizer

from llm_locust.errors import ConfigError
from llm_locust.transport.providers import check_length_control, parse_header
from llm_locust.workload.datasets import load_dataset
from llm_locust.workload.input_images import generated_pool, parse_size, png_bytes
from llm_locust.workload.lengths import parse_length
from llm_locust.workload.prefix_blocks import BlockTexts
from llm_locust.workload.prefix_pool import PrefixPool
from llm_locust.workload.prompts import PromptMaker, WordPool
from llm_locust.workload.providers import completion_path, length_fields
from llm_locust.workload.tokens import WordCounter, token_counter


# -- distributions -----------------------------------------------------------------------------
def test_plain_integer_and_fixed():
    rng = random.Random(0)
    assert parse_length("512", "--prompt-tokens").sample(rng) == 512
    assert parse_length("fixed:7", "--max-tokens").sample(rng) == 7
    assert str(parse_length("512", "--x")) == "512"


@pytest.mark.parametrize(
    ("text", "mean", "sd"),
    [("uniform:100,300", 200, 57.7), ("normal:500,50", 500, 50), ("lognormal:400,200", 400, 200)],
)
def test_distributions_have_their_moments_and_are_seeded(text, mean, sd):
    dist = parse_length(text, "--prompt-tokens")
    samples = [dist.sample(random.Random(f"s{i}")) for i in range(4000)]
    assert abs(statistics.mean(samples) - mean) < 0.05 * mean
    assert abs(statistics.stdev(samples) - sd) < 0.1 * sd
    assert min(samples) >= 1 and all(isinstance(s, int) for s in samples)
    again = [dist.sample(random.Random(f"s{i}")) for i in range(4000)]
    assert samples == again


def test_clamping_bounds():
    dist = parse_length("normal:100,80,50,120", "--max-tokens")
    samples = [dist.sample(random.Random(i)) for i in range(2000)]
    assert min(samples) == 50 and max(samples) == 120
    assert str(dist) == "normal:100,80,50,120"


@pytest.mark.parametrize(
    ("text", "why"),
    [("0", ">= 1"), ("abc", "numbers"), ("uniform:5", "2 parameter"), ("uniform:9,3", "MIN <= MAX"),
     ("normal:-1,3", "MEAN > 0"), ("gauss:1,2", "unknown"), ("uniform:1.5,3", "whole"), ("normal:a,b", "numbers"),
     ("lognormal:10,2,5", "2 or 4")],
)  # fmt: skip
def test_invalid_distributions_are_one_line_errors_naming_the_option(text, why):
    with pytest.raises(ConfigError) as e:
        parse_length(text, "--prompt-tokens")
    message = str(e.value)
    assert message.startswith(f"--prompt-tokens {text!r}") and why in message and "\n" not in message


# -- prompts -----------------------------------------------------------------------------------
def test_word_prompts_are_exact_varied_and_share_the_prefix():
    counter = WordCounter()
    prefix, prefix_tokens = PrefixPool(BlockTexts(counter, seed=5), 1, 20).prefix(0)
    assert prefix_tokens == 20 and PrefixPool(BlockTexts(counter, seed=5), 1, 20).prefix(0)[0] == prefix
    a = PromptMaker(counter, random.Random(1))
    b = PromptMaker(counter, random.Random(2))
    text_a, n_a = a.prompt(300, prefix, prefix_tokens)
    text_b, _ = b.prompt(300, prefix, prefix_tokens)
    assert n_a == 320 == counter.count(text_a)
    assert text_a.startswith(prefix + " ") and text_b.startswith(prefix + " ") and text_a != text_b
    words = text_a.split()[20:]
    assert len(set(words)) > 100  # varied text, no pad token


def test_word_pool_windows_are_n_words_from_varied_places_and_grow_exactly():
    """A window is n consecutive words of the pool (single spaces, no empty word), from a place its caller's
    generator draws (the same seed: the same windows); asking for longer windows grows the pool, and windows across
    the old end and the new words are whole words too."""
    pool = WordPool(["alpha", "be", "c"])
    assert pool.window(0, random.Random(1)) == ""
    first = [pool.window(n, random.Random(n)) for n in (1, 7, 300)]
    assert [len(text.split(" ")) for text in first] == [1, 7, 300]
    assert all(word in ("alpha", "be", "c") for text in first for word in text.split(" "))
    assert first == [pool.window(n, random.Random(n)) for n in (1, 7, 300)]
    rng = random.Random(5)
    assert len({pool.window(50, rng) for _ in range(20)}) == 20  # other places, other texts
    size = len(pool.text.split(" "))
    long = pool.window(size, random.Random(2))  # more than a quarter of the pool: it grows first
    assert len(pool.text.split(" ")) >= 4 * size and len(long.split(" ")) == size
    assert long.split(" ") == pool.text.split(" ")[pool.text[: pool.text.index(long)].count(" ") :][:size]
    assert "  " not in pool.text and not pool.text.startswith(" ") and not pool.text.endswith(" ")


def test_word_prompts_are_cheap_windows_of_one_pool_per_process():
    """With the word approximation every user's prompts are windows of the process's one pool: exact lengths, other
    text for other users' generators, and a 100k-token prompt in well under a millisecond of CPU."""
    counter = WordCounter()
    a, b = PromptMaker(counter, random.Random(1)), PromptMaker(counter, random.Random(2))
    assert a.pool is b.pool is not None
    text_a, n_a = a.prompt(100_000)
    text_b, _ = b.prompt(100_000)
    assert n_a == 100_000 == counter.count(text_a) == len(text_a.split(" ")) and text_a != text_b
    t0 = time.process_time()
    for _ in range(20):
        a.prompt(100_000)
    assert (time.process_time() - t0) / 20 < 0.002  # was 6 ms drawn word by word (a generous bound)


def test_tokenizer_prompts_have_exact_token_lengths(tmp_path):
    counter = token_counter(str(build_tokenizer(tmp_path / "tokenizer.json")))
    prefix, prefix_tokens = PrefixPool(BlockTexts(counter, seed=None), 1, 64).prefix(0)
    maker = PromptMaker(counter, random.Random(3))
    for n in (1, 17, 256, 2000):
        text, tokens = maker.prompt(n, prefix, prefix_tokens)
        assert tokens == counter.count(text) == 64 + n


def test_tokenizer_file_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"--tokenizer .*no such file"):
        token_counter(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not a tokenizer")
    with pytest.raises(ConfigError, match=r"--tokenizer .*not a Hugging Face tokenizer\.json"):
        token_counter(str(bad))


# -- datasets ----------------------------------------------------------------------------------
def write(path, text, encoding="utf-8"):
    path.write_bytes(text.encode(encoding))
    return str(path)


def test_jsonl_prompts_bodies_and_conversations(tmp_path):
    path = write(tmp_path / "d.jsonl", '{"prompt": "hello there", "max_tokens": 5}\n\n"just text"\n'
                 '{"messages": [{"role": "user", "content": "hi"}], "temperature": 0}\n'
                 '{"conversations": [{"from": "human", "value": "q1"}, {"from": "gpt", "value": "a1"}, '
                 '{"from": "human", "value": "q2"}]}\n')  # fmt: skip
    data = load_dataset(path, "")
    assert data[0] == ({"prompt": "hello there", "max_tokens": 5},)
    assert data[1] == ({"prompt": "just text"},)
    assert data[2][0]["temperature"] == 0 and data[2][0]["messages"][0]["content"] == "hi"
    first, second = data[3]
    assert [m["content"] for m in first["messages"]] == ["q1"]
    assert [(m["role"], m["content"]) for m in second["messages"]] == [("user", "q1"), ("assistant", "a1"),
                                                                      ("user", "q2")]  # fmt: skip
    assert load_dataset(path, "") is data  # loaded once per process


def test_sharegpt_json_and_csv(tmp_path):
    sharegpt = write(tmp_path / "s.json", '[{"id": "x", "conversations": [{"from": "system", "value": "be brief"},'
                     '{"from": "human", "value": "one"}, {"from": "gpt", "value": "two"}]},'
                     '{"conversations": []}]')  # fmt: skip
    ((request,),) = load_dataset(sharegpt, "")
    assert [m["role"] for m in request["messages"]] == ["system", "user"]
    table = write(tmp_path / "p.csv", 'prompt,max_tokens\n"a, b",3\nsecond prompt,\n')
    assert load_dataset(table, "") == (({"prompt": "a, b", "max_tokens": 3},), ({"prompt": "second prompt"},))
    single = write(tmp_path / "q.txt", "question\nwhat is up\n")
    assert load_dataset(single, "csv") == (({"prompt": "what is up"},),)


@pytest.mark.parametrize(
    ("name", "content", "fmt", "expected"),
    [
        ("missing.jsonl", None, "", r"--dataset .*missing.jsonl: No such file"),
        ("empty.jsonl", "\n  \n", "", r"empty.jsonl: the file is empty"),
        ("bad.jsonl", '{"prompt": "a"}\n{"prompt": "b"}\n{"prompt": oops}\n', "", r"bad.jsonl:3: malformed JSON"),
        ("field.jsonl", '{"prompt": "a"}\n{"text": "b"}\n', "", r"field.jsonl:2: no 'prompt', 'messages' .*has: text"),
        ("type.jsonl", '{"prompt": 5}\n', "", r"type.jsonl:1: 'prompt' must be a non-empty string"),
        ("tokens.jsonl", '{"prompt": "a", "max_tokens": 0}\n', "", r"tokens.jsonl:1: 'max_tokens' must be"),
        ("bad.json", '[{"conversations": [\n{"from": "human", "value": "a"},\n]}]', "", r"bad.json:2: malformed"),
        ("role.json", '[{"conversations": [{"from": "alien", "value": "a"}]}]', "", r"entry 0: turn 0: 'from'"),
        (
            "nouser.json",
            '[{"conversations": [{"from": "gpt", "value": "a"}]}, {"conversations": []}]',
            "",
            r"nouser.json: no prompt found \(conversations without a user turn are skipped\)",
        ),
        ("obj.json", '{"prompt": "a"}', "", r"obj.json: expected a JSON list"),
        ("cols.csv", "a,b\n1,2\n", "", r"cols.csv:1: no 'prompt' column \(columns: a, b\)"),
        ("blank.csv", 'prompt\nx\n""\n', "", r"blank.csv:3: empty 'prompt'"),
        ("data.txt", "x", "", r"cannot tell the format .*--dataset-format"),
    ],
)
def test_bad_dataset_files_give_one_line_errors(tmp_path, name, content, fmt, expected):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError, match=expected) as e:
        load_dataset(str(path), fmt)
    assert "\n" not in str(e.value)


def test_wrong_encoding_names_the_line(tmp_path):
    path = tmp_path / "latin.jsonl"
    path.write_bytes('{"prompt": "ok"}\n{"prompt": "caf\u00e9"}\n'.encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin.jsonl:2: not UTF-8"):
        load_dataset(str(path), "")


# -- images ------------------------------------------------------------------------------------
def test_generated_png_is_valid_and_varied():
    data = png_bytes(40, 24, random.Random(0))
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height, depth, colour = struct.unpack(">IIBB", data[16:26])
    assert (width, height, depth, colour) == (40, 24, 8, 2)
    length = struct.unpack(">I", data[33:37])[0]
    raw = zlib.decompress(data[41 : 41 + length])
    assert len(raw) == 24 * (1 + 40 * 3)
    pool = generated_pool(32, 32, 1)
    assert len(set(pool)) == len(pool) > 1 and pool[0].startswith("data:image/png;base64,")
    assert parse_size("512x256") == (512, 256)
    with pytest.raises(ConfigError, match="--image-size"):
        parse_size("512")


# -- providers ---------------------------------------------------------------------------------
def test_length_fields_per_server_family():
    assert length_fields("vllm", "chat", 64, True) == {"max_tokens": 64, "ignore_eos": True, "min_tokens": 64}
    assert length_fields("sglang", "completions", 8, True) == {"max_tokens": 8, "ignore_eos": True, "min_tokens": 8}
    assert length_fields("llamacpp", "chat", 9, True) == {"max_tokens": 9, "ignore_eos": True, "n_predict": 9}
    assert length_fields("openai", "chat", 9, False) == {"max_completion_tokens": 9}
    assert length_fields("tgi", "chat", 9, False) == {"max_tokens": 9}
    for family in ("openai", "tgi"):
        with pytest.raises(ConfigError, match=r"--ignore-eos: .*no request field"):
            check_length_control(family, True)


def test_paths_and_header_parsing():
    assert completion_path("openai-compatible", "chat") == "/v1/chat/completions"
    assert completion_path("azure", "completions", "gpt 4", "2024-10-21") == (
        "/openai/deployments/gpt%204/completions?api-version=2024-10-21"
    )
    assert completion_path("databricks", "chat", "llama") == "/serving-endpoints/llama/invocations"
    assert parse_header("X-Team:  a: b ") == ("X-Team", "a: b")
    with pytest.raises(ConfigError) as e:
        parse_header("no colon secret")
    assert "secret" not in str(e.value)
