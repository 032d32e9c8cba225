"""The one folder walker: which folders are entered and which files are met, under the ignore rules.

:func:`walk` serves both the scan that reads files (:mod:`codesearch.files.scan`)
and the stat pass that only compares them (:mod:`codesearch.files.changes`),
so the two always agree on which files belong to a repository. The rules run
in a fixed order:

1. folder and name rules: vendored, generated and VCS folders (``SKIP_DIRS``,
   pruned without descending), folders named in ``exclude_dirs`` (an index kept
   inside its repository), lockfiles by full name, and paths matched by
   ``.gitignore`` / ``.codesearchignore`` files (nested ones too, through
   :mod:`pathspec`, a line pathspec refuses read as git reads it: see :func:`git_line`);
2. extensions: text formats that are noise for code search (``.svg``, source
   maps, minified bundles) are ``excluded_extension``; formats known to be
   binary (images, archives, fonts, compiled objects) are ``binary`` without
   being read;
3. size: files over ``max_file_bytes`` (1 MiB).

The walk is sorted by name. Symlinks are not followed unless asked, and a
followed link never leads outside the root or round a loop.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from collections.abc import Callable, Container, Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pathspec

from codesearch.files.read import SkippedFile, SkipReason, read_file

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 1 << 20
MAX_IGNORE_FILE_BYTES = 100 << 20
"""An ignore file larger than this is not read (git's own limit)."""
SNIFF_BYTES = 512
IGNORE_FILES = (".gitignore", ".codesearchignore")
SKIP_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", ".bzr", "node_modules", "bower_components", "dist", "build",
        ".venv", "venv", "__pycache__", ".tox", ".nox", ".mypy_cache", ".pytest_cache",
        ".ruff_cache", ".hypothesis", ".idea", ".vscode", "target", ".next", ".nuxt",
        "coverage", "htmlcov", ".eggs", ".gradle", ".terraform", ".cache", ".parcel-cache",
        ".svelte-kit", "site-packages",
    }
)
LOCKFILES = frozenset(
    {
        "package-lock.json", "pnpm-lock.yaml", "yarn.lock", "poetry.lock", "Cargo.lock",
        "uv.lock", "Gemfile.lock", "composer.lock", "Pipfile.lock", "npm-shrinkwrap.json",
        "bun.lockb", "go.sum", "flake.lock", "mix.lock", "pubspec.lock", "packages.lock.json",
    }
)
# Text formats that only add noise to code search.
EXCLUDED_EXTENSIONS = frozenset({".svg", ".map", ".min.js", ".min.css", ".ipynb_checkpoints"})
# Formats known to be binary: skipped as "binary" without reading them.
BINARY_EXTENSIONS = frozenset(
    {
        # images
        ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".ico", ".icns", ".webp", ".tif", ".tiff",
        ".psd", ".heic", ".avif",
        # archives and packages
        ".zip", ".tar", ".gz", ".tgz", ".bz2", ".xz", ".zst", ".7z", ".rar", ".jar", ".war",
        ".whl", ".egg", ".deb", ".rpm", ".dmg", ".iso",
        # fonts
        ".ttf", ".otf", ".woff", ".woff2", ".eot",
        # compiled objects and executables
        ".o", ".obj", ".a", ".lib", ".so", ".dylib", ".dll", ".exe", ".pyc", ".pyo", ".pyd",
        ".class", ".wasm", ".bin",
        # media and documents
        ".mp3", ".mp4", ".wav", ".ogg", ".flac", ".mov", ".avi", ".webm", ".pdf",
        # data blobs
        ".npy", ".npz", ".pkl", ".pickle", ".onnx", ".safetensors", ".pt", ".db", ".sqlite",
    }
)

def _extension_reason(name: str) -> str | None:
    lower = name.lower()
    suffix = os.path.splitext(lower)[1]
    if suffix in BINARY_EXTENSIONS:
        return SkipReason.BINARY
    if suffix in EXCLUDED_EXTENSIONS or any(lower.endswith(ext) for ext in (".min.js", ".min.css")):
        return SkipReason.EXCLUDED_EXTENSION
    return None


def _is_lockfile(name: str) -> bool:
    return name in LOCKFILES or name.endswith(".lock")


