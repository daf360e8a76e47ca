"""VerificationConfig: spec names and defaults, layering, --set parsing, benchmark validation."""

import json

import pytest

from evalledger.stages.config import (
    ConfigError,
    VerificationConfig,
    benchmark_config_errors,
    effective_config,
    parse_set,
    run_layer,
)


def test_defaults_are_the_specs():
    cfg = VerificationConfig()
    assert cfg.deep_judgment_enabled is False
    assert cfg.deep_judgment_max_excerpts_per_attribute == 3
    assert cfg.deep_judgment_fuzzy_match_threshold == 0.80
    assert cfg.deep_judgment_excerpt_retry_attempts == 2
    assert cfg.deep_judgment_rubric_mode == "disabled"
    assert cfg.deep_judgment_rubric_max_excerpts_default == 7
    assert cfg.deep_judgment_rubric_fuzzy_match_threshold_default == 0.80
    assert cfg.deep_judgment_rubric_excerpt_retry_attempts_default == 2
    assert cfg.judge_backend == "offline"
    assert (cfg.audit.high_severe_min, cfg.audit.low_boundary_min, cfg.audit.max_facts) == (3, 2, 5)
    assert (cfg.claim_bands.fully_min, cfg.claim_bands.partially_min) == (8, 4)


def test_layers_later_win_and_nested_keys_merge(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('deep_judgment_fuzzy_match_threshold = 0.9\n[audit]\nhigh_severe_min = 4\n')
    layer = run_layer(path, ["audit.low_boundary_min=3", "deep_judgment_rubric_mode=enable_all"])
    cfg = effective_config({"deep_judgment_enabled": True, "deep_judgment_fuzzy_match_threshold": 0.7}, layer)
    assert cfg.deep_judgment_enabled is True
    assert cfg.deep_judgment_fuzzy_match_threshold == 0.9
    assert (cfg.audit.high_severe_min, cfg.audit.low_boundary_min, cfg.audit.max_facts) == (4, 3, 5)
    assert cfg.deep_judgment_rubric_mode == "enable_all"


def test_json_config_file_and_hash_changes_with_values(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"deep_judgment_enabled": True}))
    a = effective_config(None, run_layer(path))
    b = effective_config(None, run_layer(path, ["deep_judgment_enabled=false"]))
    assert a.hash() != b.hash() and a.hash() == effective_config({"deep_judgment_enabled": True}).hash()


def test_bad_keys_are_named():
    with pytest.raises(ConfigError) as err:
        run_layer(None, ["deep_judgment_fuzy_match_threshold=0.9"])
    assert "deep_judgment_fuzy_match_threshold" in str(err.value)
    with pytest.raises(ConfigError):
        run_layer(None, ["deep_judgment_fuzzy_match_threshold=1.5"])
    with pytest.raises(ConfigError):
        parse_set(["novalue"])


def test_benchmark_config_errors_name_where_and_refuse_judge_keys():
    assert benchmark_config_errors({"deep_judgment_enabled": True}) == []
    assert benchmark_config_errors(None) == []
    errors = benchmark_config_errors({"deep_judgment_max_excerpts_per_attribute": 0, "judge_backend": "openai"})
    wheres = {e["where"] for e in errors}
    assert "config.deep_judgment_max_excerpts_per_attribute" in wheres
    assert "config.judge_backend" in wheres
    assert benchmark_config_errors([1])[0]["where"] == "config"


def test_custom_rubric_config_uses_spec_keys():
    cfg = effective_config({"deep_judgment_rubric_mode": "custom", "deep_judgment_rubric_config": {
        "global": {"safety": {"max_excerpts": 5}},
        "question_specific": {"q1": {"safety": {"fuzzy_match_threshold": 0.9}}}}})
    assert cfg.deep_judgment_rubric_config.global_["safety"].max_excerpts == 5
    assert cfg.to_json()["deep_judgment_rubric_config"]["global"]["safety"]["enabled"] is True
    assert benchmark_config_errors({"deep_judgment_rubric_config": {"global": {"t": {"enabld": True}}}})


def test_search_tools_are_run_level_and_validated():
    errors = benchmark_config_errors({"deep_judgment_search_tool": "os:system"})
    assert [e["where"] for e in errors] == ["config.deep_judgment_search_tool"]
    # a benchmark's run-only keys never reach the effective config
    assert effective_config({"deep_judgment_search_tool": "tavily"}).deep_judgment_search_tool == "local"
    assert effective_config(None, run_layer(None, ["deep_judgment_search_tool=mypkg.search:find"])) \
        .deep_judgment_search_tool == "mypkg.search:find"
    with pytest.raises(ConfigError):
        run_layer(None, ["deep_judgment_rubric_search_tool=bing"])
