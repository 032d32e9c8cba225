"""JSON files the library reads leniently (model folders, caches) and JSON values it names by hash."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def read_json(path: Path) -> Any:
    """The parsed content of a JSON file, or ``None`` when it is missing or not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def sha256_json(value: Any) -> str:
    """Hex sha256 of ``value`` as canonical JSON (sorted keys): a stable name for a set of options."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode("utf-8")).hexdigest()


__all__ = ["read_json", "sha256_json"]