_Problem = tuple[int, str, str | None]
"""An ignore line pathspec cannot take as written: ``(its index, the line, how it is read instead or None)``."""


@lru_cache(maxsize=256)
def _spec(lines: tuple[str, ...]) -> tuple[pathspec.GitIgnoreSpec, tuple[_Problem, ...]]:
    """A compiled ignore file (the same lines, compiled once per process), and its lines read otherwise.

    A line pathspec refuses (or turns into a regular expression ``re`` refuses)
    is read as git reads it (:func:`git_line`); the others are compiled as written.
    """
    try:
        return pathspec.GitIgnoreSpec.from_lines(lines), ()
    except (ValueError, re.error):  # GitIgnorePatternError is a ValueError
        pass
    read: list[str] = []
    problems: list[_Problem] = []
    for number, line in enumerate(lines):
        if _compiles(line):
            read.append(line)
            continue
        instead = git_line(line)
        if instead is not None and not _compiles(instead):
            instead = None
        problems.append((number, line, instead))
        read.append("" if instead is None else instead)  # a blank line keeps nothing
    return pathspec.GitIgnoreSpec.from_lines(read), tuple(problems)


def _compiles(line: str) -> bool:
    try:
        pathspec.GitIgnoreSpec.from_lines([line])
    except (ValueError, re.error):
        return False
    return True


def git_line(line: str) -> str | None:
    """``line``, one pathspec refuses, written so that pathspec reads it as git does; ``None`` when git matches
    nothing with it.

    Git matches nothing with a lone ``!``, a line ending in an unescaped
    backslash, or one that starts or (before its trailing ``/``) ends with an
    escaped slash. It reads a range ``z-a`` in brackets as the ``z`` alone, an
    escaped slash elsewhere as a slash, and a ``**`` before an escaped slash as
    one folder or more (``**/`` is none or more).
    """
    body = _trim_trailing_spaces(line)
    negated = body.startswith("!")
    if negated:
        body = body[1:]
    if not body:
        return None
    out = ""
    i, n = 0, len(body)
    while i < n:
        char = body[i]
        if char == "\\":
            if i + 1 == n:
                return None  # an odd backslash at the end
            if body[i + 1] != "/":
                out += body[i:i + 2]
            elif i == 0 or i + 2 == n:
                return None  # "\/a" matches only a path starting with "/"; "a\/" ends in a backslash once its "/" goes
            else:
                stars = len(out) - len(out.rstrip("*"))
                if stars >= 2 and out[:-stars] in ("", out[:-stars].rstrip("/") + "/"):
                    out = out[:-stars] + "*/**/"
                else:
                    out += "/"
            i += 2
            continue
        if char == "[":
            end = _bracket_end(body, i)
            if end is not None:
                out += _without_reversed_ranges(body[i:end + 1])
                i = end + 1
                continue
        out += char
        i += 1
    return ("!" if negated else "") + out


def _trim_trailing_spaces(line: str) -> str:
    """``line`` without its trailing spaces, but for those a backslash escapes (as git trims)."""
    last_space: int | None = None
    i = 0
    while i < len(line):
        if line[i] == " ":
            if last_space is None:
                last_space = i
        else:
            last_space = None
            if line[i] == "\\":
                i += 1
        i += 1
    return line if last_space is None else line[:last_space]


def _bracket_end(pattern: str, start: int) -> int | None:
    """The index of the ``]`` that closes the bracket expression opening at ``start``, found as pathspec finds it."""
    j = start + 1
    if j < len(pattern) and pattern[j] in "!^":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    end = pattern.find("]", j)
    return None if end < 0 else end


def _without_reversed_ranges(bracket: str) -> str:
    """A bracket expression as git matches it, written for pathspec: a reversed range (``z-a``) is its first
    character alone.

    pathspec hands the expression to ``re``, which refuses a reversed range and
    would read a ``-`` left between two characters as a range: such a ``-`` goes
    last (first when the expression would otherwise open with ``^``).
    """
    negated = bracket[1:2] in ("!", "^")
    head = 2 if negated else 1
    content = bracket[head:-1]
    out = ""
    dash = False
    previous: str | None = None
    k = 0
    while k < len(content):
        char = content[k]
        if char == "-" and previous is not None and k + 1 < len(content):
            if content[k + 1] >= previous:
                out += content[k:k + 2]
            previous = None
            k += 2
            continue
        if char == "-":
            dash = True
        else:
            out += char
        previous = char
        k += 1
    if dash:
        out = "-" + out if out.startswith("^") and not negated else out + "-"
    return bracket[:head] + out + "]"


