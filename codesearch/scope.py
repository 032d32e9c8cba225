"""Which part of a repository a search covers: path globs and file kinds.

Every indexed file gets a kind from its path alone
(:func:`codesearch.files.kinds.kind_of`): ``source``, ``test``, ``doc`` or
``config``. A :class:`Scope` narrows a search
by path prefix, by ``.gitignore``-style include and exclude globs (through
:class:`pathspec.GitIgnoreSpec`) and by kind; :meth:`Scope.mask` turns it into
a boolean array over the index's chunks, to apply before the top-k cut.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pathspec import GitIgnoreSpec

from codesearch.display import clipped
from codesearch.exceptions import InvalidScopeError
from codesearch.files.kinds import KINDS, kind_of


def as_strings(value: str | Iterable[str] | None) -> tuple[str, ...]:
    """One string, many, or none (``None``), as a tuple: how the API and the MCP tools take globs and kinds."""
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def _as_tuple(value: str | Iterable[str], what: str) -> tuple[str, ...]:
    items = (value,) if isinstance(value, str) else tuple(value)
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"Scope {what} must be strings, got {item!r}")
    return items


def _as_kinds(value: str | Iterable[str], what: str) -> frozenset[str]:
    kinds = frozenset(_as_tuple(value, what))
    unknown = sorted(kinds.difference(KINDS))
    if unknown:
        raise ValueError(
            f"unknown kind {', '.join(map(repr, unknown))} in Scope {what}; valid kinds: {', '.join(KINDS)}"
        )
    return kinds


def _compile(patterns: tuple[str, ...], what: str) -> GitIgnoreSpec | None:
    """The globs as one spec; a glob that does not compile raises :class:`InvalidScopeError` naming it."""
    if not patterns:
        return None
    try:
        return GitIgnoreSpec.from_lines(patterns)
    except (ValueError, re.error):
        pass
    for pattern in patterns:  # name the glob at fault, and why in words (not the regex it was turned into)
        try:
            GitIgnoreSpec.from_lines([pattern])
        except re.error as exc:
            reason = exc.msg
        except ValueError as exc:
            reason = str(exc).split(":")[0]
        else:
            continue
        raise InvalidScopeError(f"bad glob {clipped(pattern)!r} in {what} ({reason}); globs use .gitignore syntax, "
                                "e.g. '*.py', 'src/', '!tests/**'")
    raise InvalidScopeError(f"the {what} globs do not compile together; globs use .gitignore syntax")


def relative_prefix(prefix: str | None, root: str | os.PathLike[str]) -> str | None:
    """A scope prefix as a path relative to ``root``: an absolute path inside the repository becomes relative.

    A relative prefix is returned as it is. An absolute one is taken as a
    path on disk when it lies inside ``root`` (as written, or once symlinks and
    ``..`` are resolved); otherwise, when it names something in the
    repository with its leading ``/`` taken as the root (``/src``), it is that.

    Raises:
        InvalidScopeError: an absolute prefix that is neither.
    """
    if prefix is None or not os.path.isabs(prefix.strip()):
        return prefix
    written = prefix.strip()
    for place, base in ((os.path.abspath(written), os.path.abspath(root)),
                        (os.path.realpath(written), os.path.realpath(root))):
        if place == base or place.startswith(base.rstrip(os.sep) + os.sep):
            relative = Path(place).relative_to(base).as_posix()
            return "." if relative in ("", ".") else relative
    anchored = written.lstrip("/\\")
    if anchored and os.path.lexists(os.path.join(root, anchored)):
        return anchored
    raise InvalidScopeError(f"the scope {clipped(written)!r} is outside the repository {os.fspath(root)}; give a path "
                            "inside it, or one relative to it such as 'src/'")


@dataclass(frozen=True, slots=True)
class Scope:
    """The files and kinds a search covers; the default covers everything.

    A chunk is in scope when its path is under ``prefix``, matches
    ``include`` (if given), does not match ``exclude``, and its kind is in
    ``kinds`` (if given) and not in ``exclude_kinds``.

    Attributes:
        prefix: a folder or file path such as ``"src/"`` or ``"src/requests"``;
            it matches whole path components, so ``"src"`` covers
            ``src/a.py`` but not ``srcs/a.py``. Leading ``./`` and ``/`` and a
            trailing ``/`` are ignored.
        include: globs in ``.gitignore`` syntax (``"*.py"``, ``"docs/"``,
            ``"/setup.py"``, ``"!tests/**"``); a path must match them. As in
            git, the last matching pattern wins, so a ``!`` pattern takes back
            what an earlier one matched -- except that a pattern matching the
            file itself beats one matching only a folder above it:
            ``("*.py", "!tests/")`` still keeps ``tests/a.py``; write
            ``"!tests/**"`` or put ``"tests/"`` in ``exclude``.
        exclude: globs in the same syntax; a path that matches is left out.
        kinds: the kinds to keep, or None for all of them.
        exclude_kinds: kinds to leave out.

    Raises:
        ValueError: a kind is unknown or ``kinds`` is empty; :class:`InvalidScopeError` (a ``ValueError``): a glob
            does not compile.
        TypeError: a glob or kind is not a string.

    A single string is accepted where a tuple or set is expected, and lists are
    turned into tuples, so ``Scope(include="*.py", kinds={"source"})`` works.
    """

    prefix: str | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    kinds: frozenset[str] | None = None
    exclude_kinds: frozenset[str] = frozenset()
    _include_spec: GitIgnoreSpec | None = field(default=None, init=False, repr=False, compare=False)
    _exclude_spec: GitIgnoreSpec | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def of(cls, prefix: str | None = None, include: str | Iterable[str] | None = None,
           exclude: str | Iterable[str] | None = None, kinds: str | Iterable[str] | None = None,
           exclude_kinds: str | Iterable[str] | None = None) -> Scope:
        """The scope of a search call's arguments: each glob or kind list one string or any iterable of them."""
        return cls(prefix=prefix, include=as_strings(include), exclude=as_strings(exclude),
                   kinds=None if kinds is None else frozenset(as_strings(kinds)),
                   exclude_kinds=frozenset(as_strings(exclude_kinds)))

    def __post_init__(self) -> None:
        prefix = self.prefix
        if prefix is not None:
            if not isinstance(prefix, str):
                raise TypeError(f"Scope prefix must be a string or None, got {prefix!r}")
            prefix = prefix.strip()
            while prefix.startswith("./"):
                prefix = prefix[2:]
            prefix = prefix.strip("/")
            if prefix in ("", "."):
                prefix = None
        include = tuple(p for p in _as_tuple(self.include, "include globs") if p.strip())
        exclude = tuple(p for p in _as_tuple(self.exclude, "exclude globs") if p.strip())
        kinds = None if self.kinds is None else _as_kinds(self.kinds, "kinds")
        if kinds is not None and not kinds:
            raise ValueError(
                f"Scope kinds is empty, so nothing would match; use None for all kinds ({', '.join(KINDS)})"
            )
        exclude_kinds = _as_kinds(self.exclude_kinds, "exclude_kinds")
        object.__setattr__(self, "prefix", prefix)
        object.__setattr__(self, "include", include)
        object.__setattr__(self, "exclude", exclude)
        object.__setattr__(self, "kinds", kinds)
        object.__setattr__(self, "exclude_kinds", exclude_kinds)
        object.__setattr__(self, "_include_spec", _compile(include, "include"))
        object.__setattr__(self, "_exclude_spec", _compile(exclude, "exclude"))

    @classmethod
    def everything(cls) -> Scope:
        """Return the scope that keeps every chunk."""
        return cls()

    @property
    def is_unrestricted(self) -> bool:
        """True when this scope keeps every chunk, so a searcher can skip the mask."""
        return (
            self.prefix is None
            and not self.include
            and not self.exclude
            and (self.kinds is None or self.kinds.issuperset(KINDS))
            and not self.exclude_kinds
        )

    def allows_path(self, path: str) -> bool:
        """Return whether ``path`` passes the prefix, include and exclude rules."""
        prefix = self.prefix
        if prefix is not None and path != prefix and not path.startswith(prefix + "/"):
            return False
        if self._include_spec is not None and not self._include_spec.match_file(path):
            return False
        return self._exclude_spec is None or not self._exclude_spec.match_file(path)

    def allows_kind(self, kind: str) -> bool:
        """Return whether chunks of this kind are in scope."""
        return (self.kinds is None or kind in self.kinds) and kind not in self.exclude_kinds

    def allows(self, path: str, kind: str | None = None) -> bool:
        """Return whether a file is in scope; its kind defaults to :func:`kind_of`."""
        return self.allows_kind(kind_of(path) if kind is None else kind) and self.allows_path(path)

    def mask(self, paths: Sequence[str], kinds: Sequence[str] | None = None) -> np.ndarray:
        """Select the chunks in scope.

        Each distinct (path, kind) is decided once, so a few hundred files
        cost a few hundred glob matches however many chunks they hold. An
        index that keeps one entry per file and a chunk-to-file array can also
        call this on its files and index the result by that array.

        Args:
            paths: each chunk's file path (posix, relative to the root).
            kinds: each chunk's kind, as stored; None to derive it with
                :func:`kind_of`.

        Returns:
            Boolean array of ``len(paths)``, True for chunks in scope.

        Raises:
            ValueError: ``kinds`` and ``paths`` differ in length.
        """
        n = len(paths)
        if kinds is not None and len(kinds) != n:
            raise ValueError(f"Scope.mask got {n} paths but {len(kinds)} kinds; give one kind per path")
        if self.is_unrestricted:
            return np.ones(n, dtype=bool)
        if kinds is None:
            kinds = [kind_of(str(p)) for p in paths]
        decided: dict[tuple[str, str], bool] = {}
        keep = []
        for path, kind in zip(paths, kinds):
            key = (str(path), str(kind))
            hit = decided.get(key)
            if hit is None:
                hit = decided[key] = self.allows_kind(key[1]) and self.allows_path(key[0])
            keep.append(hit)
        return np.array(keep, dtype=bool).reshape(n)


__all__ = ["Scope", "as_strings", "relative_prefix"]
