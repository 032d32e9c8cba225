"""What a corpus stores: the Arrow schemas of its Lance tables, chunk ids, repository names and its manifest.

A corpus is a folder (or an ``s3://`` / ``gs://`` prefix) holding three Lance
datasets and two JSON files:

- ``chunks.lance``: one row per chunk of every repository: where it is
  (``repo``, ``path``, lines, its place in its file), its kind and symbols,
  its text, the keyword tokens that BM25 and the full-text index read, the
  key of the text the models read, and both tiers' vectors;
- ``files.lance``: one row per text file of every repository, with its
  sha256, size and mtime: the manifest a refresh compares the disk with
  (by stats first, by hash where the stats differ or are unknown);
- ``keywords.lance``: one row per repository: its BM25 fitted on its chunks
  (:data:`KEYWORD_SCHEMA`), so that a search scoped to it does not fit it
  again (a corpus written before this table fits it on first need);
- ``corpus.json`` (:class:`CorpusManifest`): the models and their
  fingerprints, every repository's facts, and the version of each dataset
  that is the corpus now. Readers open the datasets at those versions, and a
  writer replaces the file only after every dataset is committed, so a run
  killed half-way leaves the previous corpus whole (old or new, never a mix).
  It carries its own sha256, and names the sidecar below by its sha256;
- ``checksums-<sha256>.json``: the size and sha256 of every file those
  versions read (:mod:`codesearch.corpus.integrity`), checked before a
  command answers from them.

A chunk's id is content-addressed (its repository, path, lines and the
sha256 of its model input), so an unchanged chunk keeps its id and its row;
the id is the table's primary key.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa

FORMAT = "codesearch-corpus"
FORMAT_VERSION = 1
MANIFEST_FILE = "corpus.json"
CHUNKS = "chunks.lance"
FILES = "files.lance"
KEYWORDS = "keywords.lance"
DATASETS = (CHUNKS, FILES, KEYWORDS)

PRIMARY_KEY = {b"lance-schema:unenforced-primary-key": b"true"}
"""Lance detects concurrent inserts of the same key only for a column marked so (lance#4585, PR #5633)."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,199}")


def chunk_id(repo: str, path: str, start: int, end: int, key: str) -> int:
    """A chunk's id: the first 8 bytes of blake2b over its repository, path, lines and model-input key, signed."""
    digest = hashlib.blake2b(f"{repo}\0{path}\0{start}\0{end}\0{key}".encode("utf-8", "surrogatepass"),
                             digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def check_repo_name(name: str) -> str:
    """``name`` when it can name a repository (letters, digits, ``._+-``; not starting with a dot or dash).

    Raises:
        ValueError: it cannot; the message says how to name it.
    """
    if not _NAME.fullmatch(name):
        raise ValueError(f"{name!r} cannot name a repository (letters, digits and ._+- only); "
                         "give it a name as NAME=PATH")
    return name


def sql_string(value: str) -> str:
    """A string literal for a Lance filter."""
    return "'" + value.replace("'", "''") + "'"


def wide_strings(table: pa.Table, names: Sequence[str]) -> pa.Table:
    """``table`` with its string columns among ``names`` as ``large_string`` (64-bit offsets): a repository's texts
    or terms past 2 GiB overflow Arrow's 32-bit offsets once a column's chunks are combined or taken from."""
    for name in names:
        if name in table.column_names and pa.types.is_string(table.schema.field(name).type):
            table = table.set_column(table.schema.get_field_index(name), name, table[name].cast(pa.large_string()))
    return table


def sql_in(column: str, values: Sequence[str] | Sequence[int]) -> str:
    """``column IN (...)`` for a Lance filter (``false`` when there are no values)."""
    if not values:
        return "false"
    items = ", ".join(sql_string(v) if isinstance(v, str) else str(int(v)) for v in values)
    return f"{column} IN ({items})"


def chunk_schema(static_dim: int, full_dim: int) -> pa.Schema:
    """The chunks table: one row per chunk (vectors L2-normalised; ``vector`` null where the transformer did not read).

    Columns:
        chunk_id: the primary key (:func:`chunk_id`).
        repo, path, start_line, end_line: where the chunk is.
        ordinal: its place among its file's chunks (chunks are ranked in ``(path, ordinal)`` order, as a single index).
        kind: ``source``, ``test``, ``doc`` or ``config``.
        symbols: the definitions it holds; ``def_names``: the names they answer to, lowercased (a label-list index).
        text: the chunk's text.
        keyword_text: its BM25 terms (identifiers split) joined by spaces, each as often as it occurs.
        content_key: sha256 (hex) of the text the models read (:func:`~codesearch.chunking.document_text`).
        vector_key: the key whose transformer vector it has: its own, or its definition's first window's.
        read: whether the transformer read it (test files are left to keywords and the static tier).
        model_fp: the corpus's model fingerprint when the row was written.
        static_vector, vector: the static tier's and the transformer's vectors.
    """
    return pa.schema([
        pa.field("chunk_id", pa.int64(), nullable=False, metadata=PRIMARY_KEY),
        pa.field("repo", pa.string(), nullable=False),
        pa.field("path", pa.string(), nullable=False),
        pa.field("start_line", pa.int32(), nullable=False),
        pa.field("end_line", pa.int32(), nullable=False),
        pa.field("ordinal", pa.int32(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("symbols", pa.list_(pa.string())),
        pa.field("def_names", pa.list_(pa.string())),
        pa.field("text", pa.string()),
        pa.field("keyword_text", pa.string()),
        pa.field("content_key", pa.string(), nullable=False),
        pa.field("vector_key", pa.string(), nullable=False),
        pa.field("read", pa.bool_(), nullable=False),
        pa.field("model_fp", pa.string()),
        pa.field("static_vector", pa.list_(pa.float32(), static_dim)),
        pa.field("vector", pa.list_(pa.float32(), full_dim)),
    ])


FILE_SCHEMA = pa.schema([
    pa.field("repo", pa.string(), nullable=False),
    pa.field("path", pa.string(), nullable=False),
    pa.field("sha256", pa.string(), nullable=False),
    pa.field("size", pa.int64()),
    pa.field("chunks", pa.int32()),
    pa.field("mtime_ns", pa.int64()),
])
"""The files table: every file of every repository that was read, with its sha256, size, mtime and how many chunks it
gave (``chunks`` null: binary by its content, recorded so that a refresh knows it unchanged without reading it).

``mtime_ns`` is null when unknown: too recent to trust when it was recorded
(:func:`codesearch.files.changes.trusted_mtime`), or the row was written
by a codesearch before the column (the writer adds it to such a table,
:meth:`codesearch.corpus.store.CorpusStore.writer`); such a file is hashed."""

KEYWORD_SCHEMA = pa.schema([
    pa.field("repo", pa.string(), nullable=False),
    pa.field("bm25", pa.large_binary(), nullable=False, metadata={"lance-encoding:blob": "true"}),
])
"""The keywords table: per repository, the BM25 fitted on its chunks in the order a single index holds them (the
arrays of :meth:`~codesearch.keyword.BM25.to_arrays` and ``chunk_ids``, the chunks' ids in that order, packed by
:func:`codesearch.corpus.keywords.keyword_row`).
Stored as a Lance blob, read whole by its row's address: 1-1.6 ms for 0.6-2.6 MB, against 2-7 ms as a plain
binary column (measured on the 18 DEV repositories)."""


@dataclass
class TierFacts:
    """One embedding tier of a corpus: the model's name, fingerprint and vector size."""

    name: str
    fingerprint: str
    dim: int


@dataclass
class RepoFacts:
    """What a corpus records of one repository."""

    root: str
    files: int = 0
    chunks: int = 0
    tier: str = "static"
    updated: str = ""


@dataclass
class CorpusManifest:
    """``corpus.json``: the corpus's models, repositories and the dataset versions that make it up now.

    Attributes:
        model: the transformer's name (the static model is distilled from it).
        static: the static tier's model facts.
        full: the transformer tier's, once any repository has it.
        chunker: how files are cut (a corpus cut otherwise re-cuts on refresh).
        versions: dataset file name -> the version readers open.
        repos: repository name -> its facts.
        checksums: the sha256 of the sidecar that records the sha256 of every file those versions read
            (:mod:`codesearch.corpus.integrity`); ``None`` in a corpus written before codesearch recorded them.
    """

    model: str
    static: TierFacts
    full: TierFacts | None
    chunker: dict[str, Any]
    versions: dict[str, int] = field(default_factory=dict)
    repos: dict[str, RepoFacts] = field(default_factory=dict)
    updated: str = ""
    checksums: str | None = None

    def to_json(self) -> str:
        """The manifest as JSON, with the sha256 of the rest of it (``sha256``)."""
        data: dict[str, Any] = {"format": FORMAT, "format_version": FORMAT_VERSION, **asdict(self)}
        data["sha256"] = _self_sha256(data)
        return json.dumps(data, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> CorpusManifest:
        """Raises ValueError when ``text`` is not a corpus manifest this codesearch reads, and
        :class:`ManifestDamaged` when its content differs from its own sha256."""
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError("not a codesearch corpus manifest")
        # A manifest written before codesearch recorded sums has no sha256 (nor checksums): read as it is.
        if "sha256" in data and data["sha256"] != _self_sha256(data):
            raise ManifestDamaged("its content differs from its own sha256")
        if data.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"corpus format {data.get('format_version')}, this codesearch reads {FORMAT_VERSION}")
        full = data.get("full")
        return cls(model=data["model"], static=TierFacts(**data["static"]),
                   full=TierFacts(**full) if full else None, chunker=data["chunker"],
                   versions={k: int(v) for k, v in data["versions"].items()},
                   repos={name: RepoFacts(**facts) for name, facts in data["repos"].items()},
                   updated=data.get("updated", ""), checksums=data.get("checksums"))


class ManifestDamaged(ValueError):
    """``corpus.json`` differs from the sha256 it records of itself."""


def _self_sha256(data: dict[str, Any]) -> str:
    """The sha256 of a manifest's JSON without its ``sha256`` (one canonical form: sorted keys, no spaces)."""
    body = json.dumps({k: v for k, v in data.items() if k != "sha256"}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


__all__ = ["CHUNKS", "DATASETS", "FILES", "FILE_SCHEMA", "FORMAT", "FORMAT_VERSION", "KEYWORDS", "KEYWORD_SCHEMA",
           "MANIFEST_FILE", "PRIMARY_KEY", "CorpusManifest", "ManifestDamaged", "RepoFacts", "TierFacts",
           "check_repo_name", "chunk_id", "chunk_schema", "sql_in", "sql_string", "wide_strings"]
