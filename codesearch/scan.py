"""Walk a root folder and decide which files are indexed.

The rules run in a fixed order and every skipped file is counted under one
reason:

1. folder and name rules: vendored, generated and VCS folders (``SKIP_DIRS``,
   pruned without descending), lockfiles by full name, and paths matched by
   ``.gitignore`` / ``.codesearchignore`` files (nested ones too, through
   :mod:`pathspec`);
2. extensions: text formats that are noise for code search (``.svg``, source
   maps, minified bundles) are ``excluded_extension``; formats known to be
   binary (images, archives, fonts, compiled objects) are ``binary`` without
   being read;
3. size: files over ``max_file_bytes`` (1 MiB);
4. content: a NUL byte in the first 512 bytes means ``binary`` -- unless the
   file starts with a UTF-16/UTF-32 byte-order mark, in which case it is
   decoded.

Text is decoded as UTF-8 (a BOM is dropped, invalid bytes become U+FFFD) or as
UTF-16/32 when a BOM says so. Symlinks are not followed unless asked, and a
followed link never leads outside the root or round a loop. A file that cannot
be read (permission denied, vanished mid-walk) is skipped as ``unreadable``.
"""

from __future__ import annotations

import codecs
import hashlib
import os
import stat
import time
from collections import Counter
from collections.abc import Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import pathspec

from codesearch.exceptions import RootNotFoundError

MAX_FILE_BYTES = 1 << 20
SNIFF_BYTES = 512
IGNORE_FILES = (".gitignore", ".codesearchignore")
RACY_NS = 2_000_000_000
"""A folder or ignore file changed this recently before the walk read it is not trusted to show a
later change in its mtime (timestamps advance in coarse ticks): a stat pass walks again while so."""

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

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


class SkipReason:
    """Why a file (or folder) was not indexed; the keys of :attr:`ScanResult.skipped`."""

    SKIPPED_DIR = "skipped_dir"
    LOCKFILE = "lockfile"
    IGNORED = "ignored"
    EXCLUDED_EXTENSION = "excluded_extension"
    TOO_LARGE = "too_large"
    BINARY = "binary"
    UNREADABLE = "unreadable"
    SYMLINK = "symlink"
    OUTSIDE_ROOT = "outside_root"
    SYMLINK_LOOP = "symlink_loop"


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One file chosen for indexing.

    Attributes:
        path: path relative to the root, ``/``-separated.
        size: size on disk in bytes.
        text: decoded text.
        sha256: hex digest of the raw bytes.
        encoding: the codec used to decode them.
        mtime_ns: modification time when it was read, in nanoseconds.
    """

    path: str
    size: int
    text: str
    sha256: str
    encoding: str
    mtime_ns: int = 0


@dataclass(slots=True)
class ScanResult:
    """What :func:`scan` found.

    Attributes:
        root: the resolved root folder.
        files: the indexed files, sorted by path.
        files_seen: files met during the walk (pruned folders are not entered).
        skipped: count per :class:`SkipReason` (folders pruned count once each).
        skipped_paths: ``(path, reason)`` per skip, in walk order.
        stats: ``path -> (size, mtime_ns)`` of every file that was read
            (indexed, or found binary or unreadable by its content): what
            :func:`changed_files` compares later without reading anything.
        walk_stats: what the walk itself depended on: each folder entered
            (``"/"`` for the root, ``"src/pkg/"`` ...) -> ``(0, mtime_ns)``, and
            each ignore file in force -> ``(size, mtime_ns)``; ``mtime_ns`` is
            -1 when it was too recent to trust. While all are unchanged, a walk
            would meet the same files, so :func:`changed_files` only stats those.
    """

    root: Path
    files: list[SourceFile] = field(default_factory=list)
    files_seen: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    skipped_paths: list[tuple[str, str]] = field(default_factory=list)
    stats: dict[str, tuple[int, int]] = field(default_factory=dict)
    walk_stats: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def bytes(self) -> int:
        """Total size on disk of the indexed files."""
        return sum(f.size for f in self.files)

    def _skip(self, path: str, reason: str) -> None:
        self.skipped[reason] += 1
        self.skipped_paths.append((path, reason))


def decode_bytes(data: bytes) -> tuple[str, str] | None:
    """Decode a file's bytes, or return ``None`` if they look binary.

    Returns:
        ``(text, encoding)``: BOM-marked UTF-8/16/32 is decoded by its BOM; other
        data is binary when its first 512 bytes hold a NUL, else UTF-8 with
        invalid bytes replaced by U+FFFD.
    """
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return data.decode(encoding, errors="replace"), encoding
    if b"\0" in data[:SNIFF_BYTES]:
        return None
    return data.decode("utf-8", errors="replace"), "utf-8"


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


@lru_cache(maxsize=256)
def _spec(lines: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    """A compiled ignore file (the same lines, compiled once per process)."""
    return pathspec.GitIgnoreSpec.from_lines(lines)


class _IgnoreRules:
    """The ignore specs in force in one folder: its own plus its parents'."""

    def __init__(self, specs: tuple[tuple[str, pathspec.PathSpec], ...] = ()) -> None:
        self._specs = specs

    def descend(self, folder: Path, rel_folder: str, present: Container[str] | None = None) -> _IgnoreRules:
        """The rules in force in ``folder``: these plus its own ignore files (only those in ``present``, when given)."""
        lines: list[str] = []
        for name in IGNORE_FILES:
            if present is not None and name not in present:
                continue
            try:
                lines.extend((folder / name).read_text(encoding="utf-8", errors="replace").splitlines())
            except OSError:
                continue
        if not lines:
            return self
        prefix = f"{rel_folder}/" if rel_folder else ""
        return _IgnoreRules(self._specs + ((prefix, _spec(tuple(lines))),))

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


