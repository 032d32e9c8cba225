"""The ranking pipeline, stage by stage, against hand-worked fixtures."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import HashingEmbedder
from hypothesis import given, settings
from hypothesis import strategies as st

from codesearch import CodeSearch
from codesearch.chunking.symbols import SymbolTable, definition_names
from codesearch.ranking import (
    ARTICLE,
    DEFAULT,
    STAGES,
    ChunkFacts,
    FileFacts,
    Ranking,
    analyze_query,
    path_classes,
    path_words,
    rank_scores,
    resolve_ranking,
)
from codesearch.ranking import candidates as C
from codesearch.ranking import stages as S
from codesearch.ranking.paths import same_word, squash_name

# --- query profile -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "is_symbol", "symbols"),
    [
        ("raise_for_status", True, (("raise_for_status",),)),
        ("UnrewindableBodyError", True, (("UnrewindableBodyError",),)),
        ("Router", True, (("Router",),)),
        ("Session.send", True, (("Session.send", "send"),)),
        ("Sinatra::Base", True, (("Sinatra::Base", "Base"),)),
        ("_private", True, (("_private",),)),
        ("compose", False, (("compose",),)),  # a plain word: a name only where one is defined
        ("where is Session.send called", False, (("Session.send", "send"),)),
        ("why does raise_for_status fail on 404", False, (("raise_for_status",),)),
        ("how does the HttpAdapter pick a pool", False, (("HttpAdapter",),)),
        ("how Encoder converts values to JSON", False, (("Encoder",),)),  # acronyms are not identifiers
        ("HTTP router and middleware composition", False, ()),
        ("send the body again", False, ()),
    ],
)
def test_query_profile(query: str, is_symbol: bool, symbols: tuple[tuple[str, ...], ...]) -> None:
    profile = analyze_query(query)
    assert (profile.is_symbol, profile.symbols) == (is_symbol, symbols)


@pytest.mark.parametrize(
    ("query", "asks_types"),
    [
        ("reducer type definition", True),
        ("middleware type signature and API shape", True),
        ("the shapes a config may take", True),
        ("which interfaces a handler implements", True),
        ("how listeners are subscribed and notified", False),
        ("how TypeAdapter factories are chosen", False),  # a name holding "Type" is not the word
        ("types", True),  # one plain word: it asks for the types
        ("Types", False),  # a symbol query
    ],
)
def test_query_profile_says_whether_a_sentence_asks_about_types(query: str, asks_types: bool) -> None:
    assert analyze_query(query).asks_types is asks_types


def test_query_words_drop_stopwords_and_split_identifiers() -> None:
    assert analyze_query("how are the HttpClient plugins installed").words == {
        "httpclient", "http", "client", "plugins", "installed"}


def test_same_word_takes_forms_of_one_word() -> None:
    for a, b in [("test", "tests"), ("parse", "parser"), ("preprocessed", "preprocessing"),
                 ("dependency", "dependencies"), ("route", "router")]:
        assert same_word(a, b) and same_word(b, a), (a, b)
    for a, b in [("cat", "category"), ("form", "formatter"), ("io", "ion"), ("read", "thread")]:
        assert not same_word(a, b), (a, b)


def test_definition_names_and_path_facts() -> None:
    assert definition_names("Session.rebuild_method") == ("Session.rebuild_method", "rebuild_method")
    assert definition_names("impl fmt::Display for Foo") == ("Foo",)
    assert definition_names("(*Client).Do") == ("Client.Do", "Do")
    assert definition_names("Rack::Request.call") == ("Rack::Request.call", "call")
    assert path_words("src/middleware/HttpClient.kt") == {"httpclient", "http", "client", "middleware"}
    assert path_words("Dapper/SqlMapper.Async.cs") >= {"sqlmapper", "async", "dapper"}
    assert path_classes("tests/test_a.py") == {"test"}
    assert path_classes("src/compat/legacy.py") == {"compat"}
    assert path_classes("examples/demo.py") == {"example"}
    # A file named as an example folder is one wherever it lies; a stem that only starts so is not.
    assert path_classes("lua/lazy/example.lua") == path_classes("src/Examples.java") == {"example"}
    assert path_classes("src/example_parser.py") == path_classes("src/exampleparser.py") == frozenset()
    assert path_classes("config.example.json") == {"config"}
    assert path_classes("pkg/__init__.py") == {"reexport"}
    assert path_classes("src/index.d.ts") == {"stub"}
    # TypeScript modules of type declarations, by name: types.ts, or any module of a types folder.
    assert path_classes("src/types/store.ts") == path_classes("server/types.ts") == {"declaration"}
    assert path_classes("src/types/Store.TS") == {"declaration"}
    # A stub or a test in a types folder keeps its own class alone (their priors would stack).
    assert path_classes("types/index.d.ts") == path_classes("src/types.d.ts") == {"stub"}
    assert path_classes("src/types/store.test.ts") == {"test"}
    assert path_classes("src/types/store.js") == path_classes("src/store_types.ts") == frozenset()
    assert path_classes("pkg/types/store.go") == path_classes("pkg/types.py") == frozenset()
    assert path_classes("docs/guide.md") == {"doc"}
    assert path_classes("src/core.py") == frozenset()


# --- a small index ---------------------------------------------------------------------

CHUNKS = [
    {"path": "src/router.go", "kind": "source", "symbols": ["Router", "Router.Handle"]},  # 0
    {"path": "src/router.go", "kind": "source", "symbols": ["Router.Mount"]},  # 1
    {"path": "src/middleware/logger.go", "kind": "source", "symbols": ["Logger"]},  # 2
    {"path": "src/middleware/logger.go", "kind": "source", "symbols": []},  # 3
    {"path": "src/tree.go", "kind": "source", "symbols": ["node.find"]},  # 4
    {"path": "tests/router_test.go", "kind": "test", "symbols": ["TestRouter"]},  # 5
    {"path": "docs/routing.md", "kind": "doc", "symbols": []},  # 6
    {"path": "src/mux.go", "kind": "source", "symbols": ["Mux", "router"]},  # 7
]


@pytest.fixture
def facts() -> ChunkFacts:
    return ChunkFacts.of_records(CHUNKS)


def test_facts_index_files_and_definitions(facts: ChunkFacts) -> None:
    assert facts.files[:2] == ["src/router.go", "src/middleware/logger.go"]
    assert facts.file_of.tolist() == [0, 0, 1, 1, 2, 3, 4, 5]
    assert facts.chunks_of[0] == [0, 1]
    assert facts.defining(["router"]) == {0: "Router", 7: "router"}
    assert facts.defining(["handle"]) == {0: "Handle"}
    # router.go, router_test.go and routing.md: "routing" and "router" share all but their last 2-3 letters.
    assert facts.files_matching("routing") == facts.files_matching("router") == {0, 3, 4}
    assert facts.files_matching("logger") == {1}


def test_path_facts_answer_as_a_scan_of_every_file_would() -> None:
    """Files sharing a (folder, stem) pair are matched once for all of them (a corpus's copies of a repository,
    ``index.ts`` in many folders of one name): the answers are those of checking every file's own words."""
    paths = [f"repo{r}/{d}/{name}" for r in range(3) for d, name in (
        ("src/routing", "Router.go"), ("lib/routing", "router_test.go"), ("src", "http_client.py"),
        ("pkg/http", "HttpClients.java"), ("docs", "routing.md"), ("deep/routers/x", "index.ts"),
        ("a", "Logger.php"), ("", "README.md"))]
    paths = [p.replace("//", "/") for p in paths]
    facts = ChunkFacts.of_records([{"path": p} for p in paths])
    for word in ("routing", "router", "http", "client", "clients", "logger", "readme", "index", "xyz", "ro", ""):
        by_scan = {n for n, p in enumerate(facts.files) if any(same_word(word, w) for w in path_words(p))}
        assert facts.files_matching(word) == by_scan, word
    for name in ("httpclient", "router", "logger", "index", "readme", "routing"):
        named = [n for n, stem in enumerate(facts.stems) if squash_name(stem) in (name, name + "s")
                 or squash_name(stem).rstrip("s") == name]
        assert facts.files_named(name) == named, name
    assert facts.files_named("httpclient") == [2, 3, 10, 11, 18, 19]  # http_client.py and HttpClients.java, 3 copies


