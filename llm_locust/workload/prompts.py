"""Synthetic prompts with an exact token length, made of varied English words.

Each prompt is random words from a fixed vocabulary (no repeated pad token, so no accidental
prefix-cache hits), sized with the run's token counter (`tokens.py`): with the word approximation a prompt of n tokens
is n words — `FRESH_WORDS` drawn afresh, then consecutive words at a random place of the process's `WordPool`, one
slice of text however long the prompt (a 100k-token prompt drawn word by word cost 6 ms of the loop that also reads
every stream); with a tokenizer, only vocabulary words that are one token after a space are used and the whole prompt
is counted and trimmed/extended until it has exactly n tokens. A shared prefix (`--prefix-tokens`, `prefix_pool.py`)
goes in front, followed by a space and the varied part.
"""

from __future__ import annotations

import random
from array import array
from itertools import accumulate

from llm_locust.workload.tokens import TokenCounter

VOCABULARY = (
    "the of and to in is was for on are with as his they be at one have this from or had by hot "
    "word but what some we can out other were all there when up use your how said an each she "
    "which do their time if will way about many then them write would like so these her long make "
    "thing see him two has look more day could go come did number sound no most people my over "
    "know water than call first who may down side been now find any new work part take get place "
    "made live where after back little only round man year came show every good me give our under "
    "name very through just form sentence great think say help low line differ turn cause much mean "
    "before move right boy old too same tell does set three want air well also play small end put "
    "home read hand port large spell add even land here must big high such follow act why ask men "
    "change went light kind off need house picture try us again animal point mother world near build "
    "self earth father head stand own page should country found answer school grow study still learn "
    "plant cover food sun four between state keep eye never last let thought city tree cross farm "
    "hard start might story saw far sea draw left late run while press close night real life few north"
).split()
_MIN_SINGLE_TOKEN_WORDS = 32
_FIX_ROUNDS = 64
FRESH_WORDS = 32
"""The first words of a pooled prompt are drawn afresh: two prompts share a prefix as rarely as wholly random ones
(a window's place alone repeats once in tens of thousands of prompts: a prefix-cache hit on a real server)."""
POOL_MIN_WORDS = 65_536
POOL_WINDOWS = 4
"""A `WordPool` holds at least `POOL_WINDOWS` times the words of the longest window asked of it (and
`POOL_MIN_WORDS`): windows of one length start at that many times their length of different places."""


class WordPool:
    """Random words of a vocabulary as one text, with the offset of every word: n consecutive words (a window) are
    one slice. Drawn from its own fixed-seed generator, grown by doubling as longer windows are asked; one per
    vocabulary and process (`word_pool`), shared by its users, each placing its windows with its own generator."""

    def __init__(self, vocabulary: list[str]) -> None:
        self._vocabulary = vocabulary
        self._rng = random.Random("llm-locust word pool")
        self.text = ""
        self._starts = array("Q")  # each word's offset in `text`, then len(text) + 1

    def reserve(self, n: int) -> None:
        """Grow the pool, if need be, to serve windows of `n` words."""
        words = len(self._starts) - 1 if self._starts else 0
        if words >= max(POOL_MIN_WORDS, POOL_WINDOWS * n):
            return
        more = self._rng.choices(self._vocabulary, k=max(POOL_MIN_WORDS, POOL_WINDOWS * n, 2 * words) - words)
        base = self._starts.pop() if self._starts else 0  # the old end + 1: where the first new word starts
        self.text = (self.text + " " if self.text else "") + " ".join(more)
        self._starts.extend(accumulate((len(word) + 1 for word in more), initial=base))

    def window(self, n: int, rng: random.Random, within: int | None = None) -> str:
        """`n` consecutive words of the pool, from a place drawn with `rng` (among the first `within` words: then the
        same `rng` state gives the same words in every process, however far each one's pool has grown), joined by
        single spaces."""
        self.reserve(max(n, within or 0))
        starts = self._starts
        i = rng.randrange((within or len(starts) - 1) - n + 1)
        return self.text[starts[i] : starts[i + n] - 1]


_POOLS: dict[tuple[str, ...], WordPool] = {}


def word_pool(vocabulary: list[str]) -> WordPool:
    """This process's `WordPool` of `vocabulary`."""
    key = tuple(vocabulary)
    pool = _POOLS.get(key)
    if pool is None:
        pool = _POOLS[key] = WordPool(vocabulary)
    return pool


class PromptMaker:
    """Makes prompts of an exact token length (as counted by `counter`); one per user, seeded."""

    def __init__(self, counter: TokenCounter, rng: random.Random) -> None:
        self.counter = counter
        self.rng = rng
        self.words = single_token_words(counter)
        self.lead_words = leading_words(counter, self.words)
        self.pool = word_pool(self.words) if counter.exact_words else None

    def prompt(self, tokens: int, prefix: str = "", prefix_tokens: int = 0) -> tuple[str, int]:
        """A prompt of `tokens` tokens after `prefix` (of `prefix_tokens` tokens); returns (text, its counted tokens).

        The count is the tokenizer's verdict on the final text (prefix included): equal to
        prefix_tokens + `tokens` except with tokenizers that merge across spaces.
        """
        head = prefix + " " if prefix else ""
        if self.pool is not None:  # the word approximation: every word one token, at the start too
            fresh = self.rng.choices(self.words, k=min(tokens, FRESH_WORDS))
            rest = self.pool.window(tokens - len(fresh), self.rng)
            return head + " ".join(fresh) + (" " + rest if rest else ""), prefix_tokens + tokens
        words = self.rng.choices(self.words, k=tokens)
        if not head and words:
            words[0] = self.rng.choice(self.lead_words)
        return fit(self.counter, head, words, prefix_tokens + tokens, self.rng, self.words)


def fit(
    counter: TokenCounter, head: str, words: list[str], target: int, rng: random.Random, vocabulary: list[str]
) -> tuple[str, int]:
    """`head` + `words`, words dropped or added until the text counts `target` tokens (or close).

    Returns (text, counted tokens); the count is exact, the length is `target` unless the
    tokenizer merges across word boundaries in a way no single word can fix.
    """
    n = counter.count(head + " ".join(words))
    for _ in range(_FIX_ROUNDS):
        if n == target:
            break
        per_word = max(1.0, n / max(1, len(words)))  # steps sized by the text's own tokens per word
        if n > target and len(words) > 1:
            del words[-max(1, min(int((n - target) / per_word), len(words) - 1)) :]
        elif n < target:
            words.extend(rng.choices(vocabulary, k=max(1, int((target - n) / per_word))))
        else:
            break
        n = counter.count(head + " ".join(words))
    return head + " ".join(words), n


def leading_words(counter: TokenCounter, words: list[str]) -> list[str]:
    """The words of `words` that are also one token at the start of a text (no space before them)."""
    if counter.exact_words:
        return words
    leading = [w for w in words if counter.count(w) == 1]
    return leading or words


def single_token_words(counter: TokenCounter) -> list[str]:
    """The vocabulary words that count as one token after a space (all of them for the approximation)."""
    if counter.exact_words:
        return VOCABULARY
    singles = [w for w in VOCABULARY if counter.count(" " + w) == 1]
    return singles if len(singles) >= _MIN_SINGLE_TOKEN_WORDS else VOCABULARY
