"""Shared fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
"""The tests' root folder (this file's): where ``conftest`` is imported from, and the fixtures are."""
ROOT = TESTS.parent
PACKAGE = ROOT / "codesearch"
BENCHMARKS = ROOT / "benchmarks"
FIXTURES = TESTS / "fixtures"
REQUESTS_CORPUS_ENV = "CODESEARCH_REQUESTS_CORPUS"

# Two small source files in the manner of psf/requests, shared by the tests of the facade, tiers and MCP server.
SESSIONS = '''\
class Session:
    """A requests session."""

    def rebuild_method(self, prepared_request, response):
        """When being redirected we may want to change the method of the request."""
        method = prepared_request.method
        if response.status_code == 303 and method != "HEAD":
            method = "GET"
        prepared_request.method = method

    def should_strip_auth(self, old_url, new_url):
        """Decide whether Authorization header should be removed when redirecting."""
        return old_url != new_url
'''

UTILS = '''\
def super_len(o):
    """Return the length of a body we are about to send."""
    total_length = None
    return total_length


def get_netrc_auth(url):
    """Returns the Requests tuple auth for a given url from netrc."""
    return None
'''


def missing_reference(reason: str) -> None:
    """Skip a test whose reference data is missing here; under CI (``$CI`` set) fail it instead.

    CI provides every reference (``.ci/run`` unpacks the corpus), so a test that
    would skip there means the set-up broke, not that the test does not apply.
    """
    if os.environ.get("CI"):
        pytest.fail(f"reference data missing under CI: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def requests_corpus() -> Path:
    """A checkout of psf/requests v2.32.3, from ``$CODESEARCH_REQUESTS_CORPUS`` (skips locally without it; fails in CI)."""
    path = os.environ.get(REQUESTS_CORPUS_ENV)
    if not path or not Path(path).is_dir():
        missing_reference(f"set {REQUESTS_CORPUS_ENV} to a psf/requests v2.32.3 checkout "
                          "(unpack ../shared/corpora/requests-2.32.3.tar.gz; .ci/run does)")
    return Path(path)  # type: ignore[arg-type]


class HashingEmbedder:
    """A deterministic stand-in for the ONNX model in tests of the search logic.

    Each word of the text (lowercased, identifiers split on ``_``) is hashed into
    one of ``dim`` buckets; vectors are L2-normalised. Texts sharing words are
    similar, so rankings are meaningful, and it costs microseconds. Real-model
    behaviour is tested separately against the exported MiniLM.
    """

    def __init__(self, name: str = "hashing", dim: int = 256, salt: str = "") -> None:
        from types import SimpleNamespace

        self.spec = SimpleNamespace(name=name)
        self.dim = dim
        self.salt = salt
        self.fingerprint = f"{name}-{dim}-{salt}"
        self.calls: list[int] = []

    def _vector(self, text: str):  # type: ignore[no-untyped-def]
        import hashlib
        import re

        import numpy as np

        vec = np.zeros(self.dim, dtype=np.float32)
        for word in re.findall(r"[a-z0-9]+", text.lower().replace("_", " ")):
            digest = hashlib.blake2b((self.salt + word).encode(), digest_size=4).digest()
            vec[int.from_bytes(digest, "little") % self.dim] += 1.0
        norm = float(np.linalg.norm(vec))
        return vec / norm if norm else vec

    def embed_documents(self, texts, progress=False):  # type: ignore[no-untyped-def]
        import numpy as np

        self.calls.append(len(texts))
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vector(t) for t in texts])

    def embed_query(self, text):  # type: ignore[no-untyped-def]
        return self._vector(text)


@pytest.fixture
def hashing_embedder() -> HashingEmbedder:
    return HashingEmbedder()


# --- embedding models (codesearch.models / export / embed) ---------------------------

# Standard-library modules whose code gives the ONNX-vs-torch tests real code chunks
# (the int8 gate calibrates on other files, see codesearch.embedding.gate.CALIBRATION_FILES).
_EMBED_STDLIB_FILES = (
    "subprocess.py",
    "inspect.py",
    "difflib.py",
    "ast.py",
    "tarfile.py",
    "logging/__init__.py",
    "asyncio/base_events.py",
    "email/message.py",
)


@pytest.fixture(scope="session")
def ray_cluster():  # type: ignore[no-untyped-def]
    """One local Ray for the session (the corpus tests'); the actors import the stand-ins from this folder."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray = pytest.importorskip("ray")
    path = os.pathsep.join([str(ROOT), str(TESTS), os.environ.get("PYTHONPATH", "")])
    env = {"PYTHONPATH": path}
    if os.environ.get("CODESEARCH_CACHE_DIR"):
        env["CODESEARCH_CACHE_DIR"] = os.environ["CODESEARCH_CACHE_DIR"]
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False,
             object_store_memory=256 * 1024**2, runtime_env={"env_vars": env})
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session", autouse=True)
def embed_cache_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """One ONNX export cache for the whole run, since exporting takes seconds to minutes.

    ``$CODESEARCH_CACHE_DIR`` when set (CI keeps it between runs); otherwise a
    folder in pytest's own cache, so local runs export each model only once.
    """
    existing = os.environ.get("CODESEARCH_CACHE_DIR")
    if existing:
        yield Path(existing)
        return
    cache = getattr(request.config, "cache", None)
    folder = Path(cache.mkdir("codesearch-models")) if cache is not None else tmp_path_factory.mktemp("codesearch-cache")
    patch = pytest.MonkeyPatch()
    patch.setenv("CODESEARCH_CACHE_DIR", str(folder))
    yield folder
    patch.undo()