def test_a_symbol_scan_answers_every_name_as_the_whole_table_does() -> None:
    """A repository opened for one query looks its names up symbol by symbol (SymbolScan) instead of building the
    table: the same definitions, in the same order, for every name the table holds and for names it does not."""
    from codesearch.chunking.symbols import SymbolScan

    per_chunk: list[list[str] | None] = [
        ["Session.send", "Session", "send"], None, ["send"], ["impl fmt::Display for Foo"], ["(*Client).Do", "Do"],
        [], ["App\\Http\\Kernel::handle", "Kernel->boot"], ["Σ.ΑΣ", "ΑΣ", "(*ΑΣ).Do"], ["İstanbul.Ölç"], ["()"], ["*ptr&"],
        ["HTTPAdapter.send", "HTTPAdapter.build_response"], ["Foo#bar", "foo:bar"], ["sendall", "resend"],
        ["impl Foo for (A,\n B)"], ["alpha"], ["beta"], ["gamma"]]
    whole = SymbolTable.build((i, s) for i, s in enumerate(per_chunk) if s)
    scan = SymbolScan(per_chunk)
    names = whole.names.tolist()
    assert len(names) > 20
    for name in [*names, "absent", "sen", "end", "http", "\u03c3", "\u03b1\u03c2", "client).do", "(*client", ""]:
        assert scan.get(name) == whole.get(name), name
        assert (name in scan) == (name in whole), name
    assert [d.chunk for d in scan.get("send")] == [0, 2, 11]
    assert [d.chunk for d in scan.get("gamma")] == [17]  # after a symbol written over two lines