def scan(
    root: str | os.PathLike[str],
    *,
    use_ignore_files: bool = True,
    follow_symlinks: bool = False,
    max_file_bytes: int = MAX_FILE_BYTES,
    exclude_dirs: Iterable[str | os.PathLike[str]] = (),
) -> ScanResult:
    """Walk ``root`` in sorted order and read every file that should be indexed.

    Args:
        root: the folder to scan.
        use_ignore_files: honour ``.gitignore`` and ``.codesearchignore`` files.
        follow_symlinks: follow links to files and folders inside the root.
        max_file_bytes: larger files are skipped as ``too_large``.
        exclude_dirs: folders never entered (skipped as ``skipped_dir``), such
            as an index kept inside the repository it indexes.

    Returns:
        The files to index and what was skipped, per reason.

    Raises:
        RootNotFoundError: if ``root`` does not exist or is not a folder.
    """
    root_path = Path(root)
    if not root_path.exists():
        raise RootNotFoundError(f"path does not exist: {root}")
    if not root_path.is_dir():
        raise RootNotFoundError(f"not a directory: {root}")
    real_root = root_path.resolve()
    result = ScanResult(root=real_root)
    rules = _IgnoreRules().descend(real_root, "") if use_ignore_files else _IgnoreRules()
    excluded = frozenset(Path(d).resolve() for d in exclude_dirs)
    _walk(real_root, "", rules, result, use_ignore_files, follow_symlinks, max_file_bytes, {real_root}, excluded)
    result.files.sort(key=lambda f: f.path)
    return result


