"""What kind of file a path names: ``source``, ``test``, ``doc`` or ``config``, from the path alone.

Every indexed file gets its kind here (:func:`kind_of`), in the single index
and the corpus alike; a :class:`~codesearch.scope.Scope` filters by it, the
ranking's priors weigh by it, and the transformer leaves the kinds of
:data:`UNREAD_BY_DEFAULT` to keywords and the static tier.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Literal

Kind = Literal["source", "test", "doc", "config"]
SOURCE: Kind = "source"
TEST: Kind = "test"
DOC: Kind = "doc"
CONFIG: Kind = "config"
KINDS: tuple[Kind, ...] = (SOURCE, TEST, DOC, CONFIG)

# Folders whose whole content is tests (any depth).
TEST_DIRS = frozenset({"tests", "test", "__tests__", "spec", "specs"})
# File names of tests, matched case-sensitively (so "Latest.java" is not a test).
_JS = "{js,jsx,ts,tsx,mjs,cjs,mts,cts}"
TEST_FILE_PATTERNS = (
    "test_*.py", "*_test.py", "*_tests.py", "tests.py", "conftest.py",
    "*_test.go", f"*.test.{_JS}", f"*.spec.{_JS}", "*_spec.rb", "*_test.rb",
    "*Test.java", "*Tests.java", "*Test.kt", "*Tests.kt", "*Test.cs", "*Tests.cs",
    "*Test.php", "*Tests.php", "*Test.swift", "*Tests.swift", "*Spec.swift", "*Spec.kt",
    "*Spec.scala", "*Suite.scala", "*Test.scala", "*_test.dart", "*_test.exs",
    "*_test.c", "*_test.cc", "*_test.cpp", "test_*.c", "test_*.cpp", "*_test.rs",
    "*_spec.lua", "*_test.lua", "test_*.lua", "*.bats",
)  # fmt: skip
# Folders whose whole content is documentation (any depth).
DOC_DIRS = frozenset({"docs", "doc", "documentation"})
DOC_EXTENSIONS = frozenset({".md", ".markdown", ".mdx", ".rst", ".txt", ".adoc", ".asciidoc"})
# Upper-case name prefixes of project documents ("LICENSE", "LICENSE-MIT", "HISTORY.md").
DOC_NAME_PATTERNS = (
    "README*", "HISTORY*", "CHANGELOG*", "CHANGES*", "NEWS*", "AUTHORS*", "CONTRIBUTORS*",
    "CONTRIBUTING*", "LICENSE*", "LICENCE*", "COPYING*", "NOTICE*", "CODE_OF_CONDUCT*",
)  # fmt: skip
# Extension-less document names in any case ("license", "Readme").
DOC_NAMES = frozenset(
    {"readme", "history", "changelog", "changes", "authors", "contributors", "license", "licence",
     "copying", "notice"}
)  # fmt: skip
# Python packaging metadata, exactly so named: headers, then the README as the long description.
PACKAGE_METADATA_NAMES = frozenset({"PKG-INFO", "METADATA"})
# Build and tool configuration, by name; checked before the doc rules, so
# "docs/Makefile" and "requirements-dev.txt" are config.
CONFIG_NAME_PATTERNS = (
    "Makefile", "GNUmakefile", "makefile", "*.mk", "Dockerfile", "Dockerfile.*", "*.dockerfile",
    "Containerfile", "Jenkinsfile", "Procfile", "MANIFEST.in", "CODEOWNERS", "go.mod", "Pipfile",
    "requirements*.txt", "requirements*.in", "constraints*.txt",
)  # fmt: skip
CONFIG_EXTENSIONS = frozenset(
    {".toml", ".yml", ".yaml", ".ini", ".cfg", ".conf", ".json", ".jsonc", ".json5", ".properties",
     ".env"}
)  # fmt: skip


def _name_regex(patterns: Iterable[str]) -> re.Pattern[str]:
    expanded: list[str] = []
    for pattern in patterns:
        head, brace, rest = pattern.partition("{")
        if brace:
            options, _, tail = rest.partition("}")
            expanded.extend(head + option + tail for option in options.split(","))
        else:
            expanded.append(pattern)
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in expanded))


_TEST_NAME = _name_regex(TEST_FILE_PATTERNS)
_DOC_NAME = _name_regex(DOC_NAME_PATTERNS)
_CONFIG_NAME = _name_regex(CONFIG_NAME_PATTERNS)


@lru_cache(maxsize=1 << 16)
def kind_of(path: str) -> Kind:
    """Label a file by its path, relative to the repository root with ``/`` separators.

    The first rule that matches wins:

    1. ``test``: under a ``tests/``, ``test/`` or ``__tests__/`` folder, or a
       test file name (``test_*.py``, ``*_test.go``, ``*.spec.ts``,
       ``conftest.py``, ... see :data:`TEST_FILE_PATTERNS`);
    2. ``config``: under a dot folder (``.github/``), a dotfile
       (``.gitignore``, ``.coveragerc``) or a build/tool file by name
       (``Makefile``, ``Dockerfile``, ``MANIFEST.in``, ``requirements*.txt``);
    3. ``doc``: under ``docs/`` or ``doc/``, a prose extension (``.md``,
       ``.rst``, ``.txt``, ...) or a project document (``README*``,
       ``HISTORY*``, ``CHANGELOG*``, ``AUTHORS*``, ``LICENSE*``, ``NOTICE``, and
       Python packaging metadata, ``PKG-INFO`` / ``METADATA`` as so spelled,
       whose body is the README);
    4. ``config``: a configuration extension (``.toml``, ``.yml``,
       ``.yaml``, ``.ini``, ``.cfg``, ``.json``, ...);
    5. ``source``: everything else.

    Returns:
        One of :data:`KINDS`.
    """
    parts = path.removeprefix("./").split("/")
    dirs, name = parts[:-1], parts[-1]
    if any(d in TEST_DIRS for d in dirs) or _TEST_NAME.fullmatch(name):
        return TEST
    if any(d.startswith(".") and d not in (".", "..") for d in dirs) or name.startswith("."):
        return CONFIG
    if _CONFIG_NAME.fullmatch(name):
        return CONFIG
    dot = name.rfind(".")
    ext = name[dot:].lower() if dot > 0 else ""
    if (
        any(d in DOC_DIRS for d in dirs)
        or ext in DOC_EXTENSIONS
        or _DOC_NAME.fullmatch(name)
        or (not ext and name.lower() in DOC_NAMES)
        or name in PACKAGE_METADATA_NAMES
    ):
        return DOC
    if ext in CONFIG_EXTENSIONS:
        return CONFIG
    return SOURCE


UNREAD_BY_DEFAULT: frozenset[str] = frozenset({TEST})
"""Chunk kinds the transformer leaves to keywords and the static tier: always in a corpus, unless ``embed_tests`` in a
single index."""


__all__ = ["CONFIG", "CONFIG_EXTENSIONS", "CONFIG_NAME_PATTERNS", "DOC", "DOC_DIRS", "DOC_EXTENSIONS", "DOC_NAMES",
           "DOC_NAME_PATTERNS", "KINDS", "Kind", "PACKAGE_METADATA_NAMES", "SOURCE", "TEST", "TEST_DIRS",
           "TEST_FILE_PATTERNS", "UNREAD_BY_DEFAULT", "kind_of"]
