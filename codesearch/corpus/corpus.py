"""The :class:`Corpus` facade: build, refresh and search thousands of repositories on Ray Data and Lance.

It validates arguments and wires the roles of the package together: the
models and their guards (:class:`~codesearch.index.tiers.Tiers`, as a single
index's), the build and refresh driver (:mod:`~codesearch.corpus.driver`),
the repository views of scoped searches (:mod:`~codesearch.corpus.views`),
the candidates across repositories (:mod:`~codesearch.corpus.candidates`) and
the check of the files' sha256 before an answer (:mod:`~codesearch.corpus.integrity`); it
holds no ranking logic: every search goes through :mod:`codesearch.ranking`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from codesearch.corpus.candidates import CorpusSource, FileSet, RowKeys
from codesearch.corpus.driver import CORPUS_TIERS, CorpusReport, Driver, check_models, parse_paths
from codesearch.corpus.integrity import Verifier
from codesearch.corpus.keywords import StoredFits
from codesearch.corpus.schema import CHUNKS, FILES, KEYWORDS, CorpusManifest, sql_in, sql_string
from codesearch.corpus.store import CorpusStore
from codesearch.corpus.views import RepoView, StaleKeywords, ViewCache, read_pool
from codesearch.embedding.catalogue import DEFAULT_MODEL, ModelSpec
from codesearch.exceptions import RepositoryNotInCorpusError
from codesearch.index.tiers import Tiers
from codesearch.ranking import Ranking, resolve_ranking
from codesearch.scope import Scope, as_strings
from codesearch.types import FULL, STATIC, Hit, Mode, TextEmbedder, Tier, check_search

VIEW_CACHE_BYTES = 512 * 1024**2
"""Memory the repository views of scoped searches may keep (least recently used dropped first)."""
REBUILD = "build another corpus for {model!r}"
"""How a corpus is built for another model (the advice of a model mismatch)."""


class Corpus:
    """Many repositories in one store, searched with the same ranking as a single repository.

    Args:
        store_uri: a local folder, or an ``s3://`` / ``gs://`` URI (Lance writes to both).
        model: the transformer's catalogue name, hub id, folder or spec (the static tier is distilled from it),
            or an embedder object (with ``static`` another, for tests and custom models).
        int8: the transformer's int8 export (where it passed its quality gate).
        static: the static tier's embedder; ``None`` distils it from ``model``.
        ranking: ``"default"``, ``"article"`` or a :class:`~codesearch.ranking.Ranking`.
        storage_options: Lance's options for an object store (credentials, region, endpoint).
        progress: show progress bars while building.

    Example:
        >>> corpus = Corpus("/data/corpus")                           # doctest: +SKIP
        >>> corpus.build(["/src/requests", "flask=/src/flask-main"])  # doctest: +SKIP
        >>> corpus.search("why does a POST turn into a GET", repos=["requests"])  # doctest: +SKIP
    """

    def __init__(self, store_uri: str | os.PathLike[str], model: str | ModelSpec | TextEmbedder = DEFAULT_MODEL, *,
                 int8: bool = True, static: TextEmbedder | None = None, ranking: str | Ranking = "default",
                 storage_options: dict[str, str] | None = None, progress: bool = False) -> None:
        self.store = CorpusStore(store_uri, storage_options)
        self.ranking = resolve_ranking(ranking)
        self.progress = progress
        self.tiers = Tiers(model, int8, static, f"the corpus at {self.store.uri}", rebuild=REBUILD)
        self._views = ViewCache(VIEW_CACHE_BYTES)
        self._files: dict[tuple[int, tuple[str, ...] | None], FileSet] = {}
        self._keys: RowKeys | None = None  # the chunks table's at the version last searched across repositories
        self._fits: StoredFits | None = None  # the keywords table at the manifest's version
        self._verifier = Verifier(self.store)
        self.last_report: CorpusReport | None = None
        self.last_versions: dict[str, int] | None = None
        """The dataset versions (the manifest's ``versions``) the last :meth:`search` read: the corpus version its
        answer came from, whatever a refresh committed since; ``None`` before the first."""

    # -- building ---------------------------------------------------------------------------

    def build(self, paths: Iterable[str | os.PathLike[str]], ray_address: str | None = None, *,
              tier: Tier = STATIC, actors: int | None = None) -> CorpusReport:
        """Add repositories to the corpus (creating it), or bring those already in it up to date.

        Args:
            paths: repository folders, ``PATH`` (named by its folder) or ``NAME=PATH``.
            ray_address: a Ray cluster's ``HOST:PORT`` (or ``auto``); ``None`` starts a local Ray for the call.
            tier: ``static`` (keywords and static vectors: what semble's index costs) or ``full`` (the
                transformer's vectors too, about five times the compute; on GPUs where Ray has them).
            actors: the actor pool's size (default: the cluster's CPUs; its GPUs for the full tier where there are).

        Raises:
            RootNotFoundError: a path is missing.
            ValueError: a bad name or tier.
            CorpusNotFoundError: the URI holds something that is not a corpus.
            ModelMismatchError: the corpus was built by another model.
            ClusterUnavailableError: the Ray address cannot be reached.
        """
        return self._run(parse_paths(paths), ray_address, tier, actors, refresh=False)

    def refresh(self, paths: Iterable[str | os.PathLike[str]] | None = None, ray_address: str | None = None, *,
                tier: Tier | None = None, actors: int | None = None) -> CorpusReport:
        """Bring repositories of the corpus up to date with their folders: only files whose stats changed are read,
        only those whose sha256 changed are cut, only chunk texts without vectors are embedded, and only changed rows
        are written. Repositories whose files' stats are all unchanged are skipped, and a small refresh
        (:data:`~codesearch.corpus.driver.IN_PROCESS_BYTES`) runs in this process without Ray.

        Args:
            paths: repositories of the corpus (``PATH``, ``NAME=PATH``, or a ``NAME`` of the corpus, refreshed
                from the folder it was built from); ``None`` refreshes every one.
            tier: ``full`` adds the transformer's vectors to rows without them; default: each repository's tier.
            ray_address, actors: as for :meth:`build`.

        Raises:
            RepositoryNotInCorpusError: a repository is not in the corpus.
            CorpusNotFoundError: there is no corpus at the URI.
            (and as :meth:`build`)
        """
        manifest = self.store.manifest()
        if paths is None:
            items = [(name, facts.root) for name, facts in sorted(manifest.repos.items())]
        else:
            given = [os.fspath(p) for p in paths]
            # A repository of the corpus may be named alone: it is refreshed from the folder it was built from.
            items = [(p, manifest.repos[p].root) for p in given if p in manifest.repos and not Path(p).is_dir()]
            items += parse_paths([p for p in given if not (p in manifest.repos and not Path(p).is_dir())]) \
                if len(items) < len(given) else []
            unknown = [name for name, _ in items if name not in manifest.repos]
            if unknown:
                raise RepositoryNotInCorpusError(f"{unknown[0]!r} is not in the corpus at {self.store.uri} "
                                                 f"(it holds {_some(manifest.repos)}); add it with `corpus build`")
        if tier is None:
            tier = FULL if any(manifest.repos[name].tier == FULL for name, _ in items) else STATIC
        return self._run(items, ray_address, tier, actors, refresh=True)

    def _run(self, items: list[tuple[str, str]], ray_address: str | None, tier: Tier, actors: int | None,
             refresh: bool) -> CorpusReport:
        report = Driver(self.store, self.tiers, self.progress).run(items, ray_address, tier, actors, refresh)
        self.last_report = report
        self._views.clear()
        self._keys = None  # the table's keys of the version before (read again by the next org-wide search)
        return report

    # -- searching ----------------------------------------------------------------------------

    @property
    def repos(self) -> list[str]:
        """The repositories in the corpus, by name."""
        return sorted(self.store.manifest().repos)

    def search(self, query: str, k: int = 10, repos: str | Iterable[str] | None = None, mode: Mode = "hybrid", *,
               scope: str | None = None, include: str | Iterable[str] = (), exclude: str | Iterable[str] = (),
               kinds: str | Iterable[str] | None = None, exclude_kinds: str | Iterable[str] = (),
               tier: Tier | None = None, exact: bool = False) -> list[Hit]:
        """The ``k`` chunks of the corpus that best answer ``query``, each hit with its ``repo``.

        Args:
            query: words, a question, or an identifier.
            k: how many hits.
            repos: the repositories to search (a name or several); ``None`` searches them all.
            mode: ``bm25``, ``dense`` or ``hybrid``.
            scope, include, exclude, kinds, exclude_kinds: as :meth:`codesearch.CodeSearch.search`, applied in
                every repository searched, before the cut.
            tier: ``static`` answers from the static tier even where the transformer's vectors are there;
                ``None`` uses the transformer's where every repository searched has them.
            exact: across repositories, score vectors exactly instead of through the vector index.

        A search of one repository ranks exactly as a single index of it would
        (its own BM25 statistics, every chunk scored); across repositories the
        candidates come from the vector and full-text indexes, and the same
        ranking stages order them.

        Raises:
            ValueError: an unknown mode or kind, an empty query, or ``k`` below 1.
            RepositoryNotInCorpusError: a repository that is not in the corpus.
            CorpusNotFoundError: there is no corpus at the URI.
            ModelMismatchError: the corpus was built by another model.
            CorpusCorruptError: a file the corpus's versions read differs from the sha256 recorded for it.
        """
        check_search(query, k, mode)
        where = Scope.of(scope, include, exclude, kinds, exclude_kinds)
        manifest = self._checked()
        self.last_versions = dict(manifest.versions)
        names = self._names(manifest, repos)
        version = manifest.versions[CHUNKS]
        if tier not in (None, *CORPUS_TIERS):
            raise ValueError(f"unknown tier {tier!r}; a corpus has {' or '.join(CORPUS_TIERS)}")
        if len(names) == 1:
            return self._search_one(manifest, names[0], version, query, k, mode, where, tier)
        if mode == "bm25":
            tier = None
        elif tier is None:
            full = manifest.full is not None and all(manifest.repos[n].tier == FULL for n in names) and \
                where.allows_kind("source") | where.allows_kind("doc") | where.allows_kind("config")
            tier = FULL if full else STATIC
        if tier is not None:
            check_models(self.tiers, manifest, [tier])
        vector = self._query_vector(tier, query) if tier is not None else None
        chunks = self.store.open(CHUNKS, version)
        assert chunks is not None
        scoped = None if repos is None else names
        source = CorpusSource(chunks, self._file_set(manifest, scoped), scoped, exact=exact, keys=self._keys)
        self._keys = source.keys
        found = source.rank(query, mode, tier, vector, self.ranking, k, where)
        return [_hit(found.rows[i], score) for i, score in found.ranked]

    def _names(self, manifest: CorpusManifest, repos: str | Iterable[str] | None) -> list[str]:
        if repos is None:
            return sorted(manifest.repos)
        names = list(dict.fromkeys(as_strings(repos)))
        unknown = [n for n in names if n not in manifest.repos]
        if unknown:
            raise RepositoryNotInCorpusError(f"{unknown[0]!r} is not in the corpus at {self.store.uri}; "
                                             f"it holds {_some(manifest.repos)}")
        if not names:
            raise ValueError("repos is empty; name a repository of the corpus, or pass None for all")
        return names

    def _query_vector(self, tier: Tier, query: str) -> np.ndarray | None:
        embedder = self.tiers.embedder if tier == FULL else self.tiers.static_embedder
        vector = np.asarray(embedder.embed_query(query), dtype=np.float32)
        return vector if np.any(vector) else None

    def view(self, repo: str, version: int | None = None, *, vectors: bool = False,
             manifest: CorpusManifest | None = None) -> RepoView:
        """The repository ``repo`` as a single index would hold it (read once per corpus version, then cached).

        ``vectors``: read the transformer's vectors with the rest (the query
        that opens the view will rank on that tier); otherwise they are read
        when a query of that tier first comes. One scan instead of two: 4-6 ms
        less on a repository's first transformer query at 1M rows. ``manifest``: the one the caller read (a
        bucket's is read again otherwise).
        """
        manifest = self.store.manifest() if manifest is None else manifest
        self._verifier.check(manifest)  # once per version (a lookup after the first)
        version = manifest.versions[CHUNKS] if version is None else version
        key = (repo, version)
        found = self._views.get(key)
        if found is not None:
            return found
        chunks = self.store.open(CHUNKS, version)
        assert chunks is not None
        in_repo = f"repo = {sql_string(repo)}"
        fits = None
        if version == manifest.versions[CHUNKS] and KEYWORDS in manifest.versions:
            if self._fits is None or self._fits.ds.version != manifest.versions[KEYWORDS]:
                table = self.store.open(KEYWORDS, manifest.versions[KEYWORDS])
                assert table is not None
                self._fits = StoredFits(table)
            fits = self._fits
        has_full = manifest.repos[repo].tier == FULL
        columns = ["chunk_id", "path", "start_line", "end_line", "ordinal", "kind", "symbols", "read", "static_vector"]
        if vectors and has_full:
            columns.append("vector")
        full_dim = manifest.full.dim if manifest.full else self.tiers.transformer_dim()

        def read(with_terms: bool) -> pa.Table:
            return chunks.to_table(columns=[*columns, "keyword_text"] if with_terms else columns, filter=in_repo,
                                   with_row_id=True)

        # The stored fit (written by the writer) is read beside the rows, so the rows' terms are not read; a corpus
        # written before it, or a fit that is not the rows', is fitted here from a second read with the terms.
        # Side by side, a cold view of one repository at 1M rows costs 4-5 ms less.
        pending = read_pool().submit(fits.get, repo) if fits is not None else None
        rows = read(with_terms=pending is None)
        keywords = pending.result() if pending is not None else None
        try:
            view = RepoView(repo, rows, manifest.static.dim, full_dim, keywords, chunks, has_full)
        except StaleKeywords:
            view = RepoView(repo, read(with_terms=True), manifest.static.dim, full_dim, None, chunks, has_full)
        self._views.put(key, view)
        return view

    def _search_one(self, manifest: CorpusManifest, repo: str, version: int, query: str, k: int, mode: Mode,
                    where: Scope, tier: Tier | None) -> list[Hit]:
        if not manifest.repos[repo].chunks:
            return []  # nothing to rank (a repository of binary files alone, or emptied)
        wants_full = mode != "bm25" and tier != STATIC
        view = self.view(repo, version, vectors=wants_full, manifest=manifest)
        mask = view.scope_mask(where)
        vector = None
        if mode == "bm25":
            tier = None
        else:
            tier = STATIC if tier == STATIC else view.tier_for(mask)
            check_models(self.tiers, manifest, [tier])
            vector = self._query_vector(tier, query)
        ranked = view.rank(query, mode, tier, vector, self.ranking, k, mask)
        texts = view.text_of([i for i, _ in ranked])
        self._views.resized((repo, version))
        return [Hit.of(view.paths[int(view.file_of[i])], view.start[i], view.end[i], score, view.kinds[i], text,
                       view.symbols[i], repo=repo)
                for (i, score), text in zip(ranked, texts)]

    def _file_set(self, manifest: CorpusManifest, repos: list[str] | None) -> FileSet:
        """The files (with chunks) of ``repos`` (``None``: all), numbered; cached per files-table version."""
        version = manifest.versions[FILES]
        key = (version, None if repos is None else tuple(sorted(repos)))
        found = self._files.get(key)
        if found is None:
            files = self.store.open(FILES, version)
            assert files is not None
            table = files.to_table(columns=["repo", "path"], filter=_and_repos(repos, "chunks > 0"))
            if len(self._files) > 8:
                self._files.clear()
            found = self._files[key] = FileSet(table["repo"].to_pylist(), table["path"].to_pylist())
        return found

    # -- checks ------------------------------------------------------------------------------

    def _checked(self) -> CorpusManifest:
        """The manifest, once the files of the versions it names are checked against their sha256 (once per
        version in this process; :class:`~codesearch.corpus.integrity.Verifier`)."""
        manifest = self.store.manifest()
        self._verifier.check(manifest)
        return manifest

    def verify(self) -> dict[str, Any]:
        """Check every file the corpus's versions read against the sha256 its last build or refresh recorded (once
        per version in this process): the store, ``verified`` (false: the corpus records no sums, being written
        before codesearch recorded them; its next build or refresh records them), and the files and bytes checked.

        Raises:
            CorpusNotFoundError: there is no corpus at the URI.
            CorpusCorruptError: a file differs from its recorded sha256 or is missing; the message names it.
        """
        manifest = self.store.manifest()
        if manifest.checksums is None:  # said by the answer (the warning of a search is not repeated)
            return {"store": self.store.uri, "verified": False, "files": 0, "bytes": 0}
        verdict = self._verifier.check(manifest)
        return {"store": self.store.uri, "verified": verdict.verified, "files": verdict.files, "bytes": verdict.bytes}

    def verify_in_background(self) -> None:
        """Start :meth:`verify` in a thread (a server at open); a search or status meanwhile waits for its verdict.

        Raises:
            CorpusNotFoundError: there is no corpus at the URI.
            CorpusCorruptError: ``corpus.json`` is damaged.
        """
        self._verifier.start(self.store.manifest())

    # -- facts ---------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """The corpus: its URI, models and fingerprints, tier, counts, versions, every repository's facts, and
        whether its files were checked against their sha256 (``verified``).

        Raises:
            CorpusNotFoundError: there is no corpus at the URI.
            CorpusCorruptError: a file the corpus's versions read differs from the sha256 recorded for it.
        """
        manifest = self.store.manifest()
        verdict = self._verifier.check(manifest)
        repos = {name: asdict(facts) for name, facts in sorted(manifest.repos.items())}
        tiers = {facts.tier for facts in manifest.repos.values()}
        return {
            "store": self.store.uri, "model": manifest.model,
            "static": asdict(manifest.static), "full": asdict(manifest.full) if manifest.full else None,
            "tier": FULL if tiers == {FULL} else STATIC,
            "repos": len(repos), "files": sum(r["files"] for r in repos.values()),
            "chunks": sum(r["chunks"] for r in repos.values()), "versions": manifest.versions,
            "updated": manifest.updated, "verified": verdict.verified, "repositories": repos,
        }


def _and_repos(repos: list[str] | None, extra: str) -> str:
    return extra if repos is None else f"({sql_in('repo', repos)}) AND ({extra})"


def _hit(row: dict[str, Any], score: float) -> Hit:
    return Hit.of(row["path"], row["start_line"], row["end_line"], score, row["kind"], row["text"], row["symbols"],
                  repo=row["repo"])


def _some(repos: Iterable[str]) -> str:
    names = sorted(repos)
    return ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "") if names else "none"


__all__ = ["REBUILD", "VIEW_CACHE_BYTES", "Corpus"]
