"""Ignore files as git reads them: ``.gitignore`` and ``.codesearchignore``, nested ones too.

:class:`IgnoreRules` holds the rules in force in one folder of the walk
(:mod:`codesearch.files.walk`): its own ignore files' and its parents'. The
lines are compiled by :mod:`pathspec`'s ``GitIgnoreSpec``, a whole file at
once; where pathspec refuses a line that git reads (a reversed range
``[z-a]``, a lone ``!``, a trailing backslash, an escaped slash), the file is
compiled line by line and that line is read as git reads it, or left out where
git matches nothing with it (:func:`git_line`), with one warning naming the
file and the line. Ignore files themselves are read as git reads them: a link,
a FIFO or a file over 100 MB is none; the bytes are decoded with surrogate
escapes, so a pattern matches a name that is not UTF-8 byte for byte.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Container
from functools import lru_cache
from pathlib import Path

import pathspec

from codesearch.files.read import SkippedFile, read_file

log = logging.getLogger(__name__)

IGNORE_FILES = (".gitignore", ".codesearchignore")
MAX_IGNORE_FILE_BYTES = 100 << 20
"""An ignore file larger than this is not read (git's own limit)."""


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
                before = out.rstrip("*")
                if len(out) - len(before) >= 2 and (not before or before.endswith("/")):
                    out = before + "*/**/"  # a "**" that is a whole part, before an escaped slash
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
            found = _ignore_lines(folder / name)
            if found:
                sources.append((len(lines), folder / name))
                lines.extend(found)
        if not lines:
            return self
        spec, problems = _spec(tuple(lines))
        for index, line, instead in problems:
            first, path = [source for source in sources if source[0] <= index][-1]
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


__all__ = ["IGNORE_FILES", "MAX_IGNORE_FILE_BYTES", "IgnoreRules", "git_line"]