def test_candidates_keep_only_positive_keyword_scores_and_respect_the_mask() -> None:
    lists = {"bm25": np.array([0.0, 3.0, 1.0, 0.0]), "dense": np.array([0.1, 0.2, 0.9, 0.5])}
    assert C.candidates(lists, 3) == {"bm25": [1, 2], "dense": [2, 3, 1]}
    mask = np.array([True, False, True, True])
    assert C.candidates(lists, 3, mask) == {"bm25": [2], "dense": [2, 3, 0]}


def test_candidates_of_a_list_come_only_from_the_chunks_it_covers() -> None:
    lists = {"bm25": np.array([0.0, 3.0, 1.0, 0.0]), "dense": np.array([0.1, 0.2, 0.0, 0.5])}
    read = np.array([True, True, False, True])  # chunk 2 has no transformer vector: its 0.0 means nothing
    assert C.candidates(lists, 4, covered={"dense": read}) == {"bm25": [1, 2], "dense": [3, 1, 0]}
    mask = np.array([False, True, True, True])
    assert C.candidates(lists, 4, mask, {"dense": read}) == {"bm25": [1, 2], "dense": [3, 1]}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, 0.5, 1.0, 2.0, 2.0, 7.5]), st.floats(-1, 1, width=32),
                          st.booleans(), st.sampled_from(["src/a.py", "docs/guide.md", "tests/test_a.py", "setup.cfg"])),
                min_size=1, max_size=40),
       st.integers(1, 12), st.booleans(), st.booleans())
def test_pairs_from_any_store_give_the_candidates_of_whole_score_arrays(
        rows: list[tuple[float, float, bool, str]], k: int, scoped: bool, score_share: bool) -> None:
    """The candidate stage is one rule: a store that returns (chunk, score) pairs, in any order and with rows out of
    scope it could not filter (a glob), gets what an index scoring every chunk gets."""
    facts = ChunkFacts.of_records([{"path": path} for _, _, _, path in rows])
    lists = {"bm25": np.array([b for b, _, _, _ in rows], dtype=np.float32),
             "dense": np.array([d for _, d, _, _ in rows], dtype=np.float32)}
    mask = np.array([m for _, _, m, _ in rows]) if scoped else None
    ranking = Ranking(depth=5, score_share=0.5 if score_share else 0.0)
    expected = C.candidates_from_scores(lists, facts, ranking, k, mask)
    pairs = {name: [(i, float(s)) for i, s in reversed(list(enumerate(scores)))] for name, scores in lists.items()}
    found = C.candidates_from_pairs(pairs, facts, ranking, k, keep=None if mask is None else mask.__getitem__,
                                    whole=pairs)
    assert found.ranked == expected.ranked
    for name in lists:
        assert found.scores[name].tolist() == expected.scores[name].tolist()
    assert found.ranges == expected.ranges


def test_a_vector_list_keeps_negative_products_and_a_keyword_list_drops_what_its_priors_zero() -> None:
    """A store's pairs (a corpus's Lance lists): a vector list's rows stay whatever their dot product; a keyword
    list's are weighed by the keyword priors, and a zero score goes."""
    facts = ChunkFacts(FileFacts(["a.py", "b.py", "README.md"]), {0: 0, 1: 1, 2: 2}, SymbolTable.build([]))
    vector = C.candidates_from_pairs({"dense": [(0, 0.4), (1, -0.2), (2, -0.5)]}, facts, Ranking(), 10)
    assert list(zip(vector.ranked["dense"], vector.scores["dense"].tolist())) == [(0, 0.4), (1, -0.2), (2, -0.5)]
    docs_zeroed = Ranking(prior_multipliers={"doc": 0.0})
    keyword = C.candidates_from_pairs({"bm25": [(2, 9.0), (0, 3.0), (1, 1.0)]}, facts, docs_zeroed, 10)
    assert list(zip(keyword.ranked["bm25"], keyword.scores["bm25"].tolist())) == [(0, 3.0), (1, 1.0)]
    assert C.candidates_from_pairs({"bm25": [(0, 3.0), (1, 1.0)]}, facts, Ranking(depth=1), 1).ranked == {"bm25": [0]}


