"""Build the Cython extensions: the line chunker, and (on POSIX) the stat pass's table.

Each extension is optional at run time (``codesearch.chunking.chunks`` and
``codesearch.files.changes`` fall back to their pure-Python twins), so a
compile failure only warns -- except in CI or when
``CODESEARCH_REQUIRE_EXTENSION=1``, where it fails the build, so a broken
extension can never hide behind the fallback.
"""

from __future__ import annotations

import os
import warnings

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext


def _extension_required() -> bool:
    return bool(os.environ.get("CI")) or os.environ.get("CODESEARCH_REQUIRE_EXTENSION") == "1"


class OptionalBuildExt(build_ext):
    """build_ext that warns instead of failing when the compiler is missing."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # any compiler or toolchain failure
            if _extension_required():
                raise
            warnings.warn(f"codesearch: Cython extensions not built ({exc}); the pure-Python twins will be used", stacklevel=2)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            if _extension_required():
                raise
            warnings.warn(f"codesearch: building {ext.name} failed ({exc}); the pure-Python twin will be used", stacklevel=2)


def _optimise() -> list[str]:
    """-O3 lets GCC and Clang vectorise the chunker's newline count; MSVC takes its own flags."""
    return [] if os.name == "nt" else ["-O3"]


def _extensions() -> list[Extension]:
    try:
        from Cython.Build import cythonize
    except ImportError:
        if _extension_required():
            raise
        warnings.warn("codesearch: Cython is not installed; the pure-Python twins will be used", stacklevel=2)
        return []
    extensions = [Extension("codesearch.chunking._chunker", ["codesearch/chunking/_chunker.pyx"], extra_compile_args=_optimise())]
    if os.name == "posix":  # stat(2) itself; elsewhere os.stat is the only way, so the pure twin is the fast one too
        extensions.append(Extension("codesearch.files._statpass", ["codesearch/files/_statpass.pyx"],
                                    extra_compile_args=_optimise()))
    return cythonize(
        extensions,
        compiler_directives={"language_level": "3", "boundscheck": False, "wraparound": False},
    )


# The repository's models/ folder installs as the package codesearch_models: the static tier (and any model)
# codesearch ships, read by codesearch.embedding.catalogue.static_folder. It is mapped here because pyproject's
# package finder only finds folders named as their packages.
setup(
    packages=[*find_packages(include=["codesearch", "codesearch.*"]), "codesearch_models"],
    package_dir={"codesearch_models": "models"},
    ext_modules=_extensions(),
    cmdclass={"build_ext": OptionalBuildExt},
)
