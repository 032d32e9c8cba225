"""``CURRENT``: the file that names an index folder's live generation and its manifest's sha256, checked by its own.

Its four lines: ``codesearch-index <format version>``, ``gen-<n>``, the
generation manifest's sha256, and a sha256 of those three lines. A commit
replaces it atomically; a reader that finds it damaged is told how to fix it.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import NamedTuple

from codesearch.exceptions import IndexCorruptError, IndexFormatError
from codesearch.index.integrity import FIX
from codesearch.index.snapshot import FORMAT_VERSION

CURRENT = "CURRENT"
MAGIC = "codesearch-index"
GENERATION = re.compile(r"gen-([0-9]+)")
"""A generation folder's name."""
SHA256 = re.compile(r"[0-9a-f]{64}")


class Pointer(NamedTuple):
    """What ``CURRENT`` says: the live generation and its manifest's sha256."""

    number: int
    manifest_sha256: str

    @property
    def name(self) -> str:
        return f"gen-{self.number}"


def format_pointer(pointer: Pointer) -> bytes:
    """The bytes of ``CURRENT`` for ``pointer``."""
    body = f"{MAGIC} {FORMAT_VERSION}\n{pointer.name}\n{pointer.manifest_sha256}\n"
    return (body + hashlib.sha256(body.encode("ascii")).hexdigest() + "\n").encode("ascii")


def parse_pointer(data: bytes, directory: Path) -> Pointer:
    """What the bytes of ``directory``'s ``CURRENT`` say.

    Raises:
        IndexCorruptError: they are damaged, or not a codesearch index's.
        IndexFormatError: the index has another format version.
    """
    path = directory / CURRENT
    fix = FIX.format(dir=directory)
    try:
        lines = data.decode("ascii").split("\n")
    except UnicodeDecodeError:
        raise IndexCorruptError(f"index file {path} is damaged (not ASCII); {fix}") from None
    if len(lines) != 5 or lines[4] != "":
        raise IndexCorruptError(f"index file {path} is damaged (expected 4 lines); {fix}")
    body = "\n".join(lines[:3]) + "\n"
    if hashlib.sha256(body.encode("ascii")).hexdigest() != lines[3]:
        raise IndexCorruptError(f"index file {path} is damaged (its checksum does not match); {fix}")
    magic, _, version = lines[0].partition(" ")
    if magic != MAGIC:
        raise IndexCorruptError(f"{path} is not a codesearch index pointer; {fix}")
    if version != str(FORMAT_VERSION):
        raise IndexFormatError(
            f"the index at {directory} has format version {version}, but this codesearch "
            f"reads version {FORMAT_VERSION}; {fix}"
        )
    match = GENERATION.fullmatch(lines[1])
    if match is None or not SHA256.fullmatch(lines[2]):
        raise IndexCorruptError(f"index file {path} is damaged (bad generation line); {fix}")
    return Pointer(int(match.group(1)), lines[2])


__all__ = ["CURRENT", "GENERATION", "MAGIC", "Pointer", "format_pointer", "parse_pointer"]
