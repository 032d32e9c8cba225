"""A source's files at its pinned commit, from a folder of git mirrors or of local checkouts.

The folder holds one entry per repository, found as ``owner+name/repo``,
``owner+name`` or ``name`` (the layout ``fetch`` leaves under ``/work/.mirror``).
An entry that is a git directory (bare, or a checkout with ``.git``) is read
with ``git archive`` of the pinned commit, so what is mined is exactly what the
source names; one without git is read as it stands on disk (a user's own
checkout), through the same walker and ignore rules the index uses.

Reading a commit lists its tree and reads the blobs wanted, as
``benchmarks/peer_data.export_trees`` exports a pinned tree with ``git
archive``, but file by file: a snapshot mirror lacks its largest blobs, and a
tree with one missing cannot be archived whole.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

from codesearch.exceptions import TrainingDataError
from codesearch.files.read import SkippedFile, read_file
from codesearch.files.walk import walk
from codesearch.training.sources import Source

Wanted = Callable[[str, int], bool]
"""``(relative path, size in bytes) -> whether to read the file``."""


def find_tree(mirrors: str | os.PathLike[str], repo: str) -> Path:
    """The mirror or checkout of ``repo`` (``owner/name``) under ``mirrors``.

    Raises:
        TrainingDataError: no entry of the folder is that repository.
    """
    root = Path(mirrors)
    owner, name = repo.split("/", 1)
    for candidate in (root / f"{owner}+{name}" / "repo", root / f"{owner}+{name}", root / name):
        if candidate.is_dir():
            return candidate
    raise TrainingDataError(f"no mirror or checkout of {repo} under {root} (fetch it, or clone it there as {name}/)")


def _git_dir(tree: Path) -> Path | None:
    """The git directory of a bare mirror or a checkout, ``None`` for a plain folder."""
    if (tree / "HEAD").is_file() and (tree / "objects").is_dir():
        return tree
    if (tree / ".git").exists():
        return tree / ".git"
    return None


def _git(git_dir: Path, *args: str) -> list[str]:
    return ["git", "--git-dir", str(git_dir), *args]


def has_commit(tree: Path, commit: str) -> bool:
    """Whether the git directory of ``tree`` holds ``commit``."""
    git_dir = _git_dir(tree)
    if git_dir is None:
        return False
    done = subprocess.run(_git(git_dir, "cat-file", "-e", f"{commit}^{{commit}}"), capture_output=True, check=False)
    return done.returncode == 0


def head_commit(tree: Path) -> str:
    """The commit ``HEAD`` names in the git directory of ``tree``.

    Raises:
        TrainingDataError: ``tree`` is no git directory.
    """
    git_dir = _git_dir(tree)
    if git_dir is None:
        raise TrainingDataError(f"{tree} is not a git mirror or checkout")
    return subprocess.check_output(_git(git_dir, "rev-parse", "HEAD"), text=True).strip()


def iter_files(source: Source, mirrors: str | os.PathLike[str], wanted: Wanted) -> Iterator[tuple[str, bytes]]:
    """``(path, content)`` of each file of ``source`` at its commit that ``wanted`` accepts, in path order.

    The commit's tree is listed (``git ls-tree``) and only the blobs ``wanted``
    accepts are read (``git cat-file --batch``): a snapshot mirror lacks its
    largest blobs, which ``git archive`` would fail on; a file whose blob is
    missing (its size unknown) is passed over: such blobs are of 4 MiB and more, past what is parsed anyway.
    Submodules and symbolic links are not files here.

    Raises:
        TrainingDataError: no tree of the source is found, or its git directory
            lacks the pinned commit.
    """
    tree = find_tree(mirrors, source.repo)
    git_dir = _git_dir(tree)
    if git_dir is None or source.own:
        yield from _iter_folder(tree, wanted)
        return
    if not has_commit(tree, source.commit):
        raise TrainingDataError(f"{source.repo}: {tree} lacks the pinned commit {source.commit[:12]} (fetch it again)")
    listing = subprocess.run(_git(git_dir, "ls-tree", "-r", "-l", "-z", "--full-tree", source.commit),
                             capture_output=True, check=False)
    if listing.returncode != 0:
        said = listing.stderr.decode("utf-8", "replace").strip().splitlines()
        raise TrainingDataError(f"{source.repo}: cannot list {source.commit[:12]}: {said[-1] if said else 'git failed'}")
    blobs: list[tuple[str, bytes]] = []
    for entry in listing.stdout.split(b"\0"):
        if not entry:
            continue
        meta, _, raw_path = entry.partition(b"\t")
        mode, kind, blob, size = meta.split()
        path = raw_path.decode("utf-8", "replace")
        if kind != b"blob" or mode == b"120000" or not size.isdigit() or not wanted(path, int(size)):
            continue
        blobs.append((path, blob))
    with subprocess.Popen(_git(git_dir, "cat-file", "--batch"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        for path, blob in blobs:
            proc.stdin.write(blob + b"\n")
            proc.stdin.flush()
            header = proc.stdout.readline().split()
            if len(header) != 3:  # `<sha> missing`: a blob the snapshot left out
                continue
            data = proc.stdout.read(int(header[2]))
            proc.stdout.read(1)
            yield path, data
        proc.stdin.close()


FOLDER_FILE_CAP = 4 * 1024 * 1024
"""The largest file read from a checkout: past what the grammars parse anyway."""


def _iter_folder(root: Path, wanted: Wanted) -> Iterator[tuple[str, bytes]]:
    """The walker's files of a checkout, read so that a file swapped for a link or a FIFO is passed over."""
    for found in walk(root.resolve()):
        try:
            size = found.entry.stat(follow_symlinks=False).st_size
            if wanted(found.rel, size):
                yield found.rel, read_file(found.entry.path, FOLDER_FILE_CAP)
        except (OSError, SkippedFile):
            continue


def export_tree(source: Source, mirrors: str | os.PathLike[str], dest: str | os.PathLike[str]) -> Path:
    """Write the source's whole tree at its commit into ``dest/owner+name`` and return that folder.

    An export already there is replaced.

    Raises:
        TrainingDataError: as :func:`iter_files`; the partial tree is removed.
    """
    target = Path(dest) / source.repo.replace("/", "+")
    shutil.rmtree(target, ignore_errors=True)
    try:
        for path, data in iter_files(source, mirrors, lambda _path, _size: True):
            out = (target / path).resolve()
            if not out.is_relative_to(target.resolve()):
                continue  # a path that would leave the tree
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    target.mkdir(parents=True, exist_ok=True)
    return target


__all__ = ["Wanted", "export_tree", "find_tree", "has_commit", "head_commit", "iter_files"]