def test_list_weights_follow_the_query_kind() -> None:
    r = Ranking(semantic_weight=0.6, semantic_weight_symbol=0.2, static_share=0.25)
    nl, symbol = analyze_query("how are routes matched"), analyze_query("Router")
    assert S.list_weights(nl, ["bm25", "dense"], r) == pytest.approx({"bm25": 0.4, "dense": 0.6})
    assert S.list_weights(symbol, ["bm25", "dense"], r) == pytest.approx({"bm25": 0.8, "dense": 0.2})
    assert S.list_weights(nl, ["bm25", "dense", "static"], r) == pytest.approx(
        {"bm25": 0.4, "dense": 0.45, "static": 0.15})
    assert S.list_weights(nl, ["bm25"], r) == {"bm25": 1.0}
    assert S.list_weights(nl, ["static"], r) == {"static": 1.0}


def test_fuse_is_weighted_rank_fusion_by_hand() -> None:
    fused = S.fuse({"bm25": [1, 2], "dense": [2, 3]}, {"bm25": 0.5, "dense": 0.5}, rrf_k=10)
    assert fused == pytest.approx({1: 0.5 / 11, 2: 0.5 / 12 + 0.5 / 11, 3: 0.5 / 12})
    # Only the first `depth` places vote.
    assert S.fuse({"bm25": [1, 2, 3]}, {"bm25": 1.0}, rrf_k=0, depth=2) == {1: 1.0, 2: 0.5}


def test_fuse_with_score_share_sees_how_far_apart_neighbours_are() -> None:
    aligned = {"dense": np.array([0.9, 0.89, 0.1])}  # the scores of chunks 1, 2, 3
    close = S.fuse({"dense": [1, 2, 3]}, {"dense": 1.0}, rrf_k=0, scores=aligned, score_share=0.5)
    # Places 1 and 2 are nearly tied by score, place 3 far behind: the score half says so.
    assert close[1] == pytest.approx(0.5 * 1 + 0.5 * 1.0)
    assert close[2] == pytest.approx(0.5 / 2 + 0.5 * (0.89 - 0.1) / 0.8)
    assert close[3] == pytest.approx(0.5 / 3)


def test_definitions_raise_the_defining_chunk_even_outside_the_candidates(facts: ChunkFacts) -> None:
    r = Ranking(definition_boost=2.0, definition_stem_bonus=1.5)
    scores = {2: 1.0, 4: 0.5}
    S.boost_definitions(scores, analyze_query("Router"), facts, r, top=1.0)
    # Router is defined in chunk 0 (router.go: named after it, so the stem bonus) and, in
    # another case, in chunk 7; as spelled wins.
    assert scores == {2: 1.0, 4: 0.5, 0: 3.0}
    # A qualified name finds its own method before the bare name.
    scores = {}
    S.boost_definitions(scores, analyze_query("Router.Mount"), facts, r, top=1.0)
    assert scores == {1: 2.0}


def test_embedded_names_count_only_as_spelled_and_at_the_embedded_scale(facts: ChunkFacts) -> None:
    r = Ranking(definition_boost=2.0, embedded_definition_scale=0.5, definition_stem_bonus=1.0)
    scores: dict[int, float] = {}
    S.boost_definitions(scores, analyze_query("where does the Logger write"), facts, r, top=1.0)
    assert scores == {2: 1.0}
    scores = {}
    S.boost_definitions(scores, analyze_query("where does the LOGGER write"), facts, r, top=1.0)
    assert scores == {}


def test_definitions_respect_the_scope_mask(facts: ChunkFacts) -> None:
    scores: dict[int, float] = {}
    mask = np.ones(len(CHUNKS), dtype=bool)
    mask[0] = False
    S.boost_definitions(scores, analyze_query("Router"), facts.scoped(mask), DEFAULT, top=1.0)
    assert 0 not in scores and scores  # out of scope; the other spelling (chunk 7) stands in


