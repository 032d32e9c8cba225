"""The static tier's tokenizing fast path gives the tokenizer's own ids, on generated text and on a real repository."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from codesearch.chunking import document_text
from codesearch.chunking.definitions import chunk_definitions
from codesearch.embedding.catalogue import resolve_model
from codesearch.embedding.static import StaticEmbedder
from codesearch.embedding.wordpiece import WordPieceWords


@pytest.fixture(scope="module")
def bert() -> Tokenizer:
    """MiniLM's own tokenizer (BertNormalizer, BertPreTokenizer, WordPiece), as the static model ships it."""
    folder = resolve_model("minilm").local_path()
    assert folder is not None
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def _reference(tokenizer: Tokenizer, text: str, drop: int | None) -> list[int]:
    return [i for i in tokenizer.encode(text, add_special_tokens=False).ids if i != drop]


# Code-like text: identifiers, operators, every kind of whitespace and control character, accents, CJK, emoji.
_ALPHABET = st.sampled_from(
    list("abcXYZ_019 \t\n\r.(){}[]<>=+-*/\\'\"#@$%^&|~`:;,?!") + ["\x00", "\x07", "\x0b", "\x0c", "\x1c", "\x1f",
     "\x7f", "\x85", "\xa0", "\u200b", "\u3000", "\ufffd", "é", "Ä", "İ", "ß", "Σ", "日本", "ŉ", "🙂", "\u0301", "ﬁ"])
_WORDS = st.sampled_from(["self", "assertEqual", "HTTPAdapter", "__init__", "get_netrc_auth", "return", "0x1F",
                          "unbelievablylongidentifiernamewithoutanybreaks" * 3, "naïve", "Übergröße", "файл"])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(_ALPHABET, _WORDS), max_size=60).map("".join))
def test_ids_equal_the_tokenizers_on_generated_text(bert: Tokenizer, text: str) -> None:
    words = WordPieceWords.of(bert, drop_id=100)
    assert words is not None and words.ids(text) in (None, _reference(bert, text, 100))
    again = words.ids(text)  # from the remembered runs
    assert again is None or again == _reference(bert, text, 100)


def test_only_texts_whose_split_differs_go_to_the_tokenizer(bert: Tokenizer) -> None:
    words = WordPieceWords.of(bert)
    assert words is not None
    assert words.ids("naïve café 日本語 déjà-vu") == _reference(bert, "naïve café 日本語 déjà-vu", None)
    assert words.ids("a\x0cb") is None and words.ids("a\x85b") is None and words.ids("a\x1cb") is None
    assert words.ids("") == [] and words.ids(" \n\t ") == []


def test_other_tokenizers_have_no_fast_path(bert: Tokenizer) -> None:
    from tokenizers import models, pre_tokenizers

    other = Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    other.pre_tokenizer = pre_tokenizers.Whitespace()
    assert WordPieceWords.of(other) is None
    assert WordPieceWords.of(bert) is not None


@pytest.mark.slow
def test_static_vectors_are_bit_identical_on_a_real_repository(requests_corpus: Path) -> None:
    static = StaticEmbedder("minilm", export_progress=False)
    texts = []
    for path in sorted(requests_corpus.rglob("*")):
        if path.is_file() and path.suffix in {".py", ".rst", ".md", ".txt", ".cfg", ".toml"}:
            rel = str(path.relative_to(requests_corpus))
            texts += [document_text(rel, c.text) for c in chunk_definitions(rel, path.read_text(errors="replace"))]
    assert len(texts) > 300
    fast = static.embed_documents(texts)
    words, static._words = static._words, None
    try:
        slow = static.embed_documents(texts)
    finally:
        static._words = words
    assert words is not None and np.array_equal(fast, slow)