def _walk(
    folder: Path,
    rel_folder: str,
    rules: _IgnoreRules,
    result: ScanResult,
    use_ignore_files: bool,
    follow_symlinks: bool,
    max_file_bytes: int,
    active: set[Path],
    excluded: frozenset[Path],
) -> None:
    try:
        # Stat'ed before it is listed: an entry added after the listing moves its mtime past this one.
        result.walk_stats[f"{rel_folder}/"] = _trusted(0, os.stat(folder).st_mtime_ns)
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        result._skip(rel_folder or ".", SkipReason.UNREADABLE)
        return
    for entry in entries:
        rel = f"{rel_folder}/{entry.name}" if rel_folder else entry.name
        if use_ignore_files and entry.name in IGNORE_FILES:
            try:
                ignore_file = entry.stat()
                result.walk_stats[rel] = _trusted(ignore_file.st_size, ignore_file.st_mtime_ns)
            except OSError:
                result.walk_stats[rel] = (0, -1)
        try:
            is_link = entry.is_symlink()
            is_dir = entry.is_dir(follow_symlinks=True)
        except OSError:
            result._skip(rel, SkipReason.UNREADABLE)
            continue
        real: Path | None = None
        if is_link:
            if not follow_symlinks:
                if not is_dir:
                    result.files_seen += 1
                result._skip(rel, SkipReason.SYMLINK)
                continue
            real = Path(os.path.realpath(entry.path))
            if not real.is_relative_to(result.root):
                if not is_dir:
                    result.files_seen += 1
                result._skip(rel, SkipReason.OUTSIDE_ROOT)
                continue

        if is_dir:
            if entry.name in SKIP_DIRS or (excluded and Path(entry.path).resolve() in excluded):
                result._skip(rel, SkipReason.SKIPPED_DIR)
                continue
            if rules.ignored(rel, is_dir=True):
                result._skip(rel, SkipReason.IGNORED)
                continue
            real = real or Path(entry.path).resolve()
            if real in active:
                result._skip(rel, SkipReason.SYMLINK_LOOP)
                continue
            sub = Path(entry.path)
            sub_rules = rules.descend(sub, rel) if use_ignore_files else rules
            active.add(real)
            _walk(sub, rel, sub_rules, result, use_ignore_files, follow_symlinks, max_file_bytes, active, excluded)
            active.discard(real)
            continue

        result.files_seen += 1
        reason, info = _file_reason(entry, rel, rules, max_file_bytes)
        if reason is not None or info is None:
            result._skip(rel, reason or SkipReason.UNREADABLE)
            continue
        result.stats[rel] = (info.st_size, info.st_mtime_ns)
        try:
            with open(entry.path, "rb") as handle:
                data = handle.read(max_file_bytes + 1)
        except OSError:
            result._skip(rel, SkipReason.UNREADABLE)
            continue
        if len(data) > max_file_bytes:  # grew since it was stat'ed
            result._skip(rel, SkipReason.TOO_LARGE)
            continue
        decoded = decode_bytes(data)
        if decoded is None:
            result._skip(rel, SkipReason.BINARY)
            continue
        text, encoding = decoded
        result.files.append(SourceFile(rel, len(data), text, hashlib.sha256(data).hexdigest(), encoding,
                                       info.st_mtime_ns))


def _trusted(size: int, mtime_ns: int) -> tuple[int, int]:
    """``(size, mtime_ns)``, with -1 for an mtime too recent to show a later change."""
    return (size, -1 if time.time_ns() - mtime_ns < RACY_NS else mtime_ns)


def _stat_differences(root: str, recorded: Mapping[str, Sequence[int]]) -> Iterator[tuple[str, bool]]:
    """``(path, gone)`` for each recorded path whose stat no longer matches (a folder's size is not compared;
    an mtime recorded as -1 never matches)."""
    stat_path = os.stat
    for rel, (size, mtime_ns) in recorded.items():
        try:
            info = stat_path(f"{root}/{rel}")
        except OSError:
            yield rel, True
            continue
        if info.st_mtime_ns != mtime_ns or (not rel.endswith("/") and info.st_size != size):
            yield rel, False


def _file_reason(
    entry: os.DirEntry[str], rel: str, rules: _IgnoreRules, max_file_bytes: int
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
        return SkipReason.UNREADABLE, None
    if info.st_size > max_file_bytes:
        return SkipReason.TOO_LARGE, info
    return None, info


@dataclass(frozen=True, slots=True)
class Changes:
    """What :func:`changed_files` found: paths added, modified and removed since the recorded stats."""

    added: tuple[str, ...] = ()
    modified: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.modified or self.removed)

    def __len__(self) -> int:
        return len(self.added) + len(self.modified) + len(self.removed)


