"""An index built once and shared: moved with its repository (new paths, new file times), read-only, read by
many processes at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import SESSIONS, TESTS, UTILS, HashingEmbedder

from codesearch import CodeSearch
from codesearch.exceptions import IndexNotFoundError, IndexReadOnlyError
from codesearch.index.store import IndexStore

TESTS_DIR = TESTS


def _searcher(root: Path, index_dir: Path, **kwargs) -> tuple[CodeSearch, HashingEmbedder, HashingEmbedder]:  # type: ignore[no-untyped-def]
    dense, static = HashingEmbedder(name="dense"), HashingEmbedder(name="dense", dim=64, salt="static")
    return CodeSearch(root, model=dense, static=static, index_dir=index_dir, **kwargs), dense, static


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "built" / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "sessions.py").write_text(SESSIONS)
    (root / "pkg" / "utils.py").write_text(UTILS)
    return root


def test_a_requests_index_moved_with_its_tree_embeds_nothing_read_only_or_not(requests_corpus: Path,
                                                                              tmp_path: Path) -> None:
    """CI builds the index once; `cp -r` of tree and index to another path (new file times) reuses every chunk."""
    built = tmp_path / "ci"
    built.mkdir()
    subprocess.run(["cp", "-r", str(requests_corpus), str(built / "requests")], check=True)
    cs, _, _ = _searcher(built / "requests", built / "index")
    first = cs.index()
    assert first.embedded > 0 and first.static_embedded == first.chunks
    moved = tmp_path / "agent"
    subprocess.run(["cp", "-r", str(built), str(moved)], check=True)  # new mtimes, another root
    stored = _files(moved / "index")

    reader, dense, static = _searcher(moved / "requests", moved / "index", read_only=True)
    hits = reader.search("super_len", k=3)
    assert hits[0].path == "src/requests/utils.py" and reader.last_search is not None
    assert reader.last_search.refreshed == first.files  # every file re-read (its time changed) ...
    assert dense.calls == [] and static.calls == []  # ... and nothing embedded: the contents matched
    status = reader.status()
    assert status["read_only"] is True and status["refreshed_in_memory"] == first.files
    assert status["root"] == str(moved / "requests") and status["built_at"] == str(built / "requests")
    assert _files(moved / "index") == stored  # not one byte written, no LOCK

    writer, dense, static = _searcher(moved / "requests", moved / "index")
    report = writer.index()
    assert (report.embedded, report.static_embedded, report.chunks) == (0, 0, first.chunks)
    assert dense.calls == [] and static.calls == []
    assert writer.search("super_len", k=1)[0].path == "src/requests/utils.py"
    assert writer.last_search is not None and writer.last_search.refreshed == 0
    assert "built_at" not in writer.status()


def test_a_read_only_index_sees_an_edit_in_memory_only(repo: Path, tmp_path: Path) -> None:
    index_dir = tmp_path / "index"
    _searcher(repo, index_dir)[0].index()
    stored = _files(index_dir)
    (repo / "pkg" / "zoo.py").write_text("def zebra_crossing():\n    return 'stripes'\n")

    reader, dense, _ = _searcher(repo, index_dir, read_only=True)
    assert reader.read_only and reader.status()["refreshed_in_memory"] == 0
    assert reader.search("zebra_crossing", k=1)[0].path == "pkg/zoo.py"
    assert reader.last_search is not None and reader.last_search.refreshed == 1 and dense.calls == [1]
    assert [h.path for h in reader.definitions("zebra_crossing")] == ["pkg/zoo.py"]
    status = reader.status()
    assert status["changed_files"] == 1 and status["refreshed_in_memory"] == 1  # stored index unchanged, memory fresh
    assert _files(index_dir) == stored
    assert reader.search("zebra_crossing", k=1) and reader.last_search.refreshed == 0  # refreshed once

    other, _, _ = _searcher(repo, index_dir, read_only=True)  # another process: its own refresh
    assert [h.path for h in other.references("zebra_crossing")] == ["pkg/zoo.py"]
    with pytest.raises(IndexReadOnlyError, match="cannot be built or updated"):
        other.index()
    assert _files(index_dir) == stored


def test_a_folder_this_process_cannot_write_is_read_only(repo: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    index_dir = tmp_path / "index"
    _searcher(repo, index_dir)[0].index()
    monkeypatch.setattr(IndexStore, "is_writable", lambda self: False)  # root ignores permission bits: faked
    reader, _, _ = _searcher(repo, index_dir, background_upgrade=True)
    assert reader.read_only and reader.search("super_len", k=1)
    assert not reader._freshness.upgrading  # a read-only searcher never builds in the background
    assert reader.info()["read_only"] is True
    assert not _searcher(repo, index_dir, read_only=False)[0].read_only  # asked to write: it tries


def test_a_read_only_folder_without_an_index_says_where_to_build_it(repo: Path, tmp_path: Path) -> None:
    reader, _, _ = _searcher(repo, tmp_path / "none", read_only=True)
    with pytest.raises(IndexNotFoundError, match=r"read-only here; build it where it is writable: `codesearch index"):
        reader.search("super_len")
    assert not (tmp_path / "none").exists()


_READER = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, {tests!r})
    from pathlib import Path
    from codesearch import CodeSearch
    from conftest import HashingEmbedder

    root, index_dir = Path(sys.argv[1]), Path(sys.argv[2])
    done = []
    for _ in range(5):
        cs = CodeSearch(root, model=HashingEmbedder(name="dense"), static=HashingEmbedder(name="dense", dim=64,
                        salt="static"), index_dir=index_dir, read_only=True)
        hit = cs.search("zebra_crossing", k=1)[0]
        defined = cs.definitions("super_len")[0]
        done.append([hit.path, defined.path, cs.last_search.refreshed])
    print(json.dumps(done))
    """
)