_WARNED: set[tuple[str, int, str]] = set()


def _warn(path: Path, number: int, line: str, instead: str | None) -> None:
    """Log, once per file and line, that a line of an ignore file is read otherwise than written."""
    key = (str(path), number, line)
    if key in _WARNED:
        return
    _WARNED.add(key)
    if instead is None:
        log.warning("codesearch: %s:%d: %r matches nothing, for git too; left out", path, number, line)
    else:
        log.warning("codesearch: %s:%d: %r is read as git reads it, as %r", path, number, line, instead)


def _ignore_lines(path: Path) -> list[str]:
    """The lines of the ignore file at ``path``, split as git splits them; none when it is missing, a link, not a
    regular file or too large (git reads none of these)."""
    try:
        data = read_file(os.fspath(path), MAX_IGNORE_FILE_BYTES)
    except SkippedFile:
        return []
    text = data.decode("utf-8", "surrogateescape")  # a pattern's bytes match a name's bytes, as in git
    if text.startswith("\ufeff"):
        text = text[1:]
    return [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]


class IgnoreRules:
    """The ignore specs in force in one folder: its own plus its parents'."""

    def __init__(self, specs: tuple[tuple[str, pathspec.PathSpec], ...] = ()) -> None:
        self._specs = specs

    def descend(self, folder: Path, rel_folder: str, present: Container[str] | None = None) -> IgnoreRules:
        """The rules in force in ``folder``: these plus its own ignore files (only those in ``present``, when given)."""
        lines: list[str] = []
        sources: list[tuple[int, Path]] = []  # (index of its first line, the ignore file)
        for name in IGNORE_FILES:
            if present is not None and name not in present:
                continue
            sources.append((len(lines), folder / name))
            lines.extend(_ignore_lines(folder / name))
        if not lines:
            return self
        spec, problems = _spec(tuple(lines))
        for index, line, instead in problems:
            first, path = max(source for source in sources if source[0] <= index)
            _warn(path, index - first + 1, line, instead)
        prefix = f"{rel_folder}/" if rel_folder else ""
        return IgnoreRules(self._specs + ((prefix, spec),))

    def ignored(self, rel_path: str, is_dir: bool) -> bool:
        """Whether git would ignore ``rel_path``; the deepest deciding file wins."""
        verdict = False
        for prefix, spec in self._specs:
            if not rel_path.startswith(prefix):
                continue
            local = rel_path[len(prefix):] + ("/" if is_dir else "")
            result = spec.check_file(local)
            if result.include is not None:
                verdict = result.include
        return verdict


@dataclass(frozen=True, slots=True)
class Found:
    """A file the walk met, before the file rules: its path from the root, its directory entry, the rules in force,
    whether it is a link, and the path to open it by (a followed link's target, as resolved inside the root)."""

    rel: str
    entry: os.DirEntry[str]
    rules: IgnoreRules
    link: bool
    path: str


SkipHook = Callable[[str, str, bool], None]
"""Called as ``(path, reason, is_file)`` for every folder or link the walk does not enter or yield."""
FolderHook = Callable[[str, os.stat_result], None]
"""Called as ``(path, stat)`` before each folder is listed (``"/"`` for the root, ``"src/pkg/"`` ...)."""
IgnoreFileHook = Callable[[str, "os.stat_result | None"], None]
"""Called as ``(path, stat or None when it cannot be statted)`` for every ignore file met."""