def test_path_words_weigh_rare_words_more(facts: ChunkFacts) -> None:
    r = Ranking(path_boost=1.0, path_name_boost=0.0)
    scores = {0: 1.0, 2: 1.0, 3: 1.0, 4: 1.0}
    S.boost_path_words(scores, analyze_query("logger middleware"), facts, r, top=1.0)
    # Both words name logger.go's path (stem and folder): the whole share; others get nothing.
    assert scores == {0: 1.0, 2: 2.0, 3: 2.0, 4: 1.0}
    # A symbol query is left to the definitions stage.
    scores = {2: 1.0}
    S.boost_path_words(scores, analyze_query("Logger"), facts, r, top=1.0)
    assert scores == {2: 1.0}


def test_path_words_below_the_least_share_gain_nothing(facts: ChunkFacts) -> None:
    query = analyze_query("where the logger walks the tree")
    # logger and tree each name one of 6 files, walks none: ln(7/2) / (2 ln(7/2) + ln 7) of the words each.
    share = math.log(3.5) / (2 * math.log(3.5) + math.log(7))
    scores = {0: 1.0, 2: 1.0, 4: 1.0}
    S.boost_path_words(scores, query, facts, Ranking(path_name_boost=0.0), top=1.0)
    assert scores == pytest.approx({0: 1.0, 2: 1.0 + share, 4: 1.0 + share})
    scores = {0: 1.0, 2: 1.0, 4: 1.0}
    S.boost_path_words(scores, query, facts, Ranking(path_name_boost=0.0, path_min_share=0.3), top=1.0)
    assert scores == {0: 1.0, 2: 1.0, 4: 1.0}
    with pytest.raises(ValueError, match="path_min_share"):
        Ranking(path_min_share=1.5)


_PATH_WORDS_IN_A_PROCESS = """
from codesearch.ranking import ChunkFacts, Ranking, analyze_query
from codesearch.ranking import stages as S
words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india"]
paths = [f"{words[i % 9]}/{words[(i * 5 + 2) % 9]}_{words[(i * 7 + 1) % 9] if i % 3 else 'main'}{i}.py" for i in range(40)]
facts = ChunkFacts.of_records([{"path": p} for p in paths])
scores = {i: 1.0 / (i + 1) for i in range(40)}
S.boost_path_words(scores, analyze_query("where " + " ".join(words[:7]) + " meet"), facts, Ranking(), top=1.0)
print(repr(sorted(scores.items())))
"""


def test_path_words_score_alike_in_every_process() -> None:
    # A query's words are a set, iterated in an order that changes with the process's hash seed; the weights they
    # sum to must not (before, three different sets of scores came out of six seeds for this query).
    import os
    import subprocess
    import sys

    outputs = set()
    for seed in range(6):
        env = {**os.environ, "PYTHONHASHSEED": str(seed)}
        done = subprocess.run([sys.executable, "-c", _PATH_WORDS_IN_A_PROCESS], env=env, capture_output=True,
                              text=True, check=True)
        outputs.add(done.stdout)
    assert len(outputs) == 1 and "(39, " in outputs.pop()


def test_a_file_called_by_its_whole_name_raises_its_best_candidate(facts: ChunkFacts) -> None:
    r = Ranking(path_boost=0.0, path_name_boost=0.5)
    scores = {0: 0.2, 1: 0.3, 2: 0.4, 4: 0.1}
    S.boost_path_words(scores, analyze_query("where routers mount sub trees"), facts, r, top=2.0)
    # "routers" names router.go (plural s dropped): its best candidate, chunk 1, gains 0.5 * top;
    # "trees" names tree.go (chunk 4). Other files and chunks are left alone.
    assert scores == pytest.approx({0: 0.2, 1: 1.3, 2: 0.4, 4: 1.1})
    # Neighbouring words joined name a file written as one word; a prefix alone does not.
    assert "routermount" in analyze_query("router mount").file_names
    scores = {0: 0.2, 7: 0.1}
    S.boost_path_words(scores, analyze_query("how the multiplexer muxes"), facts, r, top=1.0)
    assert scores == {0: 0.2, 7: 0.1}


