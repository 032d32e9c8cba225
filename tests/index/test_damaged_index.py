"""A damaged index never answers: one flipped bit anywhere in a stored index, and every command (search, def, refs,
related, status) either answers exactly as the undamaged index does (the bit was in something it does not read, or
it rebuilt the index from the files) or fails in one line. Never exit 0 with other content, never a traceback.

The sweep runs the CLI in this process (click's runner) with a cheap stand-in for both models (``HashingEmbedder``
from ``conftest``), over a small repository, for a static-only index and a full-tier one.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import SESSIONS, UTILS, HashingEmbedder

import codesearch.search as search_module
from codesearch import CodeSearch
from codesearch.exceptions import IndexCorruptError
from codesearch.faces.cli import main
from codesearch.index.integrity import Verification
from codesearch.index.snapshot import IndexSnapshot
from codesearch.index.store import IndexStore
from codesearch.strings import Strings

TESTS = '''\
from pkg.sessions import Session
from pkg.utils import super_len


def test_strip_auth():
    assert Session().should_strip_auth("http://a", "http://b")


def test_super_len():
    assert super_len("abc") is None
'''

ADAPTERS = '''\
from pkg.utils import get_netrc_auth


class HTTPAdapter:
    """The transport adapter: sends a prepared request and builds the response."""

    def send(self, request, timeout=None):
        """Send the request, following no redirect."""
        auth = get_netrc_auth(request.url)
        return self.build_response(request, auth)

    def build_response(self, request, auth):
        """Build a response from the raw reply."""
        return {"request": request, "auth": auth}
'''

COMMANDS: dict[str, list[str]] = {
    "search": ["search", "redirect the request method", "ROOT", "-k", "5"],
    "search-bm25": ["search", "auth url", "ROOT", "-k", "5", "--mode", "bm25"],
    "def": ["def", "Session.should_strip_auth", "ROOT"],
    "def-send": ["def", "send", "ROOT"],
    "refs": ["refs", "get_netrc_auth", "ROOT"],
    "related": ["related", "pkg/sessions.py:5", "ROOT", "-k", "4"],
    "status": ["status", "ROOT"],
}
"""Each command as the CLI takes it; ROOT is the repository."""


@pytest.fixture
def two_tier(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's searcher with cheap stand-ins for the transformer and the static model."""
    real = search_module.CodeSearch

    def cheap(path, **kwargs):  # type: ignore[no-untyped-def]
        kwargs.update(model=HashingEmbedder(name="dense"), static=HashingEmbedder(name="dense", dim=64, salt="s"))
        return real(path, **kwargs)

    monkeypatch.setattr(search_module, "CodeSearch", cheap)


def _repo(root: Path) -> Path:
    for name, text in (("pkg/sessions.py", SESSIONS), ("pkg/utils.py", UTILS), ("pkg/adapters.py", ADAPTERS),
                       ("tests/test_sessions.py", TESTS), ("docs/auth.md", "# Auth\n\nRedirects strip auth.\n")):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _run(args: list[str], root: Path, index_dir: Path) -> tuple[int, str, str]:
    """``(exit code, stdout, stderr)`` of one CLI command, with ``--json``; an exception that escaped the command
    (a traceback) is exit code -1 and its repr."""
    argv = [str(root) if a == "ROOT" else a for a in args] + ["--index-dir", str(index_dir), "--json"]
    result = CliRunner().invoke(main, argv)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return -1, "", repr(result.exception)
    return result.exit_code, result.stdout, result.stderr


def _answer(command: str, stdout: str) -> Any:
    """What must not change: the hits (or, for status, the facts) without how the answer was reached."""
    data = json.loads(stdout)
    if command == "status":
        return {k: v for k, v in data.items() if k not in ("freshness_reason",)}
    return data["hits"]


