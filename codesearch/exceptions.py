"""Every error codesearch raises on purpose.

All of them derive from :class:`CodeSearchError`, so a caller can catch the
library's errors in one place; several also inherit the built-in exception they
resemble (as scikit-learn's ``NotFittedError`` does), so existing ``except``
clauses keep working. The CLI turns any of them into one line on stderr and
exit code 2.
"""

from __future__ import annotations


class CodeSearchError(Exception):
    """Base class for every error raised by codesearch."""


class RootNotFoundError(CodeSearchError, FileNotFoundError):
    """The folder to scan or index does not exist or is not a directory."""


class EmptyRepositoryError(CodeSearchError, ValueError):
    """The folder holds no file that can be indexed."""


class NotFittedError(CodeSearchError, ValueError, AttributeError):
    """An estimator was used before ``fit`` was called."""


class ModelNotAvailableError(CodeSearchError):
    """An embedding model cannot be loaded here (offline, missing files, bad name)."""


class ExportError(CodeSearchError):
    """Exporting a model to ONNX failed or needs a missing optional dependency."""


class ModelMismatchError(CodeSearchError):
    """A query would be embedded by a different model than the one that built the index."""


class IndexNotFoundError(CodeSearchError, FileNotFoundError):
    """No index exists yet at the given location."""


class IndexCorruptError(CodeSearchError):
    """An index file is damaged, truncated or from an unknown format version."""


class IndexFormatError(IndexCorruptError):
    """An index was written by another version of codesearch's on-disk format; it is built again."""


class IndexWriteError(CodeSearchError, OSError):
    """An index could not be written (the disk is full); the index that was there is unchanged."""


class IndexLockedError(CodeSearchError, TimeoutError):
    """Another process holds the index's write lock."""


class IndexReadOnlyError(CodeSearchError, PermissionError):
    """The index is read-only here (a read-only folder, or ``read_only=True``): it answers but is never written."""


class IndexCancelledError(CodeSearchError):
    """An index run was asked to stop (:meth:`CodeSearch.cancel_indexing`) and committed nothing."""


class InvalidScopeError(CodeSearchError, ValueError):
    """A search's scope cannot be used: a glob that does not compile, or a path outside the repository."""


class RepositoryNotServedError(CodeSearchError, PermissionError):
    """A server was asked for a folder outside the roots it was started with (``codesearch mcp PATH ...``)."""


class CorpusNotFoundError(CodeSearchError, FileNotFoundError):
    """A store URI holds no codesearch corpus (nothing there, or something else)."""


class CorpusCorruptError(CodeSearchError):
    """A file of a corpus differs from the sha256 its last build or refresh recorded (or is missing); the message
    names it."""


class CorpusStoreError(CodeSearchError, OSError):
    """A corpus's object store did not answer, or lacks what safe commits need (conditional writes); nothing past
    the corpus's last version was made current."""


class RepositoryNotInCorpusError(CodeSearchError, ValueError):
    """A repository named in a corpus call is not in that corpus."""


class ClusterUnavailableError(CodeSearchError, ConnectionError):
    """The Ray cluster at the address given cannot be reached (or Ray is not installed)."""


class TrainingDataError(CodeSearchError, ValueError):
    """A training sources list is invalid, overlaps the benchmark, or names a repository with no tree here."""


class ConfigFileError(CodeSearchError, ValueError):
    """An agent's configuration file cannot be read or parsed (``codesearch install``); it was left as it was."""


__all__ = [
    "CodeSearchError",
    "RootNotFoundError",
    "EmptyRepositoryError",
    "NotFittedError",
    "ModelNotAvailableError",
    "ExportError",
    "ModelMismatchError",
    "IndexNotFoundError",
    "IndexCorruptError",
    "IndexFormatError",
    "IndexWriteError",
    "IndexLockedError",
    "IndexReadOnlyError",
    "IndexCancelledError",
    "InvalidScopeError",
    "RepositoryNotServedError",
    "CorpusNotFoundError",
    "CorpusCorruptError",
    "CorpusStoreError",
    "RepositoryNotInCorpusError",
    "ClusterUnavailableError",
    "TrainingDataError",
    "ConfigFileError",
]