@given(st.dictionaries(st.integers(0, 60), st.sampled_from([0.0, -0.0, 0.25, 0.5, 1.0, 1e-300, 3.0]), max_size=40))
def test_ordered_is_best_first_with_equal_scores_in_chunk_order(scores: dict[int, float]) -> None:
    assert S.ordered(scores) == sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def test_coherence_raises_each_files_best_chunk_by_its_files_share(facts: ChunkFacts) -> None:
    scores = {0: 0.4, 1: 0.4, 2: 0.6, 4: 0.2}
    S.boost_coherence(scores, facts, Ranking(coherence_boost=0.5), top=1.0)
    # File sums: router 0.8 (largest), logger 0.6, tree 0.2.
    assert scores == pytest.approx({0: 0.4 + 0.5, 1: 0.4, 2: 0.6 + 0.5 * 0.6 / 0.8, 4: 0.2 + 0.5 * 0.2 / 0.8})


def test_priors_multiply_by_path_class(facts: ChunkFacts) -> None:
    scores = {0: 1.0, 5: 1.0, 6: 1.0}
    S.apply_priors(scores, facts, Ranking(prior_multipliers={"test": 0.3, "doc": 0.5}), analyze_query("route"))
    assert scores == pytest.approx({0: 1.0, 5: 0.3, 6: 0.5})


def test_the_declaration_prior_weighs_only_a_sentence_about_behaviour() -> None:
    facts = ChunkFacts.of_records([{"path": "src/createStore.ts"}, {"path": "src/types/store.ts"}, {"path": "src/types.ts"}])
    ranking = Ranking(prior_multipliers={"declaration": 0.5})
    expected = {
        "how listeners are subscribed after a state change": [1.0, 0.5, 0.5],
        "store type definition and dispatch overloads": [1.0, 1.0, 1.0],  # asks about types: declarations answer it
        "Store": [1.0, 1.0, 1.0],  # a symbol query: definitions decide, wherever they are
    }
    for query, want in expected.items():
        scores = {0: 1.0, 1: 1.0, 2: 1.0}
        S.apply_priors(scores, facts, ranking, analyze_query(query))
        assert [scores[i] for i in range(3)] == pytest.approx(want), query
    with pytest.raises(ValueError, match="keyword_priors cannot hold 'declaration'"):
        Ranking(keyword_priors=frozenset({"declaration"}))


def test_the_pipeline_reads_the_query_for_the_declaration_prior() -> None:
    # The interface in src/types/ leads both lists; the code that does the work is a close second.
    facts = ChunkFacts.of_records([{"path": "src/types/store.ts"}, {"path": "src/createStore.ts"}, {"path": "src/index.ts"}])
    lists = {"bm25": np.array([3.0, 2.5, 0.5]), "dense": np.array([0.7, 0.6, 0.1])}
    plain = replace(DEFAULT, definitions=False, path_words=False, coherence=False, diversity=False)
    first = {query: rank_scores(query, lists, facts, plain, k=3)[0][0]
             for query in ("how listeners are notified", "store type definition")}
    assert first == {"how listeners are notified": 1, "store type definition": 0}
    assert rank_scores("how listeners are notified", lists, facts, replace(plain, priors=False), k=3)[0][0] == 0


def test_keyword_lists_take_the_priors_of_docs_and_config_before_the_cut(facts: ChunkFacts) -> None:
    lists = {"bm25": np.array([2.0, 0, 0, 0, 0, 3.0, 10.0, 0]), "dense": np.arange(8.0)}
    weighed = C.weigh_keyword_lists(lists, facts, Ranking(prior_multipliers={"test": 0.3, "doc": 0.2}))
    # The doc chunk (6) takes the docs' prior; the test chunk (5) does not (tests are not keyword priors).
    assert weighed["bm25"] == pytest.approx([2.0, 0, 0, 0, 0, 3.0, 2.0, 0])
    assert weighed["dense"] is lists["dense"]
    assert C.candidates(weighed, 2)["bm25"] == [5, 0]
    assert C.candidates(lists, 2)["bm25"] == [6, 5]
    unweighed = C.weigh_keyword_lists(lists, facts, Ranking(keyword_priors=frozenset()))
    assert unweighed["bm25"] is lists["bm25"]


