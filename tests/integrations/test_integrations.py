"""The LangChain and LlamaIndex retrievers against the real frameworks: their contracts, the same hits as
CodeSearch.search, and a small chain and query engine that run offline."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest
from conftest import SESSIONS, UTILS, HashingEmbedder

from codesearch import CodeSearch, MultiSearch

langchain_core = pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")

from langchain_core.documents import Document  # noqa: E402
from llama_index.core.schema import NodeWithScore  # noqa: E402

from codesearch.integrations.langchain import CodeSearchRetriever as LangChainRetriever  # noqa: E402
from codesearch.integrations.llamaindex import CodeSearchRetriever as LlamaIndexRetriever  # noqa: E402

TESTS = """\
from pkg.sessions import Session
from pkg.utils import super_len


def test_strip_auth():
    assert Session().should_strip_auth("http://a", "http://b")


def test_super_len():
    assert super_len("abc") is None
"""

QUERIES = ["strip the auth header on redirect", "length of the body", "netrc credentials", "change the method"]


def make_repo(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "docs").mkdir()
    (root / "pkg" / "sessions.py").write_text(SESSIONS)
    (root / "pkg" / "utils.py").write_text(UTILS)
    (root / "tests" / "test_sessions.py").write_text(TESTS)
    (root / "docs" / "auth.md").write_text("# Auth\n\nThe session strips the auth header on a redirect to another "
                                           "host.\n\n## Netrc\n\nCredentials may come from a netrc file.\n")
    return root


def searcher(root: Path, index_dir: Path) -> CodeSearch:
    cs = CodeSearch(root, model=HashingEmbedder(), static=False, index_dir=index_dir)
    cs.index()
    return cs


@pytest.fixture(scope="module")
def cs(tmp_path_factory: pytest.TempPathFactory) -> CodeSearch:
    base = tmp_path_factory.mktemp("retrievers")
    return searcher(make_repo(base / "repo"), base / "index")


def _where(hits: Any) -> list[tuple[str, float]]:
    return [(h.location, h.score) for h in hits]


# --- LangChain ------------------------------------------------------------------------------------------

langchain_tests = pytest.importorskip("langchain_tests.integration_tests")


class TestLangChainStandardRetrieverContract(langchain_tests.RetrieversIntegrationTests):
    """langchain-tests' own retriever suite (k in the constructor and in invoke, invoke and ainvoke)."""

    # The suite holds one async test (ainvoke); pytest-asyncio warns about the mark on the others.
    pytestmark: ClassVar[list[pytest.MarkDecorator]] = [
        pytest.mark.asyncio, pytest.mark.filterwarnings("ignore:The test <Function:pytest.PytestWarning")]

    @pytest.fixture(autouse=True)
    def _searcher(self, cs: CodeSearch) -> None:
        type(self).searcher = cs

    @property
    def retriever_constructor(self) -> type[LangChainRetriever]:
        return LangChainRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"searcher": self.searcher}

    @property
    def retriever_query_example(self) -> str:
        return "session auth redirect"


@pytest.mark.parametrize("query", QUERIES)
def test_langchain_documents_are_codesearch_hits(cs: CodeSearch, query: str) -> None:
    retriever = LangChainRetriever(searcher=cs, k=5)
    documents = retriever.invoke(query)
    hits = cs.search(query, k=5)
    assert [(d.metadata["location"], d.metadata["score"]) for d in documents] == _where(hits)
    assert [d.page_content for d in documents] == [h.text for h in hits]
    top, hit = documents[0], hits[0]
    assert top.id == hit.location and top.metadata == {
        "path": hit.path, "start_line": hit.start_line, "end_line": hit.end_line, "location": hit.location,
        "score": hit.score, "kind": hit.kind, "symbols": list(hit.symbols), "repository": str(cs.root)}


def test_langchain_scope_options_pass_through_in_the_constructor_and_in_invoke(cs: CodeSearch) -> None:
    query = "session auth"
    scoped = LangChainRetriever(searcher=cs, kinds=["test", "doc"], mode="bm25")
    assert [(d.metadata["location"], d.metadata["score"]) for d in scoped.invoke(query)] == _where(
        cs.search(query, mode="bm25", kinds={"test", "doc"}))
    assert {d.metadata["kind"] for d in scoped.invoke(query)} == {"test", "doc"}
    retriever = LangChainRetriever(searcher=cs)
    assert {d.metadata["path"] for d in retriever.invoke(query, scope="pkg/", k=3)} <= {"pkg/sessions.py",
                                                                                      "pkg/utils.py"}
    assert [d.metadata["path"] for d in retriever.invoke(query, include=["*.md"])] == ["docs/auth.md"] * len(
        cs.search(query, include=["*.md"]))
    assert all(d.metadata["path"] != "pkg/utils.py" for d in retriever.invoke(query, exclude=["pkg/utils.py"]))


