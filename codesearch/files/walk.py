"""The one folder walker: which folders are entered and which files are met, under the ignore rules.

:func:`walk` serves both the scan that reads files (:mod:`codesearch.files.scan`)
and the stat pass that only compares them (:mod:`codesearch.files.changes`),
so the two always agree on which files belong to a repository. The rules run
in a fixed order:

1. folder and name rules: vendored, generated and VCS folders (``SKIP_DIRS``,
   pruned without descending), folders named in ``exclude_dirs`` (an index kept
   inside its repository), lockfiles by full name, and paths matched by
   ``.gitignore`` / ``.codesearchignore`` files (nested ones too, read as git
   reads them: :mod:`codesearch.files.ignore`);
2. extensions: text formats that are noise for code search (``.svg``, source
   maps, minified bundles) are ``excluded_extension``; formats known to be
   binary (images, archives, fonts, compiled objects) are ``binary`` without
   being read;
3. size: files over ``max_file_bytes`` (1 MiB).

The walk is sorted by name. Symlinks are not followed unless asked, and a
followed link never leads outside the root or round a loop.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from codesearch.files.ignore import IGNORE_FILES, IgnoreRules
from codesearch.files.read import SkipReason

MAX_FILE_BYTES = 1 << 20
SNIFF_BYTES = 512
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


__all__ = ["BINARY_EXTENSIONS", "EXCLUDED_EXTENSIONS", "IGNORE_FILES", "LOCKFILES", "MAX_FILE_BYTES", "SKIP_DIRS",
           "SNIFF_BYTES", "Found", "IgnoreRules", "SkipReason", "file_reason", "walk"]