def test_a_readme_neither_takes_the_keyword_lists_first_place_nor_sets_its_scale() -> None:
    # The keywords' best code chunk (0) and the transformer's (1) are close; a README matching the
    # query's prose scores far above both. Counted as the keyword list's top, it shrinks every code
    # chunk's keyword vote and the transformer's pick wins; weighed by its prior first, it does not.
    facts = ChunkFacts.of_records([{"path": "src/a.py"}, {"path": "src/b.py"}, {"path": "README.md"}, {"path": "src/c.py"}])
    lists = {"bm25": np.array([3.0, 1.0, 9.0, 0.0]), "dense": np.array([0.2, 0.6, 0.1, 0.3])}
    plain = replace(DEFAULT, definitions=False, path_words=False, coherence=False, diversity=False)
    assert [c for c, _ in rank_scores("send it again", lists, facts, plain, k=4)] == [0, 1, 3, 2]
    unweighed = replace(plain, keyword_priors=frozenset())
    assert [c for c, _ in rank_scores("send it again", lists, facts, unweighed, k=4)] == [1, 0, 3, 2]
    # With the priors stage off, the keyword list is taken as it is.
    off = rank_scores("send it again", lists, facts, replace(plain, priors=False), k=4)
    assert off == rank_scores("send it again", lists, facts, replace(unweighed, priors=False), k=4)
    assert off != rank_scores("send it again", lists, facts, unweighed, k=4)


def test_diversity_decays_extra_chunks_of_a_file_but_never_its_best(facts: ChunkFacts) -> None:
    scores = {0: 1.0, 1: 0.9, 2: 0.8, 3: 0.7}
    out = S.diversify(scores, facts, Ranking(diversity_decay=0.5), evidence=dict(scores))
    assert out == [(0, 1.0), (2, 0.8), (1, 0.45), (3, 0.35)]
    # The third chunk of a file is decayed twice over.
    one_file = ChunkFacts.of_records([CHUNKS[0], CHUNKS[1], CHUNKS[0]])
    three = S.diversify({0: 1.0, 1: 0.9, 2: 0.8}, one_file, Ranking(diversity_decay=0.5))
    assert [c for c, _ in three] == [0, 1, 2]
    assert [score for _, score in three] == pytest.approx([1.0, 0.45, 0.2])
    # A strong second answer (its own fused evidence near the top) is held.
    held = S.diversify(scores, facts, Ranking(diversity_decay=0.5, diversity_hold=0.85), evidence=dict(scores))
    assert held[:2] == [(0, 1.0), (1, 0.9)]
    # Two free places per file decay only the third.
    assert S.diversify({0: 1.0, 1: 0.9}, facts, Ranking(diversity_free=2)) == [(0, 1.0), (1, 0.9)]


def test_diversity_keeps_a_files_other_answers_and_decays_its_repeats(facts: ChunkFacts) -> None:
    r = Ranking(diversity_decay=0.5, diversity_similar=(0.5, 0.9))
    vectors = np.zeros((8, 2), dtype=np.float32)
    vectors[0] = [1.0, 0.0]
    vectors[2] = vectors[3] = vectors[4] = [0.0, 1.0]
    scores = {0: 1.0, 1: 0.9, 2: 0.8, 3: 0.7}
    # Chunk 1 (router.go) is orthogonal to chunk 0, its file's listed chunk: another answer, kept whole.
    # Chunk 3 repeats chunk 2 of logger.go (cosine 1): fully decayed.
    vectors[1] = [0.0, 1.0]
    assert S.diversify(scores, facts, r, vectors=vectors) == [(0, 1.0), (1, 0.9), (2, 0.8), (3, 0.35)]
    # Halfway between the thresholds (cosine 0.7), half the decay: 0.9 * 0.5 ** 0.5.
    vectors[1] = [0.7, np.sqrt(1 - 0.49)]
    out = dict(S.diversify(scores, facts, r, vectors=vectors))
    assert out[1] == pytest.approx(0.9 * 0.5**0.5, rel=1e-4)
    # A chunk the transformer did not read has an all-zero row: as without vectors, a full repeat.
    vectors[3] = [0.0, 0.0]
    assert dict(S.diversify(scores, facts, r, vectors=vectors))[3] == pytest.approx(0.35)


