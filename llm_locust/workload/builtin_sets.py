"""Built-in offline data sets (`--dataset builtin:NAME[:N]`): items with known answers, generated from `--seed`.

No download and no licence to check: each item is made here, deterministically from the seed (the same seed, the
same items; no seed: seed 0), its truth computed as it is made. `N` items (default `DEFAULT_ITEMS`, at most
`MAX_ITEMS`):

- `arithmetic`: "What is 37 + 58? Answer with the number only." → expected "95". The operation is drawn: `+` of two
  numbers 1–99, `-` of two numbers 1–99 (the larger first: never negative), `*` of two numbers 2–12.
- `choice`: the same sums as a multiple-choice question with 4 options A–D, one of them the truth and three distinct
  wrong numbers near it: "Which number equals 37 + 58?\\nA. 93\\nB. 95\\nC. 104\\nD. 85\\nAnswer with the letter
  only." → choices ("93", "95", "104", "85"), answer "B".
- `json`: a request for a JSON object of one of three shapes ("Describe a fictional river as a JSON object with the
  fields name (a string), size (an integer from 1 to 5000), open (true or false). Answer with the JSON object
  only.") → its JSON schema (every field required, no other); scored for validity. `--response-format json_schema`
  sends each item's schema as the request's structured output.

The wording is a contract: the simulator recognises the arithmetic and multiple-choice questions in a prompt and
computes their truth itself (`llm_locust.sim.answers`, which imports nothing of this package);
`tests/unit/sim/test_sim_answers.py` checks that it does for every item of these sets. Pure.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable, Mapping
from typing import Any

from llm_locust.errors import ConfigError
from llm_locust.metrics.scoring import Reference

PREFIX = "builtin:"
"""What a `--dataset` naming a built-in set starts with."""
DEFAULT_ITEMS = 200
MAX_ITEMS = 100_000
OPERATIONS = ("+", "-", "*")

Item = tuple[str, Reference]
"""One item: its prompt and the reference its answer is scored against."""


def is_builtin(dataset: str) -> bool:
    """`dataset` (the `--dataset` value) names a built-in set."""
    return dataset.startswith(PREFIX)


def builtin_items(dataset: str, seed: int | None) -> tuple[Item, ...]:
    """The items of the built-in set `dataset` ("builtin:NAME" or "builtin:NAME:N"), generated from `seed` (None:
    0); ConfigError naming the sets, or the bad size."""
    name, _, size = dataset.removeprefix(PREFIX).partition(":")
    make = SETS.get(name)
    if make is None:
        raise ConfigError(
            f"--dataset {dataset}: no built-in set {name!r}; one of {', '.join(PREFIX + s for s in SETS)}"
        )
    try:
        count = int(size) if size else DEFAULT_ITEMS
    except ValueError:
        count = 0
    if not 1 <= count <= MAX_ITEMS:
        raise ConfigError(f"--dataset {dataset}: the item count after '{PREFIX}{name}:' must be 1..{MAX_ITEMS}")
    rng = random.Random(f"{PREFIX}{name}/{seed or 0}")
    return tuple(make(rng) for _ in range(count))


def _operation(rng: random.Random) -> tuple[int, str, int, int]:
    """A drawn operation (see the module docstring): its operands, its sign and its value."""
    op = rng.choice(OPERATIONS)
    if op == "*":
        a, b = rng.randint(2, 12), rng.randint(2, 12)
        return a, op, b, a * b
    a, b = rng.randint(1, 99), rng.randint(1, 99)
    if op == "-":
        a, b = max(a, b), min(a, b)
        return a, op, b, a - b
    return a, op, b, a + b


def arithmetic_item(rng: random.Random) -> Item:
    """One arithmetic question and its expected number."""
    a, op, b, value = _operation(rng)
    return f"What is {a} {op} {b}? Answer with the number only.", Reference(expected=str(value))


def choice_item(rng: random.Random) -> Item:
    """One multiple-choice question (4 options A–D, the truth among them) and its right letter."""
    a, op, b, value = _operation(rng)
    wrong = rng.sample([value + d for d in range(-10, 11) if d and value + d >= 0], 3)
    right = rng.randrange(4)
    options = [*wrong[:right], value, *wrong[right:]]
    letters = string.ascii_uppercase[:4]
    lines = "\n".join(f"{letter}. {option}" for letter, option in zip(letters, options, strict=True))
    prompt = f"Which number equals {a} {op} {b}?\n{lines}\nAnswer with the letter only."
    return prompt, Reference(choices=tuple(str(o) for o in options), answer=letters[right])


_SUBJECTS = ("river", "city", "mountain", "book", "ship", "garden", "bridge", "island", "library", "orchard")
_SHAPES: tuple[tuple[tuple[str, str, Mapping[str, Any]], ...], ...] = (
    (
        ("name", "a string", {"type": "string"}),
        ("size", "an integer from 1 to 5000", {"type": "integer", "minimum": 1, "maximum": 5000}),
        ("open", "true or false", {"type": "boolean"}),
    ),
    (
        ("name", "a string", {"type": "string"}),
        ("rating", "a number from 0 to 5", {"type": "number", "minimum": 0, "maximum": 5}),
        (
            "tags",
            "a list of 1 to 3 strings",
            {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
        ),
    ),
    (
        ("id", "an integer from 1 to 999", {"type": "integer", "minimum": 1, "maximum": 999}),
        ("status", 'one of "new", "active", "closed"', {"type": "string", "enum": ["new", "active", "closed"]}),
        (
            "owner",
            "an object with a string field name",
            {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
                "additionalProperties": False,
            },
        ),
    ),
)


def json_item(rng: random.Random) -> Item:
    """One request for a JSON object of a drawn shape about a drawn subject, and its schema."""
    subject, shape = rng.choice(_SUBJECTS), rng.choice(_SHAPES)
    fields = ", ".join(f"{name} ({said})" for name, said, _ in shape)
    schema = {
        "type": "object",
        "properties": {name: dict(field) for name, _, field in shape},
        "required": [name for name, _, _ in shape],
        "additionalProperties": False,
    }
    prompt = (
        f"Describe a fictional {subject} as a JSON object with the fields {fields}. Answer with the JSON object only."
    )
    return prompt, Reference(schema=schema)


SETS: dict[str, Callable[[random.Random], Item]] = {
    "arithmetic": arithmetic_item,
    "choice": choice_item,
    "json": json_item,
}
"""The built-in sets by name: each makes one item from the set's RNG."""