def test_several_processes_read_one_read_only_index_at_once(repo: Path, tmp_path: Path) -> None:
    """The MCP servers of several agents on one shared index: no lock, no write, each sees the edit."""
    index_dir = tmp_path / "index"
    _searcher(repo, index_dir)[0].index()
    (IndexStore(index_dir).directory / "LOCK").unlink()
    (repo / "pkg" / "zoo.py").write_text("def zebra_crossing():\n    return 'stripes'\n")
    stored = _files(index_dir)
    script = tmp_path / "reader.py"
    script.write_text(_READER.format(tests=str(TESTS_DIR)))
    procs = [subprocess.Popen([sys.executable, str(script), str(repo), str(index_dir)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
             for _ in range(4)]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert json.loads(out) == [["pkg/zoo.py", "pkg/utils.py", 1]] * 5
    assert _files(index_dir) == stored


_HOLDER = textwrap.dedent(
    """
    import sys, time
    from codesearch.index.store import IndexStore

    with IndexStore(sys.argv[1]).write_lock():
        print("held", flush=True)
        sys.stdin.read()  # until the test closes it
    """
)


def test_a_search_while_another_process_writes_the_index_refreshes_in_memory_and_says_so(
        repo: Path, tmp_path: Path) -> None:
    """`codesearch index REPO &` holds the write lock: a search meanwhile sees new, changed and deleted files, from
    memory, and says so; once the lock is free again a search commits them."""
    from click.testing import CliRunner

    import codesearch.search as search_module
    from codesearch.faces.cli import main

    index_dir = tmp_path / "index"
    (repo / "pkg" / "adapters.py").write_text("def send_adapter(request):\n    return request\n")
    _searcher(repo, index_dir)[0].index()
    (repo / "pkg" / "zoo.py").write_text("def zebra_crossing():\n    return 'stripes'\n")  # new
    (repo / "pkg" / "utils.py").write_text(UTILS.replace("super_len", "body_length"))  # changed
    (repo / "pkg" / "adapters.py").unlink()  # deleted
    def committed() -> dict[str, bytes]:
        return {name: data for name, data in _files(index_dir).items() if name != "LOCK"}  # LOCK names its holder

    stored = committed()
    script = tmp_path / "holder.py"
    script.write_text(_HOLDER)
    holder = subprocess.Popen([sys.executable, str(script), str(index_dir)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        cs, _, _ = _searcher(repo, index_dir)
        assert cs.search("zebra_crossing", k=1, mode="bm25")[0].path == "pkg/zoo.py"
        info = cs.last_search
        assert info is not None and (info.refreshed, info.refreshed_in_memory) == (3, 3)
        assert cs.search("body_length", k=1)[0].path == "pkg/utils.py"
        assert not [h for h in cs.search("send_adapter", k=5, mode="bm25") if h.path == "pkg/adapters.py"]
        assert cs.last_search is not None and cs.last_search.refreshed_in_memory == 3  # still the stored index's lag
        assert [h.path for h in cs.definitions("zebra_crossing")] == ["pkg/zoo.py"]
        assert not cs.references("super_len").hits
        status = cs.status()
        assert status["changed_files"] == 3 and status["refreshed_in_memory"] == 3
        assert sorted(status["changes"]["added"] + status["changes"]["modified"] + status["changes"]["removed"]) == [
            "pkg/adapters.py", "pkg/utils.py", "pkg/zoo.py"]

        real = search_module.CodeSearch
        with pytest.MonkeyPatch.context() as patch:  # the CLI with the stand-in models
            patch.setattr(search_module, "CodeSearch", lambda path, model, **kw: _searcher(Path(path), **kw)[0])
            found = CliRunner().invoke(main, ["search", "zebra_crossing", str(repo), "--mode", "bm25",
                                              "--index-dir", str(index_dir), "--json"])
            assert found.exit_code == 0, found.output
            answer = json.loads(found.stdout)
            assert answer["hits"][0]["path"] == "pkg/zoo.py"
            assert (answer["refreshed"], answer["refreshed_in_memory"]) == (3, 3)
            text = CliRunner().invoke(main, ["search", "body_length", str(repo), "--mode", "bm25",
                                             "--index-dir", str(index_dir)])
            assert text.exit_code == 0 and "pkg/utils.py" in text.stdout
            assert "3 changed files were read into memory for this answer" in text.stderr
        assert search_module.CodeSearch is real
        assert committed() == stored  # nothing committed while the lock was held
    finally:
        holder.communicate(timeout=30)
    assert holder.returncode == 0
    assert cs.search("zebra_crossing", k=1, mode="bm25")[0].path == "pkg/zoo.py"  # the lock is free: committed now
    assert cs.last_search is not None and cs.last_search.refreshed_in_memory == 0
    assert committed() != stored
    fresh, dense, static = _searcher(repo, index_dir)
    assert fresh.status()["changed_files"] == 0
    assert fresh.search("body_length", k=1)[0].path == "pkg/utils.py" and fresh.last_search.refreshed == 0
    assert dense.calls == [] and static.calls == []
