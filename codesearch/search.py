"""The :class:`CodeSearch` facade: index a repository, keep it fresh, query it.

Data flows scan -> chunk -> embed -> keywords -> store (:mod:`codesearch.index`),
then for a query: scope mask -> each retriever's candidates within it -> fusion
-> boosts -> priors -> diversity (:mod:`codesearch.ranking`) -> hits.

An index has up to two embedding tiers beside its BM25 keywords: ``static``
(a static model distilled from the transformer; a whole repository in about a
second) and ``full`` (the transformer's own vectors). A search on a repository
never indexed builds the static tier first and answers from it;
:meth:`CodeSearch.index` adds the transformer tier. Every search uses what is
there and says which tier answered (:attr:`CodeSearch.last_search`).

This module validates arguments and wires the roles of :mod:`codesearch.index`
together; it holds no indexing, freshness or ranking logic of its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from codesearch.cache import default_index_dir
from codesearch.chunking import ChunkParams
from codesearch.embedding.catalogue import DEFAULT_MODEL, ModelSpec
from codesearch.exceptions import (
    ModelNotAvailableError,
    RootNotFoundError,
)
from codesearch.files import Changes
from codesearch.index import BuildOptions, Freshness, IndexBuilder, IndexStore, Tiers
from codesearch.index.navigation import find_definitions, find_references
from codesearch.index.session import IndexSession, SessionOptions
from codesearch.index.tiers import KEYWORD_ONLY
from codesearch.ranking import Ranking, resolve_ranking
from codesearch.scope import Scope, relative_prefix
from codesearch.types import (
    CHUNKINGS,
    FULL,
    KEYWORD,
    MODES,
    TIERS,
    Chunking,
    Hit,
    IndexReport,
    Mode,
    SearchInfo,
    SymbolHits,
    TextEmbedder,
    Tier,
    check_search,
)

MAX_NAME_CHARS = 1000
"""The longest symbol name :meth:`CodeSearch.definitions` and :meth:`CodeSearch.references` take."""


class _Option:
    """An attribute of :class:`CodeSearch` that is the option of the same name of its :class:`IndexSession`."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, searcher: CodeSearch | None, owner: type | None = None) -> Any:
        return self if searcher is None else getattr(searcher._session.options, self.name)

    def __set__(self, searcher: CodeSearch, value: Any) -> None:
        setattr(searcher._session.options, self.name, value)


