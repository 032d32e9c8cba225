"""The files of a repository: the one folder walker, the reads that cannot be swapped, the scan that reads them, the
stat pass that compares them."""

from __future__ import annotations

from codesearch.files.changes import Changes, changed_files
from codesearch.files.read import SkippedFile, SkipReason, read_file
from codesearch.files.scan import Listed, Listing, ScanResult, SourceFile, decode_bytes, list_files, scan
from codesearch.files.walk import MAX_FILE_BYTES

__all__ = ["MAX_FILE_BYTES", "Changes", "Listed", "Listing", "ScanResult", "SkipReason", "SkippedFile", "SourceFile",
           "changed_files", "decode_bytes", "list_files", "read_file", "scan"]
