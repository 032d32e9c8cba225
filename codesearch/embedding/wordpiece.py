"""Token ids for a BERT-style tokenizer, a whitespace-separated run at a time, each run's ids remembered.

A BERT tokenizer (``BertNormalizer`` → ``BertPreTokenizer`` → ``WordPiece``)
cuts a text into words at whitespace and at each punctuation character, then
into word pieces one word at a time, and its normalizer (lower case, accents,
control characters) works a character at a time: the ids of a run of text
between two whitespace characters never depend on its neighbours. Source code
repeats its runs (``self.assertEqual(``, ``return``, ``}``) thousands of
times, so :class:`WordPieceWords` splits a text at whitespace and looks each
run's ids up in a dictionary. A run it has not seen is tokenized once: a
plain-ASCII run by splitting it into words with one regular expression and
asking the tokenizer's own ``WordPiece`` model for each word's pieces
(remembered too), any other run by the tokenizer itself. The ids are those the
tokenizer gives for the whole text, in the same order (a test compares them
on generated text and on a real repository). Python's ``str.split`` also
splits at a few control characters that the normalizer removes instead
(``\\v``, ``\\f``, ``\\x1c``-``\\x1f``, ``\\x85``): a text holding one goes to
the tokenizer whole, as does every text of a tokenizer of another shape
(:meth:`WordPieceWords.of` answers ``None``).

The static tier tokenizes each chunk once; on code this takes about a third of
the time the tokenizer takes, and that was the largest share of a first
answer's work.
"""

from __future__ import annotations

import json
import re
from itertools import chain
from typing import Any

_PLAIN = re.compile(r"[\x21-\x7e]+")
"""A run of printable ASCII: split into words here, lower-cased as the normalizer does."""
_PUNCT = r"!-/:-@\[-`{-~"
_WORDS = re.compile(rf"[^{_PUNCT}]+|[{_PUNCT}]")
"""``BertPreTokenizer`` within a run of printable ASCII: the letters and digits between punctuation, and each
punctuation character alone."""
_SPLIT_DIFFERS = re.compile("[\x0b\x0c\x1c-\x1f\x85]")
"""Characters ``str.split`` splits at and the normalizer removes (joining their neighbours)."""


class _Pieces(dict[str, tuple[int, ...]]):
    """A word of printable ASCII → its WordPiece ids (``drop`` left out), filled on first sight."""

    def __init__(self, model: Any, drop: int | None) -> None:
        super().__init__()
        self.model, self.drop = model, drop

    def __missing__(self, word: str) -> tuple[int, ...]:
        ids = tuple(t.id for t in self.model.tokenize(word) if t.id != self.drop)
        self[word] = ids
        return ids


class _Runs(dict[str, tuple[int, ...]]):
    """A run of text between whitespace (``foo.bar(x)``) → its ids (``drop`` left out), filled on first sight."""

    def __init__(self, tokenizer: Any, lowercase: bool, drop: int | None) -> None:
        super().__init__()
        self.tokenizer, self.lowercase, self.drop = tokenizer, lowercase, drop
        self.pieces = _Pieces(tokenizer.model, drop)

    def __missing__(self, run: str) -> tuple[int, ...]:
        if _PLAIN.fullmatch(run):
            words = _WORDS.findall(run.lower() if self.lowercase else run)
            ids = tuple(chain.from_iterable(map(self.pieces.__getitem__, words)))
        else:
            ids = tuple(i for i in self.tokenizer.encode(run, add_special_tokens=False).ids if i != self.drop)
        self[run] = ids
        return ids


class WordPieceWords:
    """Token ids of texts for one BERT-style tokenizer (see the module's docs)."""

    MAX_RUNS = 1 << 19
    """Distinct runs remembered before the dictionaries start again (about 100 MB at most)."""

    def __init__(self, tokenizer: Any, lowercase: bool, drop_id: int | None) -> None:
        self._tokenizer, self._lowercase, self._drop = tokenizer, lowercase, drop_id
        self._runs = _Runs(tokenizer, lowercase, drop_id)

    @classmethod
    def of(cls, tokenizer: Any, drop_id: int | None = None) -> WordPieceWords | None:
        """The fast path for ``tokenizer`` (``tokenizers.Tokenizer``), or ``None`` when it is not BERT-shaped.

        Args:
            tokenizer: the tokenizer, with no truncation or padding set.
            drop_id: a token id left out of every answer (the static tier leaves out the unknown token).
        """
        config = json.loads(tokenizer.to_str())
        normalizer = config.get("normalizer") or {}
        pre = config.get("pre_tokenizer") or {}
        model = config.get("model") or {}
        if (normalizer.get("type"), pre.get("type"), model.get("type")) != ("BertNormalizer", "BertPreTokenizer",
                                                                             "WordPiece"):
            return None
        if not normalizer.get("clean_text", True):  # then control characters stay in and split nothing
            return None
        return cls(tokenizer, bool(normalizer.get("lowercase", True)), drop_id)

    def ids(self, text: str) -> list[int] | None:
        """``text``'s token ids without special tokens (``drop_id`` left out), or ``None``: ask the tokenizer."""
        if _SPLIT_DIFFERS.search(text) is not None:
            return None
        if len(self._runs) > self.MAX_RUNS:
            self._runs = _Runs(self._tokenizer, self._lowercase, self._drop)
        return list(chain.from_iterable(map(self._runs.__getitem__, text.split())))


__all__ = ["WordPieceWords"]