class CodeSearch:
    """Search one repository by keyword (BM25), by meaning (embeddings), or both fused.

    Args:
        root: the repository folder.
        model: a catalogue name (``"minilm"``, ``"bge-small"``, ``"bge-m3"``),
            a hub id or local model folder, a :class:`~codesearch.embedding.ModelSpec`,
            or an already loaded embedder. Loaded lazily: keyword search never
            loads it. ``None`` builds a keyword-only index (no vectors).
        index_dir: where the index lives; by default a folder in the user cache
            keyed by the absolute root.
        int8: use the int8-quantised export (the default; kept only where it
            passed its quality gate against fp32); ``False`` for fp32.
        static: the static tier's embedder: ``None`` (default) distils one from
            ``model`` when that is a name, folder or spec; ``False`` for none;
            or an object with ``embed_documents``/``embed_query``.
        fast_start: when a search finds no index, build the static tier first
            and answer from it (the transformer tier follows with
            :meth:`index`); ``False`` builds the full index before answering.
        refresh: before each search, find the files that changed and re-index
            them (``search(refresh=...)`` overrides it per call).
        watch: find them with a file watcher (inotify, FSEvents or
            ReadDirectoryChangesW, through ``watchfiles``) instead of a stat
            pass before each search: a search with nothing changed checks
            nothing, and a burst of changes is one refresh. For long-lived
            processes (the MCP server uses it); where watching is not possible
            the stat pass stays, and :meth:`status` says which is active and
            why. Call :meth:`close` (or use ``with``) to stop the watcher.
        background_upgrade: after a search answered from the static tier,
            build the transformer tier in a background thread; a search whose
            files changed stops it, refreshes, and it starts again (the MCP
            server's policy).
        use_ignore_files: honour ``.gitignore`` and ``.codesearchignore``.
        chunking: ``"definitions"`` (default) cuts code along functions,
            classes and methods and records the symbols each chunk defines;
            ``"lines"`` is the published line-window chunker.
        ranking: ``"default"``, ``"article"`` (the published plain RRF) or a
            :class:`~codesearch.ranking.Ranking`.
        chunk_params: chunk sizes; by default a 400-token budget for definition
            chunks and 700-token line windows (:meth:`ChunkParams.for_chunking`).
        embed_tests: whether the transformer reads test files too. ``None``
            (default) keeps the stored index's choice, and for a new index
            leaves them to keywords and the static tier: tests are a fifth of
            a typical repository's chunks and rank below source anyway, and
            leaving them out made the index 18% faster for 0.001 NDCG@10 on
            the peer benchmark (``benchmarks/README.md``).
        lock_timeout: seconds to wait for another writer of the same index.
        progress: show a progress bar when :meth:`search` has to build the
            index first (``index(progress=...)`` decides for itself).
        read_only: never write the index: no lock, no commit, no checkpoint.
            Files changed since it was built are refreshed in memory, for this
            process only; :meth:`index` raises :class:`IndexReadOnlyError`.
            ``None`` (default) is read-only when this process cannot write the
            index folder (a read-only folder or file system).
        verify_first: before an answer, wait for the sha256 of the index files it reads (the files not yet
            checked are hashed then, on two threads): a damaged index never answers, at the price of reading
            every file the answer needs once per process (about 0.3 s at 90k chunks on two cores). ``False`` (default) answers
            from the moment the index opens while a background thread checks the files; every answer after a
            failed check raises :class:`~codesearch.exceptions.IndexCorruptError`, and the checks of structure
            that cost nothing (sizes, offsets, numbers in range, ``.npy`` headers) run at open either way. The
            command line verifies first.

    An index folder can be moved with its repository (another path, another
    machine, new file times): contents that match are not chunked or embedded
    again, so the first search there re-reads the files and embeds nothing.

    Example:
        >>> cs = CodeSearch("path/to/repo")                       # doctest: +SKIP
        >>> cs.search("why does a POST turn into a GET", k=5)     # doctest: +SKIP
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        model: str | ModelSpec | TextEmbedder | None = DEFAULT_MODEL,
        *,
        index_dir: str | os.PathLike[str] | None = None,
        int8: bool = True,
        static: TextEmbedder | bool | None = None,
        fast_start: bool = True,
        refresh: bool = True,
        watch: bool = False,
        background_upgrade: bool = False,
        use_ignore_files: bool = True,
        chunking: Chunking = "definitions",
        ranking: str | Ranking = "default",
        chunk_params: ChunkParams | None = None,
        embed_tests: bool | None = None,
        lock_timeout: float = 30.0,
        progress: bool = False,
        read_only: bool | None = None,
        verify_first: bool = False,
    ) -> None:
        if chunking not in CHUNKINGS:
            raise ValueError(f"unknown chunking {chunking!r}; use one of {', '.join(CHUNKINGS)}")
        self.root = Path(root).expanduser().absolute()
        if not self.root.is_dir():
            what = "not a directory" if self.root.exists() else "path does not exist"
            raise RootNotFoundError(f"{what}: {root}")
        directory = index_dir if index_dir is not None else default_index_dir(self.root)
        if read_only is None:
            read_only = not IndexStore(directory).is_writable()
        self.store = IndexStore(directory, read_only=read_only)
        self.ranking = resolve_ranking(ranking)
        self.last_search: SearchInfo | None = None
        self._tiers = Tiers(model, int8, static, f"the index at {self.store.directory}")
        options = BuildOptions(chunking, chunk_params or ChunkParams.for_chunking(chunking), use_ignore_files, embed_tests)
        self._builder = IndexBuilder(self.root, self.store, self._tiers, options)
        self._freshness = Freshness(self.root, self.store, use_ignore_files, watch=watch)
        self._session = IndexSession(self.root, self.store, self._tiers, self._builder, self._freshness,
                                     SessionOptions(fast_start, refresh, background_upgrade, lock_timeout, progress,
                                                    verify_first))

    # The session's options, as attributes a caller may set (``cs.refresh = False``).
    fast_start = _Option()
    refresh = _Option()
    background_upgrade = _Option()
    lock_timeout = _Option()
    progress = _Option()
    verify_first = _Option()

    # -- models ------------------------------------------------------------------

    @property
    def model_name(self) -> str | None:
        """The name of the model asked for, known without loading it (``None`` for keyword-only)."""
        return self._tiers.model_name

    @property
    def embedder(self) -> TextEmbedder:
        """The transformer, loaded (and exported if needed) on first use."""
        return self._tiers.embedder

    @property
    def has_static(self) -> bool:
        """Whether this searcher has a static tier (it needs a model given by name, folder or spec)."""
        return self._tiers.has_static

    @property
    def static_embedder(self) -> TextEmbedder:
        """The static tier's embedder, loaded (and distilled if needed) on first use."""
        return self._tiers.static_embedder

    # -- indexing ----------------------------------------------------------------

    def index(self, *, progress: bool = False, tier: Tier | None = None) -> IndexReport:
        """Build the index, or bring it up to date with the files on disk.

        Unchanged files are not chunked again and unchanged chunks keep their
        stored vectors; only new chunk texts are embedded. The new state is
        committed atomically, so a crash leaves the previous index intact.

        Args:
            progress: show a progress bar while embedding.
            tier: ``"full"`` (default: transformer vectors, plus the static
                tier when there is one), ``"static"`` (keywords and static
                vectors only: seconds, not minutes) or ``"keyword"``.

        Raises:
            EmptyRepositoryError: nothing under the root can be indexed.
            IndexLockedError: another process is writing this index.
            ModelNotAvailableError: a model cannot be loaded here (or, for
                ``tier="static"``, this searcher has no static model).
            ModelMismatchError: the index holds another model's vectors and
                ``tier="static"`` would leave them out of step.
        """
        if tier is None:
            tier = KEYWORD if self._tiers.keyword_only else FULL
        if tier not in TIERS:
            raise ValueError(f"unknown tier {tier!r}; use one of {', '.join(TIERS)}")
        if tier != KEYWORD and self._tiers.keyword_only:
            raise ModelNotAvailableError(KEYWORD_ONLY)
        return self._session.build(tier, progress=progress)

    def cancel_indexing(self) -> None:
        """Ask an :meth:`index` running in another thread to stop at its next checkpoint.

        It raises :class:`~codesearch.exceptions.IndexCancelledError` there and
        commits nothing; the vectors embedded so far stay in the checkpoint,
        so the next run goes on from them.
        """
        self._builder.cancel()

    def wait_for_upgrade(self, timeout: float | None = None) -> None:
        """Wait for a background build of the transformer tier (``background_upgrade``) to end."""
        self._freshness.wait(timeout)

    def close(self) -> None:
        """Stop the file watcher (``watch=True``); later searches stat the files instead. The index stays as it is."""
        self._freshness.close()

    def __enter__(self) -> CodeSearch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def read_only(self) -> bool:
        """Whether this searcher never writes its index (see the ``read_only`` argument)."""
        return self.store.read_only

    # -- freshness -----------------------------------------------------------------

    def changes(self) -> Changes:
        """Files changed on disk since the stored index (added, modified, removed), found by a stat pass alone.

        Returns:
            Empty when there is no index yet.
        """
        return self._session.changes()

    # -- searching -----------------------------------------------------------------

    def search(
        self,
        query: str,
        k: int = 10,
        mode: Mode = "hybrid",
        *,
        scope: str | None = None,
        include: str | Iterable[str] = (),
        exclude: str | Iterable[str] = (),
        kinds: str | Iterable[str] | None = None,
        exclude_kinds: str | Iterable[str] = (),
        source_first: bool | None = None,
        refresh: bool | None = None,
    ) -> list[Hit]:
        """Find the ``k`` chunks that best answer ``query``.

        Args:
            query: words, a question, or an identifier.
            k: how many hits at most.
            mode: ``"bm25"`` (keywords), ``"dense"`` (embeddings) or
                ``"hybrid"`` (both, fused).
            scope: a path prefix such as ``"src/"``.
            include: gitignore-style globs a path must match.
            exclude: gitignore-style globs that drop a path.
            kinds: only these kinds (``source``, ``test``, ``doc``, ``config``).
            exclude_kinds: drop these kinds.
            source_first: ``None`` ranks as the ranking says; ``True`` or
                ``False`` puts tests, docs and config below source or not, for
                this query (:meth:`Ranking.source_first`).
            refresh: find the files that changed first (a stat pass, or the
                watcher's report) and re-index them (default: the searcher's ``refresh``).

        Filtering happens before the top-k cut, so asking for 10 source hits
        returns 10 source hits when there are that many. A repository never
        indexed is indexed first: its static tier when ``fast_start`` (the
        transformer follows with :meth:`index`), else in full.

        Returns:
            Hits in rank order, scored by the ranking pipeline.

        Raises:
            ValueError: an unknown mode or kind, an empty query, or ``k`` below 1.
            InvalidScopeError: a glob that does not compile, or an absolute ``scope`` outside the repository.
            ModelMismatchError: the index was built with another model.
        """
        check_search(query, k, mode)
        where = Scope.of(relative_prefix(scope, self.root), include, exclude, kinds, exclude_kinds)
        ranking = self.ranking if source_first is None else self.ranking.source_first(source_first)
        if mode != "bm25" and self._tiers.keyword_only:
            raise ModelNotAvailableError(KEYWORD_ONLY)
        loaded, ranked, self.last_search = self._session.answer(query, mode, where, ranking, k, refresh)
        hits = [loaded.hit(i, score) for i, score in ranked]
        loaded.check()  # a verdict that came in while answering
        return hits

    def definitions(self, name: str, k: int = 10, *, refresh: bool | None = None) -> SymbolHits:
        """The chunks that define ``name``, from the symbol table of the definition chunker.

        ``name`` is bare (``send``: every definition whose last part it is,
        ``Session.send`` among them) or qualified (``Session.send``, in any
        language's qualifier syntax: ``Session::send`` finds it too). Symbols
        written with the same case come first, then those that differ only in
        case; among them, definitions in source files before stubs, examples,
        tests, docs and config, then a file named after the name
        (``TypeAdapter.java``), a whole symbol before a member, then path and
        line. Each hit's :attr:`Hit.defines` is the symbol that matched; a long
        definition is given once, by its first window.

        Args:
            name: the symbol.
            k: how many definitions at most.
            refresh: stat the files first and re-index those that changed.

        Returns:
            The definitions found. When the symbol table has no symbol of that
            last name (a top-level property or macro a language's table does
            not record), the lines that read like its declaration (``val
            NAME``, ``class NAME``, ``#define NAME`` ...), with
            :attr:`SymbolHits.textual` set and a note saying so; when nothing
            declares it either, none, with a note naming the closest symbols.

        Raises:
            ValueError: an empty name or one over :data:`MAX_NAME_CHARS`, or ``k`` below 1.
        """
        self._check_name(name, k)
        loaded = self._session.ready(refresh)[0]
        found = find_definitions(loaded, name, k)
        loaded.check()
        self._session.upgrade_after(loaded)
        return found

    def references(self, name: str, k: int = 50, *, refresh: bool | None = None) -> SymbolHits:
        """The chunks that use the identifier ``name`` as a whole word, in file then line order.

        The keyword index keeps every identifier whole, so the chunks that may
        use it are found from its postings; each is then read for the name as
        a whole word with its case, as ``grep -w`` does. The answer is textual
        (:attr:`SymbolHits.textual`): a call through dynamic dispatch,
        reflection or a name built at run time is not found. Each hit's
        :attr:`Hit.lines` are the lines that use the name; a chunk that also
        defines it has :attr:`Hit.defines` set. A qualified name
        (``Session.send``) looks for its last part.

        Args:
            name: an identifier (or a qualified name).
            k: how many chunks at most; :attr:`SymbolHits.capped` says when there were more.
            refresh: stat the files first and re-index those that changed.

        Raises:
            ValueError: an empty name, one over :data:`MAX_NAME_CHARS` or without an identifier, or ``k`` below 1.
        """
        self._check_name(name, k)
        loaded = self._session.ready(refresh)[0]
        found = find_references(loaded, name, k)
        loaded.check()
        self._session.upgrade_after(loaded)
        return found

    @staticmethod
    def _check_name(name: str, k: int) -> None:
        if not name.strip():
            raise ValueError("the name is empty; give a symbol such as `Session.send` or `send`")
        if len(name) > MAX_NAME_CHARS:  # no symbol is that long; the answer and its note would echo it twice
            raise ValueError(f"the name is {len(name):,} characters long; a symbol name has at most "
                             f"{MAX_NAME_CHARS:,} (give `Session.send` or `send`)")
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")

    def related(self, path: str, line: int, k: int = 10) -> list[Hit]:
        """The ``k`` chunks most similar to the chunk at ``path:line``, that chunk left out.

        Args:
            path: a file path relative to the root (or absolute, inside it).
            line: a 1-based line the chunk covers.
            k: how many.

        Raises:
            ValueError: ``k`` below 1, a line below 1, or no indexed chunk covers ``path:line``.
            ModelNotAvailableError: a keyword-only index (similarity needs vectors).
        """
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        if line < 1:
            raise ValueError(f"line numbers start at 1, got {line}")
        loaded = self._session.checked(self._session.current()[0], TIERS)
        relative = self._relative(path)
        if not loaded.chunks_of(relative):
            raise ValueError(f"{path} is not indexed under {self.root}")
        hits = [loaded.hit(i, score) for i, score in loaded.related(relative, line, k)]
        loaded.check()
        return hits

    def verify(self) -> int:
        """Check the sha256 of every file of the stored index now (a search checks them in the background).

        Returns:
            Bytes read.

        Raises:
            IndexNotFoundError: nothing has been indexed yet.
            IndexCorruptError: a file is damaged; the message names it.
        """
        return self.store.verify()

    def locations(self) -> list[tuple[str, int, int]]:
        """Every indexed chunk's ``(path, start_line, end_line)``, in index order (the index is built first if needed)."""
        return self._session.checked(self._session.current()[0]).locations()

    def _relative(self, path: str) -> str:
        candidate = Path(path).expanduser()
        if candidate.is_absolute():
            try:
                return candidate.resolve().relative_to(self.root.resolve()).as_posix()
            except ValueError:
                raise ValueError(f"{path} is outside {self.root}") from None
        return candidate.as_posix().removeprefix("./")

    # -- facts ---------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """Facts about the stored index without loading the model: model, tier, counts, location, last update.

        Raises:
            IndexNotFoundError: nothing has been indexed yet.
            IndexCorruptError: the manifest is damaged.
        """
        return self._session.info()

    def status(self) -> dict[str, Any]:
        """:meth:`info`, plus how many files changed on disk since (a stat pass; nothing is re-indexed), and how
        searches find changes: ``freshness`` is ``"watch"`` or ``"stat"``, ``freshness_reason`` says why, and
        ``refreshed_in_memory`` how many files this searcher holds in memory otherwise than the stored index (re-read
        because the index is read-only here or another process held its write lock).

        Raises:
            IndexNotFoundError: nothing has been indexed yet.
        """
        return self._session.status()


__all__ = ["MAX_NAME_CHARS", "CodeSearch", "Hit", "IndexReport", "MODES", "Mode", "SearchInfo", "SymbolHits", "TIERS",
           "TextEmbedder", "Tier"]
