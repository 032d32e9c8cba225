"""Symbol matches and source-first, against hand-worked orders."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import HashingEmbedder

from codesearch import CodeSearch
from codesearch.ranking import ARTICLE, DEFAULT, Ranking, query_identifiers, rerank, resolve_ranking, symbol_names


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("raise_for_status", ["raise_for_status"]),
        ("UnrewindableBodyError", ["unrewindablebodyerror"]),
        ("echo", ["echo"]),  # a one-word query is a name
        ("where is Session.send called", ["session.send", "send"]),
        ("why does raise_for_status fail on 404", ["raise_for_status"]),
        ("how does the HTTPAdapter pick a pool", ["httpadapter"]),
        ("send the body again", []),  # plain English never counts
        ("don't send the password to another site", []),
        ("", []),
    ],
)
def test_query_identifiers(query: str, names: list[str]) -> None:
    assert query_identifiers(query) == names


def test_symbol_names() -> None:
    assert symbol_names("Session.rebuild_method") == ("session.rebuild_method", "rebuild_method")
    assert symbol_names("super_len") == ("super_len",)
    assert symbol_names("Foo::bar") == ("foo::bar", "bar")
    assert symbol_names("(*Client).Do") == ("(*client).do", "do")


def test_rerank_by_hand() -> None:
    kinds = ["test", "source", "doc", "source", "source"]
    ranked = [(0, 9.0), (1, 8.0), (2, 7.0), (3, 6.0)]
    # Source-first, penalty 2: effective positions 0:2, 1:2, 2:6, 3:4; the tie at 2 goes to source.
    assert [i for i, _ in rerank(ranked, kinds, Ranking(symbol_matches=False, non_source_penalty=2.0))] == [1, 0, 3, 2]
    # Penalty 1.5: 0:1.5, 1:2, 2:4.5, 3:4 -- a clearly better test hit stays ahead.
    assert [i for i, _ in rerank(ranked, kinds, Ranking(symbol_matches=False, non_source_penalty=1.5))] == [0, 1, 3, 2]
    assert rerank(ranked, kinds, Ranking(symbol_matches=False, non_source_penalty=1.0)) == ranked
    # A definition named in the query goes first, even one the mode did not retrieve (score 0.0).
    assert rerank(ranked, kinds, DEFAULT, defining=[4, 3])[:2] == [(4, 0.0), (3, 6.0)]
    assert rerank(ranked, kinds, ARTICLE, defining=[4]) == ranked


def test_ranking_validation() -> None:
    assert resolve_ranking("article") is ARTICLE
    with pytest.raises(ValueError, match="unknown ranking"):
        resolve_ranking("best")
    with pytest.raises(ValueError, match="non_source_penalty"):
        Ranking(non_source_penalty=0.5)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pkg" / "models.py").write_text(
        "class Response:\n"
        "    def raise_for_status(self):\n"
        '        """Raise an error for a bad status."""\n'
        "        if self.status_code >= 400:\n"
        "            raise HTTPError(self.status_code)\n"
    )
    (root / "pkg" / "client.py").write_text(
        "def fetch(url):\n    response = get(url)\n    response.raise_for_status()\n    return response\n"
    )
    (root / "tests" / "test_models.py").write_text(
        "def test_raise_for_status():\n    r = Response()\n    r.raise_for_status()\n    r.raise_for_status()\n"
    )
    return root


def test_identifier_query_finds_its_definition_first(repo: Path, tmp_path: Path) -> None:
    cs = CodeSearch(repo, model=HashingEmbedder(), index_dir=tmp_path / "index")
    for mode in ("bm25", "dense", "hybrid"):
        assert cs.search("raise_for_status", k=3, mode=mode)[0].path == "pkg/models.py", mode
    article = CodeSearch(repo, model=HashingEmbedder(), index_dir=tmp_path / "index", ranking="article")
    assert article.search("raise_for_status", k=1, mode="bm25")[0].path == "tests/test_models.py"


def test_source_first_can_be_turned_off(repo: Path, tmp_path: Path) -> None:
    cs = CodeSearch(repo, model=HashingEmbedder(), index_dir=tmp_path / "index",
                    ranking=Ranking(symbol_matches=False))
    with_penalty = cs.search("raise_for_status r Response", k=3, mode="bm25")
    without = cs.search("raise_for_status r Response", k=3, mode="bm25", source_first=False)
    assert without[0].kind == "test"  # the test mentions every word, most often
    assert with_penalty[0].kind == "source"
    assert {h.path for h in with_penalty} == {h.path for h in without}  # demoted, never dropped