@pytest.fixture(scope="session")
def embed_code_chunks() -> list[str]:
    """At least 100 real code chunks from the standard library, as embedded (path, newline, text)."""
    import sysconfig

    from codesearch.chunking import chunk_text

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts: list[str] = []
    for name in _EMBED_STDLIB_FILES:
        path = stdlib / name
        if path.is_file():
            chunks = chunk_text(name, path.read_text(encoding="utf-8"))[:20]
            texts.extend(f"{c.path}\n{c.text}" for c in chunks)
    if len(texts) < 100:
        missing_reference("the standard library's sources are not installed here")
    return texts


@pytest.fixture(scope="session")
def minilm_embedder(embed_cache_dir: Path):  # type: ignore[no-untyped-def]
    """The default model's fp32 ONNX embedder (exported into the test cache on first use)."""
    pytest.importorskip("onnxruntime")
    from codesearch.embedding import Embedder

    return Embedder("minilm", export_progress=False)


@pytest.fixture(scope="session")
def minilm_int8_embedder(embed_cache_dir: Path, minilm_embedder):  # type: ignore[no-untyped-def]
    """The default model's int8 embedder (quantised and gated on first use)."""
    from codesearch.embedding import Embedder

    return Embedder("minilm", int8=True, export_progress=False)


@pytest.fixture(scope="session")
def minilm_sentence_transformer():  # type: ignore[no-untyped-def]
    """The reference: sentence-transformers (torch) on the same bundled MiniLM weights."""
    pytest.importorskip("torch")
    st = pytest.importorskip("sentence_transformers")
    from codesearch.embedding.catalogue import resolve_model

    spec = resolve_model("minilm")
    model = st.SentenceTransformer(str(spec.local_path()), device="cpu")
    model.max_seq_length = spec.max_length
    return model


def _embed_tiny_tokenizer(folder: Path, kind: str) -> None:
    """Save a fast tokenizer: MiniLM's WordPiece for BERT, a small byte-level BPE for XLM-R."""
    import shutil

    from codesearch.embedding.catalogue import resolve_model

    if kind == "bert":
        source = resolve_model("minilm").local_path()
        assert source is not None
        for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
            shutil.copyfile(source / name, folder / name)
        return
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    corpus = [p.read_text(encoding="utf-8") for p in sorted(PACKAGE.rglob("*.py"))]
    tokenizer.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=400, special_tokens=["<s>", "<pad>", "</s>", "<unk>"]))
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 2)])
    PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
        unk_token="<unk>", cls_token="<s>", sep_token="</s>",
    ).save_pretrained(folder)


def _embed_tiny_model(folder: Path, kind: str) -> Path:
    """A randomly initialised 2-layer model of the given architecture, saved with save_pretrained."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    folder.mkdir(parents=True)
    _embed_tiny_tokenizer(folder, kind)
    sizes = {
        "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
        "intermediate_size": 64, "initializer_range": 0.2,
    }
    if kind == "bert":
        config = transformers.BertConfig(vocab_size=30522, max_position_embeddings=128, **sizes)
        model_class = transformers.BertModel
    else:
        import json

        vocab = len(json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"])
        config = transformers.XLMRobertaConfig(
            vocab_size=vocab, max_position_embeddings=130, pad_token_id=1, bos_token_id=0,
            eos_token_id=2, type_vocab_size=1, **sizes,
        )
        model_class = transformers.XLMRobertaModel
    torch.manual_seed(0)
    model_class(config).eval().save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def embed_tiny_bert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random BERT (bge-small's architecture) with MiniLM's tokenizer, no network needed."""
    return _embed_tiny_model(tmp_path_factory.mktemp("tiny") / "bert", "bert")


@pytest.fixture(scope="session")
def embed_tiny_xlmr_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random XLM-RoBERTa (bge-m3's architecture) with a small BPE tokenizer."""
    return _embed_tiny_model(tmp_path_factory.mktemp("tiny") / "xlmr", "xlmr")