def walk(
    root: Path,
    *,
    use_ignore_files: bool = True,
    follow_symlinks: bool = False,
    exclude_dirs: Iterable[str | os.PathLike[str]] = (),
    on_skip: SkipHook | None = None,
    on_folder: FolderHook | None = None,
    on_ignore_file: IgnoreFileHook | None = None,
) -> Iterator[Found]:
    """Walk ``root`` (a resolved folder) in sorted order and yield the files met, with the rules in force.

    Folders and links are decided here (and reported through the hooks);
    files are yielded before the file rules (:func:`file_reason`), which the
    caller applies: a stat pass only stats a file it already knows.
    """
    excluded = frozenset(os.path.realpath(d) for d in exclude_dirs)
    rules = IgnoreRules().descend(root, "") if use_ignore_files else IgnoreRules()
    # Depth first, in name order: (folder's path from the root, its real path, its rules, its sorted entries).
    stack: list[tuple[str, str, IgnoreRules, Iterator[os.DirEntry[str]]]] = []
    active: list[str] = []

    def enter(folder: str, rel_folder: str, real: str, folder_rules: IgnoreRules) -> None:
        try:
            # Stat'ed before it is listed: an entry added after the listing moves its mtime past this one.
            info = os.stat(folder)
            if on_folder is not None:
                on_folder(f"{rel_folder}/", info)
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            if on_skip is not None:
                on_skip(rel_folder or ".", SkipReason.UNREADABLE, False)
            return
        stack.append((rel_folder, real, folder_rules, iter(entries)))
        active.append(real)

    enter(str(root), "", str(root), rules)
    while stack:
        rel_folder, real_folder, rules, entries = stack[-1]
        entry = next(entries, None)
        if entry is None:
            stack.pop()
            active.pop()
            continue
        rel = f"{rel_folder}/{entry.name}" if rel_folder else entry.name
        if use_ignore_files and entry.name in IGNORE_FILES and on_ignore_file is not None:
            try:
                on_ignore_file(rel, entry.stat())
            except OSError:
                on_ignore_file(rel, None)
        try:
            is_link = entry.is_symlink()
            is_dir = entry.is_dir(follow_symlinks=True)
        except OSError:
            if on_skip is not None:
                on_skip(rel, SkipReason.UNREADABLE, False)
            continue
        real = f"{real_folder}/{entry.name}"
        if is_link:
            if not follow_symlinks:
                if on_skip is not None:
                    on_skip(rel, SkipReason.SYMLINK, not is_dir)
                continue
            real = os.path.realpath(entry.path)
            if not Path(real).is_relative_to(str(root)):
                if on_skip is not None:
                    on_skip(rel, SkipReason.OUTSIDE_ROOT, not is_dir)
                continue
        if not is_dir:
            yield Found(rel, entry, rules, is_link, real if is_link else entry.path)
            continue
        if entry.name in SKIP_DIRS or real in excluded:
            if on_skip is not None:
                on_skip(rel, SkipReason.SKIPPED_DIR, False)
            continue
        if rules.ignored(rel, is_dir=True):
            if on_skip is not None:
                on_skip(rel, SkipReason.IGNORED, False)
            continue
        if real in active:
            if on_skip is not None:
                on_skip(rel, SkipReason.SYMLINK_LOOP, False)
            continue
        enter(entry.path, rel, real, rules.descend(Path(entry.path), rel) if use_ignore_files else rules)


def file_reason(
    entry: os.DirEntry[str], rel: str, rules: IgnoreRules, max_file_bytes: int
) -> tuple[str | None, os.stat_result | None]:
    """The first rule that skips this file before reading it (or ``None``), and its stat when it got that far."""
    if _is_lockfile(entry.name):
        return SkipReason.LOCKFILE, None
    if rules.ignored(rel, is_dir=False):
        return SkipReason.IGNORED, None
    reason = _extension_reason(entry.name)
    if reason is not None:
        return reason, None
    try:
        info = entry.stat(follow_symlinks=True)
    except OSError:
        return SkipReason.UNREADABLE, None
    if not stat.S_ISREG(info.st_mode):
        return SkipReason.SPECIAL, None
    if info.st_size > max_file_bytes:
        return SkipReason.TOO_LARGE, info
    return None, info


__all__ = ["BINARY_EXTENSIONS", "EXCLUDED_EXTENSIONS", "IGNORE_FILES", "LOCKFILES", "MAX_FILE_BYTES",
           "MAX_IGNORE_FILE_BYTES", "SKIP_DIRS", "SNIFF_BYTES", "Found", "IgnoreRules", "SkipReason", "file_reason",
           "git_line", "walk"]
