"""Kept for imports written before :mod:`codesearch.embedding`; new code imports from there."""

from __future__ import annotations

from codesearch.cache import cache_root
from codesearch.embedding.distill import STATIC_FORMAT, StaticExport, export_static, find_static, static_key
from codesearch.embedding.export import EXPORT_FORMAT, ExportResult, export_key, export_model, find_export
from codesearch.embedding.gate import CALIBRATION_CHUNKS, GATE_MEAN_COS, GATE_MIN_COS, calibration_texts, int8_gate

__all__ = [
    "CALIBRATION_CHUNKS",
    "EXPORT_FORMAT",
    "GATE_MEAN_COS",
    "GATE_MIN_COS",
    "ExportResult",
    "STATIC_FORMAT",
    "StaticExport",
    "cache_root",
    "calibration_texts",
    "export_key",
    "export_model",
    "export_static",
    "find_export",
    "find_static",
    "int8_gate",
    "static_key",
]
