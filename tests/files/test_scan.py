"""The scanner: skip rules in order, ignore files, encodings, links and unreadable files."""

from __future__ import annotations

import codecs
import importlib
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from codesearch.chunking import chunk_text
from codesearch.exceptions import RootNotFoundError
from codesearch.files import MAX_FILE_BYTES, SkipReason, decode_bytes, scan


def _write(root: Path, rel: str, data: bytes | str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return path


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    _write(root, "src/app.py", "def main():\n    return 1\n")
    _write(root, "src/util/helpers.py", "X = 1\n")
    _write(root, "README.md", "# hello\n")
    _write(root, "node_modules/pkg/index.js", "module.exports = 1\n")
    _write(root, ".git/HEAD", "ref: refs/heads/main\n")
    _write(root, "build/out.py", "generated = True\n")
    _write(root, "package-lock.json", "{}\n")
    _write(root, "poetry.lock", "x\n")
    _write(root, "weird.lock", "x\n")
    _write(root, "logo.svg", "<svg></svg>\n")
    _write(root, "logo.png", b"\x89PNG\r\n\x1a\n" + b"\0" * 100)
    _write(root, "data.bin.txt", b"abc\0def")
    _write(root, "huge.txt", b"a" * (MAX_FILE_BYTES + 1))
    _write(root, "edge.txt", b"a" * MAX_FILE_BYTES)
    return root


def _paths(result) -> list[str]:
    return [f.path for f in result.files]


def test_rules_and_reasons(tree: Path) -> None:
    result = scan(tree)
    assert _paths(result) == ["README.md", "edge.txt", "src/app.py", "src/util/helpers.py"]
    assert dict(result.skipped) == {
        SkipReason.SKIPPED_DIR: 3,  # .git, build, node_modules: pruned, their files never seen
        SkipReason.LOCKFILE: 3,
        SkipReason.EXCLUDED_EXTENSION: 1,
        SkipReason.BINARY: 2,  # logo.png by extension, data.bin.txt by its NUL byte
        SkipReason.TOO_LARGE: 1,
    }
    assert result.files_seen == 4 + 3 + 1 + 2 + 1
    assert result.bytes == sum((tree / p).stat().st_size for p in _paths(result))
    reasons = dict(result.skipped_paths)
    assert reasons["huge.txt"] == SkipReason.TOO_LARGE
    assert reasons["data.bin.txt"] == SkipReason.BINARY


def test_rule_order_extension_before_size_before_nul(tmp_path: Path) -> None:
    _write(tmp_path, "big.svg", b"\0" * (MAX_FILE_BYTES + 10))
    _write(tmp_path, "big.txt", b"\0" * (MAX_FILE_BYTES + 10))
    _write(tmp_path, "yarn.lock", b"\0" * (MAX_FILE_BYTES + 10))
    reasons = dict(scan(tmp_path).skipped_paths)
    assert reasons == {
        "big.svg": SkipReason.EXCLUDED_EXTENSION,
        "big.txt": SkipReason.TOO_LARGE,
        "yarn.lock": SkipReason.LOCKFILE,
    }


def test_nested_gitignore_and_codesearchignore(tmp_path: Path) -> None:
    _write(tmp_path, ".gitignore", "*.log\nsecret/\n")
    _write(tmp_path, "a.log", "x\n")
    _write(tmp_path, "secret/key.py", "KEY = 1\n")
    _write(tmp_path, "pkg/.gitignore", "!keep.log\ngenerated_*.py\n")
    _write(tmp_path, "pkg/keep.log", "kept\n")
    _write(tmp_path, "pkg/other.log", "x\n")
    _write(tmp_path, "pkg/generated_models.py", "x = 1\n")
    _write(tmp_path, "generated_top.py", "x = 1\n")  # the nested rule does not reach up
    _write(tmp_path, ".codesearchignore", "fixtures/\n")
    _write(tmp_path, "fixtures/big.py", "x = 1\n")
    _write(tmp_path, "main.py", "x = 1\n")

    on = scan(tmp_path)
    assert _paths(on) == [".codesearchignore", ".gitignore", "generated_top.py", "main.py",
                          "pkg/.gitignore", "pkg/keep.log"]
    assert on.skipped[SkipReason.IGNORED] == 5  # a.log, secret/, pkg/other.log, generated_models, fixtures/

    off = scan(tmp_path, use_ignore_files=False)
    assert "secret/key.py" in _paths(off) and "fixtures/big.py" in _paths(off)
    assert SkipReason.IGNORED not in off.skipped


def test_walk_is_sorted_and_deterministic(tree: Path) -> None:
    first, second = scan(tree), scan(tree)
    assert _paths(first) == sorted(_paths(first)) == _paths(second)
    assert first.skipped_paths == second.skipped_paths


@pytest.mark.parametrize(
    ("data", "text", "encoding"),
    [
        (b"plain\n", "plain\n", "utf-8"),
        (codecs.BOM_UTF8 + b"with bom\n", "with bom\n", "utf-8-sig"),
        ("utf16 é\n".encode("utf-16"), "utf16 é\n", "utf-16"),
        (codecs.BOM_UTF16_BE + "be\n".encode("utf-16-be"), "be\n", "utf-16"),
        ("utf32\n".encode("utf-32"), "utf32\n", "utf-32"),
        (b"bad \xff\xfe byte\n", "bad \ufffd\ufffd byte\n", "utf-8"),
    ],
)
def test_decoding(data: bytes, text: str, encoding: str) -> None:
    assert decode_bytes(data) == (text, encoding)


def test_utf16_file_is_indexed_with_editor_line_numbers(tmp_path: Path) -> None:
    body = "first\r\nsecond\r\n\r\ndef target():\r\n    pass\r\n"
    _write(tmp_path, "win.py", body.encode("utf-16"))
    _write(tmp_path, "bom8.py", codecs.BOM_UTF8 + body.encode("utf-8"))
    _write(tmp_path, "mac.py", body.replace("\r\n", "\r").encode())
    result = scan(tmp_path)
    assert SkipReason.BINARY not in result.skipped
    for source in result.files:
        (chunk,) = chunk_text(source.path, source.text)
        assert (chunk.start_line, chunk.end_line) == (1, 5)
        assert chunk.text.splitlines()[3] == "def target():"
        assert not chunk.text.startswith("\ufeff")


def test_symlinks_not_followed_by_default(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _write(root, "real/mod.py", "x = 1\n")
    _write(tmp_path, "outside/secret.py", "SECRET = 1\n")
    os.symlink(root / "real", root / "alias")
    os.symlink(tmp_path / "outside", root / "escape")
    os.symlink(tmp_path / "outside/secret.py", root / "secret_link.py")
    result = scan(root)
    assert _paths(result) == ["real/mod.py"]
    assert result.skipped[SkipReason.SYMLINK] == 3


def test_followed_links_stay_inside_root_and_loops_end(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _write(root, "real/mod.py", "x = 1\n")
    _write(tmp_path, "outside/secret.py", "SECRET = 1\n")
    os.symlink(root / "real", root / "alias")
    os.symlink(root, root / "real" / "loop")  # real/loop -> root: a cycle
    os.symlink(tmp_path / "outside", root / "escape")
    os.symlink(tmp_path / "outside/secret.py", root / "secret_link.py")
    result = scan(root, follow_symlinks=True)
    assert all("secret" not in f.text.lower() for f in result.files)
    assert result.skipped[SkipReason.OUTSIDE_ROOT] == 2
    assert result.skipped[SkipReason.SYMLINK_LOOP] >= 1
    assert "real/mod.py" in _paths(result) and "alias/mod.py" in _paths(result)


def test_unreadable_and_vanished_files_are_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path, "ok.py", "x = 1\n")
    _write(tmp_path, "locked.py", "x = 2\n")
    _write(tmp_path, "gone.py", "x = 3\n")
    real_open = os.open

    def fake_open(file, *args, **kwargs):  # type: ignore[no-untyped-def]
        name = os.fspath(file)
        if name.endswith("locked.py"):
            raise PermissionError(13, "Permission denied", name)
        if name.endswith("gone.py"):
            os.unlink(name)  # vanishes between listing and reading
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(os, "open", fake_open)
    result = scan(tmp_path)
    assert _paths(result) == ["ok.py"]
    assert result.skipped[SkipReason.UNREADABLE] == 2


def test_missing_root_and_file_root(tmp_path: Path) -> None:
    with pytest.raises(RootNotFoundError, match="does not exist"):
        scan(tmp_path / "nope")
    _write(tmp_path, "file.py", "x\n")
    with pytest.raises(RootNotFoundError, match="not a directory"):
        scan(tmp_path / "file.py")


def test_requests_v2_32_3_exactly(requests_corpus: Path) -> None:
    for use_ignore_files in (True, False):
        result = scan(requests_corpus, use_ignore_files=use_ignore_files)
        assert result.files_seen == 129
        assert len(result.files) == 117
        assert result.bytes == 625_261
        assert result.skipped[SkipReason.BINARY] == 10
        assert result.skipped[SkipReason.TOO_LARGE] == 1
        assert result.skipped[SkipReason.EXCLUDED_EXTENSION] == 1
        assert sum(len(chunk_text(f.path, f.text)) for f in result.files) == 318


def test_exclude_dirs_prunes_an_index_inside_the_root(tree: Path) -> None:
    index = tree / "src" / "util"
    result = scan(tree, exclude_dirs=[index])
    assert "src/util/helpers.py" not in _paths(result)
    assert ("src/util", SkipReason.SKIPPED_DIR) in result.skipped_paths


# --- names that are not UTF-8, special files, files swapped between listing and reading ---------------

_scan_module = importlib.import_module("codesearch.files.scan")


def _swap_after_listing(monkeypatch: pytest.MonkeyPatch, module: object, swap: Callable[[], None]) -> None:
    """Make ``module.list_files`` run ``swap`` right after it lists: the file changes between listing and reading."""
    real = module.list_files  # type: ignore[attr-defined]

    def listed_then_swapped(*args: object, **kwargs: object) -> object:
        listing = real(*args, **kwargs)
        swap()
        return listing

    monkeypatch.setattr(module, "list_files", listed_then_swapped)


def test_a_name_that_is_not_utf8_is_kept_losslessly(tmp_path: Path) -> None:
    base = os.fsencode(tmp_path)
    os.mkdir(base + b"/d\xfe")
    for name in (b"/bad\xffname.py", b"/d\xfe/ok.py"):
        with open(base + name, "wb") as handle:
            handle.write(b"def f():\n    return 1\n")
    result = scan(tmp_path)
    assert sorted(os.fsencode(path) for path in _paths(result)) == [b"bad\xffname.py", b"d\xfe/ok.py"]
    for path in _paths(result):  # the name a file is listed under opens it again
        assert (tmp_path / path).read_bytes() == b"def f():\n    return 1\n"
    assert set(result.stats) == set(_paths(result)) and "d\udcfe/" in result.walk_stats


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_in_the_tree_is_a_special_file(tmp_path: Path) -> None:
    _write(tmp_path, "a.py", "x = 1\n")
    os.mkfifo(tmp_path / "pipe.py")
    result = scan(tmp_path)
    assert _paths(result) == ["a.py"]
    assert dict(result.skipped_paths)["pipe.py"] == SkipReason.SPECIAL


@pytest.mark.timeout(30)
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_named_like_an_ignore_file_is_read_as_empty_without_blocking(tmp_path: Path) -> None:
    _write(tmp_path, "a.py", "x = 1\n")
    _write(tmp_path, "sub/b.py", "y = 2\n")
    os.mkfifo(tmp_path / ".gitignore")
    os.mkfifo(tmp_path / "sub" / ".codesearchignore")
    result = scan(tmp_path)  # used to block for ever, opening the FIFO with no writer
    assert _paths(result) == ["a.py", "sub/b.py"]
    assert result.skipped[SkipReason.SPECIAL] == 2


@pytest.mark.timeout(30)
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_file_swapped_for_a_fifo_after_listing_is_skipped_without_blocking(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path, "a.py", "x = 1\n")
    _write(tmp_path, "b.py", "y = 2\n")

    def swap() -> None:
        os.unlink(tmp_path / "b.py")
        os.mkfifo(tmp_path / "b.py")

    _swap_after_listing(monkeypatch, _scan_module, swap)
    result = scan(tmp_path)  # used to block for ever
    assert _paths(result) == ["a.py"]
    assert dict(result.skipped_paths)["b.py"] == SkipReason.SPECIAL


def test_a_file_swapped_for_a_link_out_of_the_tree_after_listing_is_not_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "root"
    _write(root, "a.py", "x = 1\n")
    _write(root, "b.py", "y = 2\n")
    _write(tmp_path, "outside/secret.py", "SECRET = 1\n")

    def swap() -> None:
        os.unlink(root / "b.py")
        os.symlink(tmp_path / "outside" / "secret.py", root / "b.py")

    _swap_after_listing(monkeypatch, _scan_module, swap)
    result = scan(root)
    assert _paths(result) == ["a.py"]
    assert all("SECRET" not in f.text for f in result.files)
    assert dict(result.skipped_paths)["b.py"] == SkipReason.SYMLINK


def test_a_followed_link_is_read_through_its_target_inside_the_root(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "root"
    _write(root, "real/mod.py", "x = 1\n")
    os.symlink(root / "real" / "mod.py", root / "alias.py")
    _write(tmp_path, "outside/secret.py", "SECRET = 1\n")
    assert _paths(scan(root, follow_symlinks=True)) == ["alias.py", "real/mod.py"]

    def swap() -> None:  # the target inside the root becomes a link out of it
        os.unlink(root / "real" / "mod.py")
        os.symlink(tmp_path / "outside" / "secret.py", root / "real" / "mod.py")

    _swap_after_listing(monkeypatch, _scan_module, swap)
    result = scan(root, follow_symlinks=True)
    assert _paths(result) == [] and result.skipped[SkipReason.SYMLINK] == 2


# --- ignore files as git reads them ------------------------------------------------------------------

# Names to ask about, and lines pathspec refuses (or compiles into a bad regular expression) that git reads:
# a reversed range matches its first character, a lone "!" or a line ending in an odd backslash matches
# nothing, an escaped slash is a slash.
_NAMES = ("a", "b", "x", "z", "xa", "xz", "ab", "bb", "!", "\\", "a\\", "f", "[z-a]", "-", "q/a", "q/b")
_GIT_LINES = ("[z-a]", "[!z-a]", "x[z-a]", "[xz-a]", "*[z-a]*", "[!z-a]b", "[--*]", "[z-a]/", "!", "!  ", "\\",
              "a\\", "!\\", "b\\", "a\\ \\", "q\\/a", "\\/a", "a\\/", "q\\/*", "**\\/b")
# What git 2.39 answers (`git check-ignore --no-index`) for each line above, when no git is at hand.
_GIT_IGNORES = {
    "[z-a]": {"z"}, "[!z-a]": {"a", "b", "x", "!", "\\", "f", "-", "q/a", "q/b"}, "x[z-a]": {"xz"}, "[xz-a]": {"x", "z"},
    "*[z-a]*": {"z", "xz", "[z-a]"}, "[!z-a]b": {"ab", "bb"}, "[--*]": {"-"}, "[z-a]/": set(), "!": set(),
    "!  ": set(), "\\": set(), "a\\": set(), "!\\": set(), "b\\": set(), "a\\ \\": set(), "q\\/a": {"q/a"},
    "\\/a": set(), "a\\/": set(), "q\\/*": {"q/a", "q/b"}, "**\\/b": {"q/b"},
}


def _git_ignores(root: Path, names: tuple[str, ...]) -> set[str] | None:
    """The names git ignores under ``root`` (a repository is made there), or ``None`` without git."""
    import shutil
    import subprocess

    if shutil.which("git") is None:
        return None
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    run = subprocess.run(["git", "-C", str(root), "check-ignore", "--no-index", "--stdin", "-z"],
                         input="\0".join(names) + "\0", capture_output=True, text=True)
    return set(run.stdout.split("\0")) - {""}


@pytest.mark.parametrize("line", _GIT_LINES)
def test_an_ignore_line_pathspec_refuses_is_read_as_git_reads_it(tmp_path: Path, line: str) -> None:
    root = tmp_path / "repo"
    for name in _NAMES:
        _write(root, name, "x = 1\n")
    _write(root, ".gitignore", line + "\n")
    ignored = {path for path, reason in scan(root).skipped_paths if reason == SkipReason.IGNORED}
    git = _git_ignores(root, _NAMES)
    expected = _GIT_IGNORES[line] if git is None else git
    assert (git is None or git == _GIT_IGNORES[line]), f"git {git} differs from what was recorded"
    # A folder git ignores is pruned: its files are not listed, so count them by folder.
    ours = {name for name in _NAMES if name in ignored or name.split("/")[0] in ignored}
    assert ours == expected


def test_an_unusable_ignore_line_warns_once_naming_its_file_and_line(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _write(tmp_path, "a.py", "x = 1\n")
    _write(tmp_path, "g.log", "x\n")
    _write(tmp_path, "x/b.py", "y = 2\n")
    _write(tmp_path, "x/.gitignore", "# comment\n*.log\n!\n[z-a]\n")
    _write(tmp_path, ".gitignore", "*.log\n")
    with caplog.at_level("WARNING", logger="codesearch.files.ignore"):
        first = scan(tmp_path)
        second = scan(tmp_path)
    assert _paths(first) == _paths(second) == [".gitignore", "a.py", "x/.gitignore", "x/b.py"]
    warnings = [r.getMessage() for r in caplog.records if r.name == "codesearch.files.ignore"]
    assert len(warnings) == 2, warnings
    assert any(str(tmp_path / "x" / ".gitignore") + ":3" in w and "'!'" in w for w in warnings)
    assert any(str(tmp_path / "x" / ".gitignore") + ":4" in w and "[z-a]" in w for w in warnings)
    # A line of .codesearchignore is named by its own file and number, whether .gitignore is there or not.
    caplog.clear()
    _write(tmp_path, "y/.codesearchignore", "*.log\n!\n")
    _write(tmp_path, "z/.gitignore", "")
    _write(tmp_path, "z/.codesearchignore", "\\\n")
    with caplog.at_level("WARNING", logger="codesearch.files.ignore"):
        scan(tmp_path)
    warnings = sorted(r.getMessage() for r in caplog.records if r.name == "codesearch.files.ignore")
    assert len(warnings) == 2, warnings
    assert str(tmp_path / "y" / ".codesearchignore") + ":2: '!'" in warnings[0]
    assert str(tmp_path / "z" / ".codesearchignore") + ":1: '\\\\'" in warnings[1]


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no links here")
def test_a_linked_ignore_file_is_not_followed_as_git_does_not(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    _write(root, "a.log", "x\n")
    _write(root, "b.py", "y\n")
    _write(tmp_path, "rules", "*.log\n")
    os.symlink(tmp_path / "rules", root / ".gitignore")
    result = scan(root)
    assert _paths(result) == ["a.log", "b.py"]
    git = _git_ignores(root, ("a.log", "b.py"))
    assert git is None or git == set()