def test_the_first_hits_do_not_depend_on_k() -> None:
    rng = np.random.default_rng(3)
    chunks = [{"path": f"f{i % 23}.py"} for i in range(400)]
    facts = ChunkFacts.of_records(chunks)
    lists = {"bm25": np.maximum(rng.normal(size=400), 0.0), "dense": rng.normal(size=400)}
    vectors = rng.normal(size=(400, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    top10 = rank_scores("find the thing", lists, facts, DEFAULT, k=10, vectors=vectors)
    for k in (20, 50, DEFAULT.depth):
        assert rank_scores("find the thing", lists, facts, DEFAULT, k=k, vectors=vectors)[:10] == top10


class _CountedRows(np.ndarray):
    """Chunk vectors that count the rows diversity reads."""

    reads = 0

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        _CountedRows.reads += 1
        return np.asarray(self).__getitem__(index)


def test_diversity_with_k_stops_once_no_later_candidate_can_enter() -> None:
    # One file of 40 chunks whose vectors all point one way: each extra chunk repeats the first.
    chunks = [{"path": "a.py", "start_line": i, "end_line": i} for i in range(40)]
    one_file = ChunkFacts.of_records(chunks)
    vectors = np.ones((40, 4), dtype=np.float32).view(_CountedRows) / 2.0
    scores = {i: 1.0 - i / 100 for i in range(40)}
    ranking = Ranking(diversity_decay=0.5)
    whole = S.diversify(dict(scores), one_file, ranking, vectors=vectors)
    for k in (1, 3, 10, 40, 60):
        assert S.diversify(dict(scores), one_file, ranking, vectors=vectors, k=k) == whole[:k]
    # After one chunk scoring 1.0, every later one scores at most 0.3 before decay: with k=1 the
    # walk stops there, before reading a vector; without k it reads them all.
    _CountedRows.reads = 0
    steep = {0: 1.0, **{i: 0.3 - i / 1000 for i in range(1, 40)}}
    out = S.diversify(dict(steep), one_file, ranking, vectors=vectors, k=1)
    assert out == [(0, 1.0)]
    assert _CountedRows.reads == 0  # stopped before computing any cosine
    _CountedRows.reads = 0
    S.diversify(dict(steep), one_file, ranking, vectors=vectors)
    assert _CountedRows.reads >= 39


def test_rank_runs_the_stages_in_order_and_each_can_be_switched_off(facts: ChunkFacts) -> None:
    lists = {"bm25": np.array([0, 0, 2.0, 1.5, 0, 3.0, 0, 0]), "dense": np.array([0.1, 0, 0.5, 0.4, 0.2, 0.6, 0.3, 0.1])}
    full = rank_scores("request logger", lists, facts, DEFAULT, k=4)
    assert full[0][0] == 2  # the logger's path and both lists agree; the test file is held back by its prior
    plain = rank_scores("request logger", lists, facts, DEFAULT.without(*STAGES), k=4)
    assert plain[0][0] == 5  # with no stage, the test chunk both lists put first wins
    for stage in STAGES:
        assert len(rank_scores("request logger", lists, facts, DEFAULT.without(stage), k=4)) == 4


def test_ranking_validation_and_names() -> None:
    assert resolve_ranking("article") is ARTICLE
    assert ARTICLE.stages == ()
    assert DEFAULT.stages == STAGES
    assert DEFAULT.without("diversity").stages == STAGES[:-1]
    with pytest.raises(ValueError, match="unknown ranking"):
        resolve_ranking("best")
    with pytest.raises(ValueError, match="unknown stage"):
        DEFAULT.without("magic")
    with pytest.raises(ValueError, match="semantic_weight"):
        Ranking(semantic_weight=1.5)
    with pytest.raises(ValueError, match="diversity_similar"):
        Ranking(diversity_similar=(0.8, 0.8))
    with pytest.raises(ValueError, match="unknown path classes"):
        Ranking(prior_multipliers={"vendor": 0.1})
    with pytest.raises(ValueError, match="unknown path classes.*keyword_priors"):
        Ranking(keyword_priors=frozenset({"vendor"}))
    assert hash(DEFAULT) == hash(replace(DEFAULT))


# --- through the facade ---------------------------------------------------------------------


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
    cs = CodeSearch(repo, model=HashingEmbedder(), index_dir=tmp_path / "index", ranking=DEFAULT.without("definitions"))
    with_priors = cs.search("raise_for_status r Response", k=3, mode="bm25")
    without = cs.search("raise_for_status r Response", k=3, mode="bm25", source_first=False)
    assert without[0].kind == "test"  # the test mentions every word, most often
    assert with_priors[0].kind == "source"
    assert {h.path for h in with_priors} == {h.path for h in without}  # demoted, never dropped


def test_facts_build_a_symbol_table_given_as_a_function_only_when_a_search_needs_it() -> None:
    """A corpus view's first query often names no identifier: its symbol table is not built for it."""
    built = []

    def table() -> SymbolTable:
        built.append(1)
        return SymbolTable.build([(0, ["Router"]), (1, ["serve"])])

    facts = ChunkFacts.from_columns(["a/router.go", "b/serve.go"], np.array([0, 1]), table)
    assert facts.files_matching("router") == {0} and not built
    assert facts.defining(["router"]) == {0: "Router"} and facts.defining(["serve"]) == {1: "serve"}
    assert built == [1]
