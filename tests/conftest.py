"""Shared fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REQUESTS_CORPUS_ENV = "CODESEARCH_REQUESTS_CORPUS"


@pytest.fixture(scope="session")
def requests_corpus() -> Path:
    """A checkout of psf/requests v2.32.3, from ``$CODESEARCH_REQUESTS_CORPUS``."""
    path = os.environ.get(REQUESTS_CORPUS_ENV)
    if not path or not Path(path).is_dir():
        pytest.skip(f"set {REQUESTS_CORPUS_ENV} to a psf/requests v2.32.3 checkout")
    return Path(path)