def test_langchain_errors_are_the_librarys(cs: CodeSearch) -> None:
    retriever = LangChainRetriever(searcher=cs)
    with pytest.raises(ValueError, match="query is empty"):
        retriever.invoke("  ")
    with pytest.raises(ValueError, match="at least 1"):
        retriever.invoke("auth", k=0)
    with pytest.raises(ValueError, match="unknown mode"):
        retriever.invoke("auth", mode="fuzzy")
    with pytest.raises(TypeError, match="unknown search option"):
        retriever.invoke("auth", top_k=3)


def test_a_langchain_chain_runs_offline(cs: CodeSearch) -> None:
    """A small RAG chain: the retriever's documents formatted into a prompt, answered by LangChain's fake model."""
    from langchain_core.language_models.fake import FakeListLLM
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import PromptTemplate
    from langchain_core.runnables import RunnableLambda, RunnablePassthrough

    seen: list[str] = []

    def context(documents: list[Document]) -> str:
        text = "\n\n".join(f"{d.metadata['location']}\n{d.page_content}" for d in documents)
        seen.append(text)
        return text

    prompt = PromptTemplate.from_template("Answer from the code.\n\n{context}\n\nQuestion: {question}")
    chain = ({"context": LangChainRetriever(searcher=cs, k=2) | RunnableLambda(context),
              "question": RunnablePassthrough()} | prompt | FakeListLLM(responses=["Session.should_strip_auth"])
             | StrOutputParser())
    assert chain.invoke("strip the auth header on redirect") == "Session.should_strip_auth"
    top = cs.search("strip the auth header on redirect", k=2)
    assert seen == ["\n\n".join(f"{h.location}\n{h.text}" for h in top)]


def test_langchain_over_several_roots_names_each_hits_repository(cs: CodeSearch, tmp_path: Path) -> None:
    other = tmp_path / "other"
    (other / "lib").mkdir(parents=True)
    (other / "lib" / "netrc.py").write_text("def read_netrc(path):\n    \"\"\"Parse netrc credentials.\"\"\"\n"
                                            "    return {}\n")
    multi = MultiSearch([cs.root, other], model=None)
    documents = LangChainRetriever(searcher=multi, mode="bm25", k=20).invoke("netrc credentials")
    hits = multi.search("netrc credentials", mode="bm25", k=20)
    assert [(d.metadata["location"], d.metadata["repository"]) for d in documents] == [(h.location, h.root)
                                                                                       for h in hits]
    assert {d.metadata["repository"] for d in documents} == {str(cs.root), str(other)}
    assert documents[0].id == f"{hits[0].root}:{hits[0].location}"


# --- LlamaIndex ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("query", QUERIES)
def test_llamaindex_nodes_are_codesearch_hits(cs: CodeSearch, query: str) -> None:
    nodes = LlamaIndexRetriever(cs, k=5).retrieve(query)
    hits = cs.search(query, k=5)
    assert all(isinstance(n, NodeWithScore) for n in nodes)
    assert [(n.node.metadata["location"], n.score) for n in nodes] == _where(hits)
    assert [n.node.get_content() for n in nodes] == [h.text for h in hits]
    assert nodes[0].node.node_id == hits[0].location and nodes[0].node.metadata["repository"] == str(cs.root)


def test_llamaindex_scope_options_and_async(cs: CodeSearch) -> None:
    import asyncio

    retriever = LlamaIndexRetriever(cs, k=3, mode="bm25", kinds=["source"], scope="pkg/")
    nodes = asyncio.run(retriever.aretrieve("session auth"))
    assert [(n.node.metadata["location"], n.score) for n in nodes] == _where(
        cs.search("session auth", k=3, mode="bm25", kinds={"source"}, scope="pkg/"))
    assert {n.node.metadata["kind"] for n in nodes} == {"source"}
    with pytest.raises(ValueError, match="query is empty"):
        LlamaIndexRetriever(cs).retrieve(" ")


def test_a_llamaindex_query_engine_runs_offline(cs: CodeSearch) -> None:
    """RetrieverQueryEngine over the retriever with LlamaIndex's mock model: the source nodes are the hits."""
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine

    engine = RetrieverQueryEngine.from_args(LlamaIndexRetriever(cs, k=3), llm=MockLLM(max_tokens=8))
    response = engine.query("where is the length of a body computed")
    assert [(n.node.metadata["location"], n.score) for n in response.source_nodes] == _where(
        cs.search("where is the length of a body computed", k=3))
    assert isinstance(response.response, str) and response.response
