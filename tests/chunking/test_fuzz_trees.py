"""Random small trees: whatever their names, contents, ignore files and links, and whatever happens to their files
between listing and reading, indexing and searching them raise nothing but ``CodeSearchError`` and never answer
with a path outside the root or a file outside it.

Each tree is a handful of entries: names of random bytes (``/`` and NUL aside) and of known troublesome shapes,
contents of random bytes, empty files and lines, lines long enough to be cut into windows, ignore files of valid
and invalid lines, links into and out of the tree and nowhere, FIFOs. The listing the index is built from is then
damaged at random before the files are read: files deleted, or swapped for a FIFO, for a link out of the tree or
for a folder. Searches run on the real static tier (the tokenizer a name that is not UTF-8 used to break) and on
the keyword index; a second round after more files change exercises the refresh.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import HashingEmbedder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codesearch import CodeSearch
from codesearch.exceptions import CodeSearchError
from codesearch.files import scan
from codesearch.index import builder as builder_module
from codesearch.stats import repo_stats

SECRET = "OUTSIDE_SECRET_TOKEN"
"""Written in every file outside the tree: no answer may hold it."""
QUERIES = ("def f return value", SECRET, os.fsdecode(b"redirect \xff after"))

_KNOWN_NAMES = [
    b"a.py", b"b.js", b"README.md", b".gitignore", b".codesearchignore", b"sub", b"node_modules", b"bad\xffname.py",
    b"e.py\nreal.py:99: FORGED", b"\xc3\xa9t\xc3\xa9.py", b"space name.py", b"-dash.py", b"x.min.js", b"logo.png",
    b"yarn.lock", b"\xed\xa0\x80.py", b"keep.py", b"tests", b"\x1b[31m.rs",
]
_name = st.one_of(
    st.sampled_from(_KNOWN_NAMES),
    st.binary(min_size=1, max_size=10).filter(lambda b: b"/" not in b and b"\0" not in b and b not in (b".", b"..")),
)
_ignore_line = st.one_of(
    st.sampled_from([b"[z-a]", b"!", b"\\", b"a\\", b"!\\", b"*.py", b"sub/", b"!keep.py", b"**/x", b"[!z-a]b",
                     b"\\/a", b"q\\/*", b"# comment", b"", b"*", b"!*.js", b"[", b"bad\xff*", b"**\\/b", b"[--*]"]),
    st.binary(max_size=8).filter(lambda b: b"\n" not in b),
)
_long_line = st.builds(lambda n, unit, tail: unit * n + tail, st.integers(50_000, 56_000),
                      st.sampled_from([b"x", b"ab ", b"\xff"]), st.sampled_from([b"", b"\ndef f():\n    return 1\n"]))
"""A line about as long as the longest a chunk takes whole (51,200 characters): cut into windows, or just not."""
_content = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.sampled_from([b"", b"\n\n\n", b"def f():\n    return 1\n", b"\xff\xfe\0\0", b"\r\r\n\n"]),
    st.lists(_ignore_line, max_size=6).map(b"\n".join),
    st.integers(0, 7).flatmap(lambda n: _long_line if n == 0 else st.binary(max_size=40)),
)
_kind = st.sampled_from(["file", "file", "file", "dir", "link_in", "link_out", "link_out_dir", "dangling", "fifo"])
_entry = st.tuples(st.lists(_name, min_size=1, max_size=3), _kind, _content)
_damage = st.lists(st.tuples(st.integers(0, 50), st.sampled_from(["delete", "fifo", "link_out", "dir"])), max_size=3)


def _make(root: bytes, outside: bytes, entries: list[tuple[list[bytes], str, bytes]]) -> None:
    """Make the entries under ``root`` (one whose parent cannot be made is left out)."""
    for parts, kind, content in entries:
        path = b"/".join([root, *parts])
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if os.path.lexists(path):
                continue
            if kind == "file":
                with open(path, "wb") as handle:
                    handle.write(content)
            elif kind == "dir":
                os.mkdir(path)
            elif kind == "link_in":
                os.symlink(b"/".join([root, parts[0]]), path)
            elif kind == "link_out":
                os.symlink(outside + b"/secret.py", path)
            elif kind == "link_out_dir":
                os.symlink(outside, path)
            elif kind == "dangling":
                os.symlink(root + b"/nowhere/at/all", path)
            elif kind == "fifo" and hasattr(os, "mkfifo"):
                os.mkfifo(path)
        except OSError:  # a parent that is a file, a name too long ...
            continue


def _damaging(outside: bytes, damage: list[tuple[int, str]]) -> Callable[..., object]:
    """``list_files``, then the damage done to the files it listed (once: the first listing only)."""
    real = builder_module.list_files
    done: list[bool] = []

    def listed_then_damaged(*args: object, **kwargs: object) -> object:
        listing = real(*args, **kwargs)  # type: ignore[arg-type]
        if not done and listing.files:
            done.append(True)
            for index, what in damage:
                path = os.fsencode(listing.files[index % len(listing.files)].path)
                try:
                    if os.path.isdir(path) and not os.path.islink(path):
                        continue
                    os.unlink(path)
                    if what == "fifo" and hasattr(os, "mkfifo"):
                        os.mkfifo(path)
                    elif what == "link_out":
                        os.symlink(outside + b"/secret.py", path)
                    elif what == "dir":
                        os.mkdir(path)
                except OSError:
                    continue
        return listing

    return listed_then_damaged


def _check_hits(root: Path, hits: list) -> None:  # type: ignore[type-arg]
    real_root = os.path.realpath(root)
    for hit in hits:
        assert not os.path.isabs(hit.path) and ".." not in hit.path.split("/"), hit.path
        assert os.path.realpath(root / hit.path).startswith(real_root + os.sep), hit.path
        assert SECRET not in hit.text


@pytest.fixture(scope="module")
def static_embedder():  # type: ignore[no-untyped-def]
    from codesearch.embedding import StaticEmbedder

    return StaticEmbedder("minilm", export_progress=False)


@pytest.mark.slow
@pytest.mark.timeout(300)
@settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", "500")), deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(entries=st.lists(_entry, min_size=1, max_size=8), damage=_damage, later=st.lists(_entry, max_size=2))
def test_any_tree_indexes_and_answers_without_a_stray_error_or_path(  # type: ignore[no-untyped-def]
        static_embedder, monkeypatch: pytest.MonkeyPatch, entries, damage, later) -> None:
    with tempfile.TemporaryDirectory() as folder, monkeypatch.context() as patch:
        base = os.fsencode(folder)
        root, outside = base + b"/root", base + b"/outside"
        os.makedirs(outside)
        with open(outside + b"/secret.py", "wb") as handle:
            handle.write(f"def leaked():\n    return '{SECRET}'\n".encode())
        os.mkdir(root)
        _make(root, outside, entries)
        root_path = Path(os.fsdecode(root))
        for follow in (False, True):  # what `stats` reads, links followed or not
            for source in scan(root_path, follow_symlinks=follow).files:
                assert SECRET not in source.text
        with contextlib.suppress(CodeSearchError):
            repo_stats(root_path)

        patch.setattr(builder_module, "list_files", _damaging(outside, damage))
        patch.setattr(os, "fsync", lambda fd: None)  # durability is tested elsewhere; here it only costs time
        searchers = [CodeSearch(root_path, model=HashingEmbedder("minilm"), static=static_embedder,
                                index_dir=os.fsdecode(base + b"/index")),
                     CodeSearch(root_path, model=None, index_dir=os.fsdecode(base + b"/keywords"))]
        for round_ in range(2):
            for cs in searchers:
                modes = ("bm25",) if cs.model_name is None else ("hybrid", "bm25") if round_ == 0 else ("hybrid",)
                for query in QUERIES:
                    for mode in modes:
                        with contextlib.suppress(CodeSearchError):
                            _check_hits(root_path, cs.search(query, k=5, mode=mode))  # type: ignore[arg-type]
            if round_ == 0:  # more changes, found by the refresh of the next round
                _make(root, outside, later)
                for parts, _, _ in entries[:1]:
                    with contextlib.suppress(OSError):
                        os.unlink(b"/".join([root, *parts]))
        with contextlib.suppress(CodeSearchError):
            searchers[0].index()
