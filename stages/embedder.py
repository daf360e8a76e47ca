"""The embedder port used by SemanticMatch: text similarity in [0, 1].

Three pieces:
- `Embedder`, the protocol a stage depends on: `similarity(a, b) -> float` in [0, 1].
- `VectorEmbedder`, the base a model-backed embedder plugs into: implement `embed(texts)`
  returning one vector per text; cosine similarity, clamping and a vector cache come with it.
  (A sentence-transformers embedder is a subclass whose `embed` calls `model.encode`.)
- `CharNgramEmbedder`, the deterministic offline default: cosine of character 3-gram counts
  over normalised text. It measures surface similarity, not meaning; it needs no model and
  gives the same number on every machine.

`get_default_embedder()` / `set_default_embedder()` hold the process-wide default that
SemanticMatch uses when no embedder is passed to its check.
"""

from __future__ import annotations

import math
import threading
import unicodedata
from collections import Counter, OrderedDict
from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class Embedder(Protocol):
    """Anything that scores how similar two texts are, from 0.0 (unrelated) to 1.0 (same).

    Implementations should also carry a short `name` (recorded with verdicts) and must be
    deterministic for a given model, so replaying a ledger gives the same verdicts.
    """

    def similarity(self, a: str, b: str) -> float:
        """Similarity of `a` and `b` in [0, 1]."""
        ...


def cosine(u: Sequence[float], v: Sequence[float]) -> float:
    """Cosine similarity of two dense vectors, clamped to [0, 1] (0.0 if either is zero)."""
    dot = math.fsum(x * y for x, y in zip(u, v, strict=True))
    norm = math.sqrt(math.fsum(x * x for x in u)) * math.sqrt(math.fsum(y * y for y in v))
    if norm == 0.0:
        return 0.0
    return min(1.0, max(0.0, dot / norm))


class VectorEmbedder:
    """Base for embedders that turn text into vectors (e.g. a sentence-transformers model).

    Subclasses implement `embed(texts) -> list of vectors` and set `name`. Similarity is the
    cosine of the two vectors, clamped to [0, 1] (negative cosine counts as unrelated).
    Vectors of recently seen texts are cached, since a benchmark compares the same ground
    truth against many responses.
    """

    name = "vector"

    def __init__(self, *, cache_size: int = 1024) -> None:
        self._cache: OrderedDict[str, tuple[float, ...]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> list[Sequence[float]]:
        """One vector per text, in order. Subclasses must implement this."""
        raise NotImplementedError

    def vectors(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        """Vectors for `texts`, computing only the ones not in the cache (in one batch)."""
        with self._lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            computed = self.embed(missing)
            if len(computed) != len(missing):
                raise ValueError(f"{self.name}: embed() returned {len(computed)} vectors "
                                 f"for {len(missing)} texts")
            with self._lock:
                for text, vector in zip(missing, computed):
                    self._cache[text] = tuple(float(x) for x in vector)
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        with self._lock:
            found = [self._cache.get(t) for t in texts]
        # A text evicted between the two locked sections is simply embedded again.
        return [v if v is not None else tuple(self.embed([t])[0]) for t, v in zip(texts, found)]

    def similarity(self, a: str, b: str) -> float:
        """Cosine similarity of the two texts' vectors, in [0, 1]."""
        u, v = self.vectors([a, b])
        return cosine(u, v)


def normalise_for_ngrams(text: str) -> str:
    """NFKC, case-folded, whitespace runs collapsed to one space, stripped."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


class CharNgramEmbedder:
    """Deterministic offline similarity: cosine of character n-gram counts (default n = 3).

    Texts are normalised (NFKC, case-folded, whitespace collapsed) and padded with one space
    at each end, so short words still yield n-grams and word boundaries count. Two texts that
    normalise to the same string score exactly 1.0; two empty texts score 1.0, one empty 0.0.
    """

    def __init__(self, n: int = 3) -> None:
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"n-gram size must be a positive integer, got {n!r}")
        self.n = n
        self.name = f"char-{n}gram-cosine"

    def _grams_of_normalised(self, text: str) -> Counter[str]:
        """Counts of the character n-grams of already normalised text, padded with spaces."""
        padded = f" {text} "
        n = self.n
        return Counter(padded[i : i + n] for i in range(max(1, len(padded) - n + 1)))

    def similarity(self, a: str, b: str) -> float:
        """Cosine similarity of the two n-gram count vectors, in [0, 1]."""
        left, right = normalise_for_ngrams(a), normalise_for_ngrams(b)
        if left == right:
            return 1.0
        if not left or not right:
            return 0.0
        ga, gb = self._grams_of_normalised(left), self._grams_of_normalised(right)
        dot = sum(count * gb[gram] for gram, count in ga.items() if gram in gb)
        norm = math.sqrt(sum(c * c for c in ga.values())) * math.sqrt(sum(c * c for c in gb.values()))
        return min(1.0, max(0.0, dot / norm))


_default_lock = threading.Lock()
_default: Embedder = CharNgramEmbedder()


def get_default_embedder() -> Embedder:
    """The embedder SemanticMatch uses when none is passed."""
    return _default


def set_default_embedder(embedder: Embedder) -> Embedder:
    """Make `embedder` the process default; returns the previous one (to restore it later)."""
    global _default
    if not callable(getattr(embedder, "similarity", None)):
        raise TypeError(f"an embedder needs a similarity(a, b) method, got {embedder!r}")
    with _default_lock:
        previous, _default = _default, embedder
    return previous