def changed_files(
    root: str | os.PathLike[str],
    known: Mapping[str, Sequence[int]],
    *,
    use_ignore_files: bool = True,
    follow_symlinks: bool = False,
    max_file_bytes: int = MAX_FILE_BYTES,
    exclude_dirs: Iterable[str | os.PathLike[str]] = (),
    walk_stats: Mapping[str, Sequence[int]] | None = None,
) -> Changes:
    """Compare the files under ``root`` with ``known`` (``path -> (size, mtime_ns)``, as :attr:`ScanResult.stats`).

    With ``walk_stats`` (:attr:`ScanResult.walk_stats` of the same scan) and
    no folder or ignore file changed since, no folder is listed: only the
    known files are stat'ed (a file added, removed or renamed changes its
    folder's mtime). Otherwise the walk applies the folder rules of
    :func:`scan`; a file already known is only stat'ed, and only a new one is
    checked against the file rules. No file is read, so this is cheap enough
    to run before every search.

    Raises:
        RootNotFoundError: if ``root`` does not exist or is not a folder.
    """
    root_path = Path(root)
    if not root_path.is_dir():
        raise RootNotFoundError(f"{'not a directory' if root_path.exists() else 'path does not exist'}: {root}")
    real_root = root_path.resolve()
    # While no folder or ignore file the walk depended on changed, it would meet the same files.
    if walk_stats and next(_stat_differences(str(real_root), walk_stats), None) is None:
        return _known_changes(str(real_root), known)
    excluded = frozenset(str(Path(d).resolve()) for d in exclude_dirs)
    added: list[str] = []
    modified: list[str] = []
    seen: set[str] = set()
    # (folder, its path from the root, the rules of its parent); a folder's own ignore files are
    # read only when its listing holds them.
    stack: list[tuple[str, str, _IgnoreRules]] = [(str(real_root), "", _IgnoreRules())]
    active = {str(real_root)}
    get = known.get
    while stack:
        folder, rel_folder, parent_rules = stack.pop()
        prefix = f"{rel_folder}/" if rel_folder else ""
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        rules = parent_rules
        if use_ignore_files:
            rules = parent_rules.descend(Path(folder), rel_folder, present={e.name for e in entries})
        for entry in entries:
            rel = prefix + entry.name
            try:
                link = entry.is_symlink()
                if link and not follow_symlinks:
                    continue
                is_dir = entry.is_dir()
            except OSError:
                continue
            if is_dir:
                path = os.path.realpath(entry.path) if link else entry.path
                if entry.name in SKIP_DIRS or path in excluded or rules.ignored(rel, is_dir=True):
                    continue
                if link and (path in active or not Path(path).is_relative_to(real_root)):
                    continue
                active.add(path)
                stack.append((entry.path, rel, rules))
                continue
            recorded = get(rel)
            if recorded is not None:
                try:
                    info = entry.stat()
                except OSError:
                    continue
                seen.add(rel)
                if info.st_mtime_ns != recorded[1] or info.st_size != recorded[0]:
                    modified.append(rel)
                continue
            if link and not Path(os.path.realpath(entry.path)).is_relative_to(real_root):
                continue
            reason, _ = _file_reason(entry, rel, rules, max_file_bytes)
            if reason is None:
                added.append(rel)
    removed = [path for path in known if path not in seen] if len(seen) != len(known) else []
    return Changes(tuple(sorted(added)), tuple(sorted(modified)), tuple(sorted(removed)))


def _known_changes(root: str, known: Mapping[str, Sequence[int]]) -> Changes:
    """The known files modified or gone, by one stat each."""
    modified: list[str] = []
    removed: list[str] = []
    for rel, gone in _stat_differences(root, known):
        (removed if gone else modified).append(rel)
    return Changes((), tuple(sorted(modified)), tuple(sorted(removed)))


__all__ = ["Changes", "ScanResult", "SkipReason", "SourceFile", "changed_files", "decode_bytes", "scan"]