def _positions(path: Path) -> list[int]:
    """Start, middle and end of the file; for a .npy file also its header: the length field, the middle of the
    header's text, its last byte, and the first byte of the data."""
    size = path.stat().st_size
    found = {0, size // 2, size - 1}
    if path.suffix == ".npy":
        with open(path, "rb") as handle:
            major, _ = np.lib.format.read_magic(handle)
            reader = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
            reader(handle)
            data_start = handle.tell()
        found |= {8, data_start // 2, data_start - 1, data_start}
    return sorted(p for p in found if 0 <= p < size)


@pytest.mark.parametrize("tier", ["static", "full"])
def test_a_flipped_bit_anywhere_in_an_index_never_changes_an_exit_0_answer(
        tmp_path: Path, two_tier: None, monkeypatch: pytest.MonkeyPatch, tier: str) -> None:
    """Start, middle and end of every file, and in a .npy file its header too (a bit flipped at each), under every
    command: an identical answer, or a one-line error. The full tier keeps vector graphs (read by native code)."""
    from codesearch.index import vectors as vectors_module

    monkeypatch.setattr(vectors_module, "EXACT_BELOW", 4)  # a graph for each tier of the full index
    root = _repo(tmp_path / "repo")
    pristine = tmp_path / "pristine"
    build = ["index", str(root), "--index-dir", str(pristine), "--json", "-q"]
    built = CliRunner().invoke(main, build + (["--static-only"] if tier == "static" else []))
    assert built.exit_code == 0, built.output
    index_dir = tmp_path / "index"  # every answer from the same folder, so that status names the same one
    expected: dict[str, Any] = {}
    for command, args in COMMANDS.items():
        shutil.copytree(pristine, index_dir)
        code, out, err = _run(args, root, index_dir)
        assert code == 0, (command, err)
        expected[command] = _answer(command, out)
        shutil.rmtree(index_dir)
    assert expected["def"] and expected["refs"] and expected["related"] and expected["search"]
    files = sorted(p.relative_to(pristine) for p in pristine.rglob("*") if p.is_file() and p.name != "LOCK")
    assert len(files) >= 30 and any(p.name.startswith("ann_") for p in files) == (tier == "full")
    wrong: list[str] = []
    unexplained: list[str] = []
    outcomes = {"same": 0, "rebuilt": 0, "error": 0}
    shutil.copytree(pristine, index_dir)
    current = (index_dir / "CURRENT").read_bytes()
    for name in files:
        for n, position in enumerate(_positions(pristine / name)):
            bit = (0, 6, 3)[n % 3]
            for command, args in COMMANDS.items():
                target = index_dir / name
                with open(target, "r+b") as handle:  # in place, and back after: a copy per command is slow
                    handle.seek(position)
                    byte = handle.read(1)[0]
                    handle.seek(position)
                    handle.write(bytes([byte ^ (1 << bit)]))
                code, out, err = _run(args, root, index_dir)
                where = f"{name}@{position}^{bit} {command}"
                rebuilt = (index_dir / "CURRENT").read_bytes() != current or not target.exists()
                if rebuilt:  # by the command, from the files: start again from the pristine copy
                    shutil.rmtree(index_dir)
                    shutil.copytree(pristine, index_dir)
                else:
                    with open(target, "r+b") as handle:
                        handle.seek(position)
                        handle.write(bytes([byte]))
                if code == 0:
                    if _answer(command, out) != expected[command]:
                        wrong.append(where)
                    outcomes["rebuilt" if rebuilt else "same"] += 1
                    continue
                outcomes["error"] += 1
                lines = err.strip().splitlines()
                if code != 2 or len(lines) != 1 or not lines[0].startswith("Error: "):
                    unexplained.append(f"{where}: {err.strip()[-300:]}")
    assert not wrong and not unexplained, (f"{len(wrong)} exit-0 answers differ from the undamaged index's: {wrong}; "
                                           f"{len(unexplained)} failures not in one line: {unexplained}")
    assert outcomes["error"], outcomes  # the same answer: a file it does not read, not yet found damaged


# -- the library: structure checked at open, sha256 in the background (or first) --------------------------------


def _index(tmp_path: Path) -> tuple[Path, Path]:
    root = _repo(tmp_path / "repo")
    index_dir = tmp_path / "index"
    _searcher(root, index_dir).index()
    return root, index_dir


def _searcher(root: Path, index_dir: Path, **options: Any) -> CodeSearch:
    return CodeSearch(root, model=HashingEmbedder(name="dense"), static=HashingEmbedder(name="dense", dim=64, salt="s"),
                      index_dir=index_dir, **options)


def _asks(cs: CodeSearch) -> dict[str, Callable[[], object]]:
    """Every way to ask a searcher something that reads its index."""
    return {
        "search": lambda: cs.search("redirect the request method", k=3),
        "search-bm25": lambda: cs.search("auth url", k=3, mode="bm25"),
        "definitions": lambda: cs.definitions("Session.should_strip_auth"),
        "references": lambda: cs.references("get_netrc_auth"),
        "related": lambda: cs.related("pkg/sessions.py", 5, k=3),
        "status": cs.status,
        "changes": cs.changes,
        "locations": cs.locations,
    }


def _damage(path: Path, position: int, value: bytes) -> None:
    with open(path, "r+b") as handle:
        handle.seek(position)
        handle.write(value)


def _data_start(path: Path) -> int:
    with open(path, "rb") as handle:
        np.lib.format.read_magic(handle)
        np.lib.format.read_array_header_1_0(handle)
        return handle.tell()


@pytest.mark.parametrize("damage", ["file number out of range", "offsets backwards", "header", "posting"])
def test_damage_to_the_structure_is_refused_at_open_by_every_command(tmp_path: Path, damage: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """What the issue saw: an out-of-range chunk_file_of gave an IndexError traceback. With no sha256 checked at all
    (the background check never starts here), such damage is one IndexCorruptError from every command that reads it,
    never another exception."""
    root, index_dir = _index(tmp_path)
    monkeypatch.setattr(Verification, "start", lambda self: None)
    gen = next(index_dir.glob("gen-*"))
    if damage == "file number out of range":
        path = gen / "chunk_file_of.npy"
        _damage(path, _data_start(path) + 4, np.array([10_000], dtype="<i4").tobytes())
    elif damage == "offsets backwards":
        path = gen / "chunk_texts_offsets.npy"
        _damage(path, _data_start(path) + 8, np.array([1 << 40], dtype="<i8").tobytes())
    elif damage == "header":
        path = gen / "chunk_start.npy"
        _damage(path, _data_start(path) - 2, b"(")  # np.load's parse of the header failed with a TokenError
    else:  # the first document of the term "auth", which both asks below read
        path = gen / "bm25_indices.npy"
        terms = Strings(np.load(gen / "bm25_terms.npy"), np.load(gen / "bm25_term_offsets.npy"))
        t = terms.tolist().index("auth")
        first = int(np.load(gen / "bm25_indptr.npy")[t])
        _damage(path, _data_start(path) + 4 * first, np.array([1 << 20], dtype="<i4").tobytes())
    asks = _asks(_searcher(root, index_dir, refresh=False))
    if damage == "posting":  # checked where a query reads them (all of them are too many to read at open)
        asks = {what: ask for what, ask in asks.items() if what in ("search-bm25", "references")}
    for what, ask in asks.items():
        with pytest.raises(IndexCorruptError) as caught:
            ask()
        assert "re-run `codesearch index`" in str(caught.value) or "rebuild" in str(caught.value), what


def test_without_verify_first_no_command_answers_after_a_failed_check(tmp_path: Path) -> None:
    """A letter of a chunk's text changed (still UTF-8: only the sha256 sees it). A searcher that answers before the
    background check may answer once; after its verdict, every command refuses."""
    root, index_dir = _index(tmp_path)
    path = next(index_dir.glob("gen-*")) / "chunk_texts.npy"
    _damage(path, path.read_bytes().index(b"redirect"), b"R")
    cs = _searcher(root, index_dir, refresh=False)
    loaded = cs._session.current()[0]
    assert loaded.verification is not None and loaded.verification.wait(30)
    for what, ask in _asks(cs).items():
        with pytest.raises(IndexCorruptError, match="chunk_texts.npy is damaged"):
            ask()
        assert what


def test_with_verify_first_the_first_answer_waits_for_the_check(tmp_path: Path) -> None:
    root, index_dir = _index(tmp_path)
    path = next(index_dir.glob("gen-*")) / "chunk_texts.npy"
    _damage(path, path.stat().st_size - 1, b"#")
    for what, ask in _asks(_searcher(root, index_dir, refresh=False, verify_first=True)).items():
        with pytest.raises(IndexCorruptError, match="chunk_texts.npy is damaged"):
            ask()
        assert what
    healthy = _searcher(root, tmp_path / "healthy", verify_first=True)
    assert [h.path for h in healthy.search("auth url", k=2, mode="bm25")] == [
        h.path for h in _searcher(root, tmp_path / "healthy").search("auth url", k=2, mode="bm25")]


def test_require_hashes_what_the_background_has_not_reached_and_names_the_damage(tmp_path: Path) -> None:
    store = IndexStore(tmp_path / "index")
    arrays = {f"part_{i}": np.arange(1000 * (i + 1), dtype=np.int64) for i in range(6)}
    store.save(IndexSnapshot({"kind": "test"}, [], arrays))
    snapshot = store.load(mmap=True)
    assert snapshot.verification is not None
    snapshot.verification.require({"part_0.npy", "part_5.npy"})  # checked, by this thread or the other
    snapshot.verification.require()
    assert snapshot.verification.done
    path = next((tmp_path / "index").glob("gen-*")) / "part_3.npy"
    _damage(path, path.stat().st_size - 3, b"\xff")
    damaged = store.load(mmap=True)
    assert damaged.verification is not None
    try:  # another file's check: passes, or names part_3 when the background found it by then
        damaged.verification.require({"part_0.npy"})
    except IndexCorruptError as err:
        assert "part_3.npy is damaged" in str(err)
    with pytest.raises(IndexCorruptError, match=r"part_3\.npy is damaged"):
        damaged.verification.require({"part_3.npy"})
    with pytest.raises(IndexCorruptError, match=r"part_3\.npy is damaged"):
        damaged.verification.require({"part_1.npy"})  # once found, every answer refuses
