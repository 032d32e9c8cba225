"""File kinds from paths, and Scope globs, prefixes, kinds and masks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesearch.files import scan
from codesearch.files.kinds import CONFIG, DOC, KINDS, SOURCE, TEST, kind_of
from codesearch.scope import Scope

# Part of the psf/requests v2.32.3 tree, as scan() reports it.
REQUESTS_PATHS = [
    ".coveragerc", ".github/CONTRIBUTING.md", ".github/workflows/run-tests.yml", ".gitignore",
    "AUTHORS.rst", "HISTORY.md", "LICENSE", "MANIFEST.in", "Makefile", "NOTICE", "README.md",
    "docs/Makefile", "docs/api.rst", "docs/conf.py", "docs/user/quickstart.rst", "ext/LICENSE",
    "pyproject.toml", "requirements-dev.txt", "setup.cfg", "setup.py",
    "src/requests/__init__.py", "src/requests/adapters.py", "src/requests/sessions.py",
    "src/requests/utils.py", "tests/__init__.py", "tests/certs/README.md", "tests/conftest.py",
    "tests/test_requests.py", "tests/test_utils.py", "tests/testserver/server.py", "tox.ini",
]  # fmt: skip


def selected(scope: Scope, paths: list[str] = REQUESTS_PATHS) -> list[str]:
    return [p for p, keep in zip(paths, scope.mask(paths)) if keep]


# --- kinds ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("src/requests/sessions.py", SOURCE),
        ("src/requests/__init__.py", SOURCE),
        ("setup.py", SOURCE),
        ("tests/test_requests.py", TEST),
        ("tests/testserver/server.py", TEST),
        ("tests/conftest.py", TEST),
        ("tests/certs/README.md", TEST),  # the tests folder wins over the extension
        ("docs/user/quickstart.rst", DOC),
        ("docs/conf.py", DOC),
        ("HISTORY.md", DOC),
        ("AUTHORS.rst", DOC),
        ("README.md", DOC),
        ("LICENSE", DOC),
        ("ext/LICENSE", DOC),
        ("NOTICE", DOC),
        ("pyproject.toml", CONFIG),
        ("setup.cfg", CONFIG),
        ("tox.ini", CONFIG),
        ("Makefile", CONFIG),
        ("MANIFEST.in", CONFIG),
        ("requirements-dev.txt", CONFIG),  # requirements are config, although .txt is prose
        ("docs/Makefile", CONFIG),  # build files are config even under docs/
        (".coveragerc", CONFIG),
        (".gitignore", CONFIG),
        (".github/workflows/run-tests.yml", CONFIG),
        (".github/CONTRIBUTING.md", CONFIG),  # everything under .github/
    ],
)
def test_kinds_on_requests_paths(path: str, kind: str) -> None:
    assert kind_of(path) == kind


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("conftest.py", TEST),
        ("pkg/test_models.py", TEST),
        ("pkg/models_test.py", TEST),
        ("app/tests.py", TEST),
        ("server/handler_test.go", TEST),
        ("web/src/button.test.ts", TEST),
        ("web/src/button.test.tsx", TEST),
        ("web/src/api.spec.js", TEST),
        ("web/src/__tests__/api.js", TEST),
        ("spec/models/user_spec.rb", TEST),
        ("src/test/java/org/FooTest.java", TEST),
        ("src/main/java/org/FooTest.java", TEST),
        ("test/fixtures/data.json", TEST),
        ("src/main/java/org/Latest.java", SOURCE),  # "test" suffix, but not the Test convention
        ("pkg/testing_utils.py", SOURCE),
        ("pkg/contest.py", SOURCE),
        ("readme_renderer.py", SOURCE),  # document names are upper-case or extension-less
        ("web/src/app.tsx", SOURCE),
        ("cmd/main.go", SOURCE),
        ("scripts/build.sh", SOURCE),
        ("doc/guide.adoc", DOC),
        ("notes.txt", DOC),
        ("CHANGELOG", DOC),
        ("CHANGELOG.md", DOC),
        ("LICENSE-MIT", DOC),
        ("LICENSE.txt", DOC),
        ("license", DOC),
        ("COPYING", DOC),
        # Python packaging metadata: headers, then the project's README as its long description.
        ("PKG-INFO", DOC),
        ("attrs-23.2.0/PKG-INFO", DOC),
        ("attrs-23.2.0.dist-info/METADATA", DOC),
        ("src/metadata", SOURCE),  # as spelled only: a script may be called so
        ("bin/pkg-info", SOURCE),
        ("package.json", CONFIG),
        ("config/settings.yaml", CONFIG),
        ("Dockerfile", CONFIG),
        ("docker/Dockerfile.dev", CONFIG),
        ("requirements.txt", CONFIG),
        (".pre-commit-config.yaml", CONFIG),
        (".eslintrc.js", CONFIG),
        (".circleci/config.yml", CONFIG),
        ("./setup.py", SOURCE),
    ],
)
def test_kinds_in_other_ecosystems(path: str, kind: str) -> None:
    assert kind_of(path) == kind


def test_kinds_cover_the_whole_requests_scan(requests_corpus: Path) -> None:
    kinds = {f.path: kind_of(f.path) for f in scan(requests_corpus).files}
    assert set(kinds.values()) == set(KINDS)
    for path, kind in kinds.items():
        if path.startswith("src/requests/"):
            assert kind == SOURCE, path
        if path.startswith("tests/"):
            assert kind == TEST, path
        if path.startswith(".github/"):
            assert kind == CONFIG, path
        if path.endswith(".rst") and not path.startswith("tests/"):
            assert kind == DOC, path


# --- validation -------------------------------------------------------------------


def test_unknown_kind_names_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="unknown kind 'tests'.*valid kinds: source, test, doc, config"):
        Scope(kinds=frozenset({"tests"}))
    with pytest.raises(ValueError, match="unknown kind 'code'"):
        Scope(exclude_kinds=frozenset({"code"}))


def test_empty_kinds_is_rejected() -> None:
    with pytest.raises(ValueError, match="use None for all kinds"):
        Scope(kinds=frozenset())


def test_bad_glob_and_types() -> None:
    with pytest.raises(ValueError, match=r"bad glob '!' in include.*\.gitignore syntax"):
        Scope(include=("!",))
    with pytest.raises(TypeError, match="strings"):
        Scope(exclude=(3,))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="prefix"):
        Scope(prefix=Path("src"))  # type: ignore[arg-type]


@pytest.mark.parametrize("what", ["include", "exclude"])
@pytest.mark.parametrize("glob", ["[z-a]", "!", "\\"])
def test_a_glob_that_cannot_be_compiled_is_one_library_error_naming_it(what: str, glob: str) -> None:
    """Issue 38 row 8: '[z-a]' raised re.error (a 68-line traceback from the CLI, a reasonless MCP error)."""
    from codesearch.exceptions import CodeSearchError, InvalidScopeError

    with pytest.raises(InvalidScopeError) as caught:
        Scope.of(**{what: ["*.py", glob]})
    message = str(caught.value)
    assert isinstance(caught.value, CodeSearchError) and isinstance(caught.value, ValueError)
    assert f"bad glob {glob!r} in {what}" in message and "\n" not in message and ".gitignore syntax" in message


def test_friendly_coercion_and_equality() -> None:
    scope = Scope(include=["*.py"], exclude="tests/", kinds={"source", "test"})  # type: ignore[arg-type]
    assert scope.include == ("*.py",)
    assert scope.exclude == ("tests/",)
    assert scope.kinds == frozenset({SOURCE, TEST})
    assert scope == Scope(include=("*.py",), exclude=("tests/",), kinds=frozenset({"test", "source"}))
    same = Scope(include=("*.py",), exclude=("tests/",), kinds=frozenset({"test", "source"}))
    assert hash(scope) == hash(same)
    assert Scope(include=("", "  ")).include == ()


def test_frozen() -> None:
    with pytest.raises(AttributeError):
        Scope().prefix = "src"  # type: ignore[misc]


def test_unrestricted() -> None:
    assert Scope.everything() == Scope()
    assert Scope().is_unrestricted
    assert Scope(prefix="/").is_unrestricted
    assert Scope(kinds=frozenset(KINDS)).is_unrestricted
    assert not Scope(prefix="src").is_unrestricted
    assert not Scope(exclude=("*.md",)).is_unrestricted
    assert not Scope(exclude_kinds=frozenset({TEST})).is_unrestricted
    assert Scope().mask(REQUESTS_PATHS).all()


# --- prefix -----------------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["src", "src/", "./src/", "/src", " src/ "])
def test_prefix_with_or_without_slashes(prefix: str) -> None:
    scope = Scope(prefix=prefix)
    assert scope.prefix == "src"
    assert selected(scope) == [p for p in REQUESTS_PATHS if p.startswith("src/")]


def test_prefix_matches_whole_components() -> None:
    paths = ["src/a.py", "srcs/b.py", "src", "src/requests/api.py", "src/requests/api.pyc"]
    assert selected(Scope(prefix="src"), paths) == [
        "src/a.py", "src", "src/requests/api.py", "src/requests/api.pyc",
    ]  # fmt: skip
    assert selected(Scope(prefix="src/requests/api.py"), paths) == ["src/requests/api.py"]
    assert selected(Scope(prefix="docs/user"), REQUESTS_PATHS) == ["docs/user/quickstart.rst"]


# --- globs ------------------------------------------------------------------------


def test_include_extension_glob_matches_at_any_depth() -> None:
    assert selected(Scope(include=("*.py",))) == [p for p in REQUESTS_PATHS if p.endswith(".py")]


def test_exclude_directory_pattern() -> None:
    kept = selected(Scope(exclude=("tests/",)))
    assert not any(p.startswith("tests/") for p in kept)
    assert len(kept) == len([p for p in REQUESTS_PATHS if not p.startswith("tests/")])


def test_anchored_and_unanchored_patterns() -> None:
    paths = ["setup.py", "pkg/setup.py", "docs/a.rst", "pkg/docs/b.rst"]
    assert selected(Scope(include=("/setup.py",)), paths) == ["setup.py"]
    assert selected(Scope(include=("setup.py",)), paths) == ["setup.py", "pkg/setup.py"]
    assert selected(Scope(include=("docs/",)), paths) == ["docs/a.rst", "pkg/docs/b.rst"]
    assert selected(Scope(include=("/docs/",)), paths) == ["docs/a.rst"]


def test_double_star_and_path_globs() -> None:
    assert selected(Scope(include=("docs/**/*.rst",))) == ["docs/api.rst", "docs/user/quickstart.rst"]
    assert selected(Scope(include=("src/requests/s*.py",))) == ["src/requests/sessions.py"]


def test_negation_inside_include() -> None:
    kept = selected(Scope(include=("*.py", "!tests/**")))
    assert kept == [p for p in REQUESTS_PATHS if p.endswith(".py") and not p.startswith("tests/")]


def test_negated_folder_does_not_take_back_files_matched_by_name() -> None:
    # git's rule, kept by GitIgnoreSpec: "*.py" matches the file itself, which
    # beats "!tests/" matching only its folder. Use "!tests/**" or exclude=.
    kept = selected(Scope(include=("*.py", "!tests/")))
    assert "tests/test_requests.py" in kept
    by_exclude = selected(Scope(include=("*.py",), exclude=("tests/",)))
    assert by_exclude == selected(Scope(include=("*.py", "!tests/**")))


def test_negation_inside_exclude_takes_a_file_back() -> None:
    kept = selected(Scope(exclude=("tests/*", "!tests/test_utils.py")))
    assert [p for p in kept if p.startswith("tests/")] == ["tests/test_utils.py"]


def test_include_and_exclude_together() -> None:
    scope = Scope(include=("*.py",), exclude=("__init__.py", "docs/"))
    assert selected(scope) == [
        "setup.py", "src/requests/adapters.py", "src/requests/sessions.py", "src/requests/utils.py",
        "tests/conftest.py", "tests/test_requests.py", "tests/test_utils.py", "tests/testserver/server.py",
    ]  # fmt: skip


# --- kinds in scope ---------------------------------------------------------------


def test_kinds_filter() -> None:
    assert selected(Scope(kinds=frozenset({TEST}))) == [p for p in REQUESTS_PATHS if p.startswith("tests/")]
    assert selected(Scope(kinds=frozenset({DOC}))) == [
        "AUTHORS.rst", "HISTORY.md", "LICENSE", "NOTICE", "README.md", "docs/api.rst", "docs/conf.py",
        "docs/user/quickstart.rst", "ext/LICENSE",
    ]  # fmt: skip
    no_tests_no_docs = selected(Scope(exclude_kinds=frozenset({TEST, DOC})))
    assert {kind_of(p) for p in no_tests_no_docs} == {SOURCE, CONFIG}
    assert selected(Scope(kinds=frozenset({SOURCE, TEST}), exclude_kinds=frozenset({TEST}))) == [
        p for p in REQUESTS_PATHS if kind_of(p) == SOURCE
    ]


def test_all_rules_combine() -> None:
    scope = Scope(prefix="src", include=("*.py",), exclude=("utils.py",), kinds=frozenset({SOURCE}))
    assert selected(scope) == [
        "src/requests/__init__.py", "src/requests/adapters.py", "src/requests/sessions.py",
    ]  # fmt: skip


# --- mask -------------------------------------------------------------------------


def test_mask_uses_given_kinds_per_chunk() -> None:
    # Chunks repeat their file's path; the stored kind is used as given.
    paths = ["a.py", "a.py", "b.md", "b.md", "a.py"]
    kinds = [SOURCE, SOURCE, DOC, DOC, SOURCE]
    mask = Scope(kinds=frozenset({DOC})).mask(paths, kinds)
    assert mask.dtype == np.bool_ and mask.shape == (5,)
    assert mask.tolist() == [False, False, True, True, False]
    relabelled = Scope(kinds=frozenset({TEST})).mask(paths, [TEST] * 5)
    assert relabelled.all()


def test_mask_accepts_numpy_paths_and_empty_input() -> None:
    paths = np.array(["src/a.py", "tests/test_a.py"])
    assert Scope(exclude_kinds=frozenset({TEST})).mask(paths).tolist() == [True, False]
    assert Scope(prefix="src").mask([]).shape == (0,)
    assert Scope().mask([]).shape == (0,)


def test_mask_length_mismatch() -> None:
    with pytest.raises(ValueError, match="one kind per path"):
        Scope(prefix="src").mask(["a.py", "b.py"], [SOURCE])


_PATHS = st.sampled_from(REQUESTS_PATHS + ["srcs/x.py", "pkg/docs/y.md", "pkg/tests/z_test.go"])
_SCOPES = st.builds(
    Scope,
    prefix=st.sampled_from([None, "src", "docs/", "tests", "pkg"]),
    include=st.sampled_from([(), ("*.py",), ("*.md", "*.rst"), ("docs/",), ("*.py", "!tests/")]),
    exclude=st.sampled_from([(), ("tests/",), ("__init__.py",), ("*", "!*.py")]),
    kinds=st.sampled_from([None, frozenset({SOURCE}), frozenset({TEST, DOC})]),
    exclude_kinds=st.sampled_from([frozenset(), frozenset({CONFIG})]),
)


@settings(max_examples=200, deadline=None)
@given(scope=_SCOPES, paths=st.lists(_PATHS, max_size=40))
def test_mask_equals_per_path_decision(scope: Scope, paths: list[str]) -> None:
    expected = [scope.allows(p) for p in paths]
    assert scope.mask(paths).tolist() == expected
    assert scope.mask(paths, [kind_of(p) for p in paths]).tolist() == expected


def test_an_absolute_scope_inside_the_repository_is_its_relative_scope(tmp_path: Path) -> None:
    """Issue 38: an absolute scope was stripped of its '/' and matched nothing; outside the repository it is an
    error that says so (a leading '/' naming a folder of the repository still anchors at its root)."""
    from codesearch import CodeSearch
    from codesearch.exceptions import InvalidScopeError

    root = tmp_path / "repo"
    for folder in ("src", "lib"):
        (root / folder).mkdir(parents=True)
        (root / folder / "a.py").write_text(f"def in_{folder}():\n    return 'needle'\n")
    (tmp_path / "link").symlink_to(root)
    cs = CodeSearch(root, model=None, index_dir=tmp_path / "index")

    def paths(scope: str) -> list[str]:
        return sorted(hit.path for hit in cs.search("needle", mode="bm25", scope=scope))

    assert paths("src") == ["src/a.py"]
    for same in (str(root / "src"), str(root / "src") + "/", str(tmp_path / "link" / "src"), "/src",
                 str(root / "lib" / ".." / "src")):
        assert paths(same) == ["src/a.py"], same
    assert paths(str(root)) == ["lib/a.py", "src/a.py"]
    for outside in (str(tmp_path), str(tmp_path / "elsewhere"), str(root / ".." / "x")):
        with pytest.raises(InvalidScopeError, match="outside the repository"):
            cs.search("needle", mode="bm25", scope=outside)
