"""The models file: named models and profiles, and a clear error naming file, place and reason."""

from __future__ import annotations

import tomllib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalledger.stages.config import ConfigError
from evalledger.stages.models_file import load_models_file, parse_models
from profiles_support import models_toml


def problems(path) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_models_file(path)
    return [f"{e['where']}: {e['reason']}" for e in caught.value.errors]


def test_named_models_and_profiles_are_read_with_defaults_merged_into_parameters(tmp_path):
    path = tmp_path / "models.toml"
    path.write_text(models_toml("http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1",
                                cross_audit="audit = {max_errors_per_phase = 5}"))
    models = load_models_file(path)
    assert sorted(models.models) == ["alpha", "beta"]
    beta = models.models["beta"]
    assert (beta.model, beta.base_url, beta.api_key_env) == ("beta-1", "http://127.0.0.1:2/v1", "BETA_KEY")
    assert beta.parameters == {"max_attempts": 2, "backoff_base_s": 0.01, "temperature": 0.2}
    cross = models.profiles["cross"]
    assert (cross.run.name, cross.verify.name, cross.audit) == ("alpha", "beta", {"max_errors_per_phase": 5})
    assert [p.name for p in models.select(["cross", "full", "cross"])] == ["cross", "full"]
    assert "BETA_KEY" not in str(beta.identity())   # what events record: no key, not even its variable


def test_every_problem_is_named_with_the_file_the_place_and_the_reason(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("""
[models.a]
model = "m-a"
base_url = "ftp://example"
parameters = {temperature = "hot", colour = 1}

[models.b]
base_url = "http://127.0.0.1:1/v1"

[profiles.p]
verify = "nobody"
run = "a"
audit = {max_facts = 0, made_up = 1}

[profiles.q]
run = "a"

[extra]
""")
    found = problems(path)
    assert found == [
        f"{path}: extra: unknown table (a models file has defaults, models, profiles and answering)",
        f"{path}: models.a.base_url: not an http(s) URL: 'ftp://example'",
        f"{path}: models.a.parameters.colour: unknown parameter (parameters: temperature, max_tokens, "
        "concurrency, max_attempts, max_invalid_replies, timeout_s, backoff_base_s, backoff_max_s, "
        "retry_after_max_s, response_format)",
        f"{path}: models.a.parameters.temperature: Input should be a valid number, unable to parse string as a number",
        f"{path}: models.b.model: missing: the model's name at its provider",
        f"{path}: profiles.p.run: model 'a' cannot be used: its own errors are listed above",
        f"{path}: profiles.p.verify: no model named 'nobody' (models defined: none)",
        f"{path}: profiles.p.audit.max_facts: Input should be greater than or equal to 1",
        f"{path}: profiles.p.audit.made_up: unknown audit parameter",
        f"{path}: profiles.q.verify: missing: the named model that judges",
        f"{path}: profiles.q.run: model 'a' cannot be used: its own errors are listed above",
    ]


def test_a_key_written_into_the_file_is_refused_and_never_echoed(tmp_path):
    path = tmp_path / "models.toml"
    path.write_text('[models.a]\nmodel = "m"\napi_key = "sk-live-123456789"\n'
                    '[models.b]\nmodel = "m"\napi_key_env = "sk-live-123456789"\n'
                    '[models.c]\nmodel = "m"\nparameters = {auth_token = "abc"}\n')
    found = problems(path)
    assert any("models.a.api_key: keys are never written in the models file" in p for p in found)
    assert any("models.b.api_key_env: must be the NAME of an environment variable" in p for p in found)
    assert any("models.c.parameters.auth_token: keys are never written" in p for p in found)
    assert not any("sk-live-123456789" in p or "abc" in p.split(": ", 2)[-1] for p in found)


def test_unreadable_non_toml_and_empty_files_say_so(tmp_path):
    assert problems(tmp_path / "absent.toml") == [
        f"{tmp_path / 'absent.toml'}: cannot read the models file: No such file or directory"]
    broken = tmp_path / "broken.toml"
    broken.write_text("[models.a\nmodel = 1\n")
    [message] = problems(broken)
    assert message.startswith(f"{broken}: not valid TOML: ") and "line 1" in message
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b'[models.a]\nmodel = "caf\xe9"\n')
    assert problems(latin) == [f"{latin}: line 2: not UTF-8 text (byte offset 23)"]
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    assert problems(empty) == [f"{empty}: models: no models defined (add a [models.NAME] table)"]


def test_an_unknown_profile_names_the_profiles_there_are(tmp_path):
    path = tmp_path / "models.toml"
    path.write_text(models_toml("http://127.0.0.1:1/v1"))
    with pytest.raises(ConfigError, match=r"no profile 'kimi' \(profiles defined: cross, full\)"):
        load_models_file(path).select(["full", "kimi"])


toml_scalars = st.one_of(st.integers(-5, 5), st.floats(allow_nan=False, allow_infinity=False), st.booleans(),
                         st.text(max_size=12))
toml_values = st.recursive(toml_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(
        ["model", "base_url", "api_key_env", "parameters", "run", "verify", "audit", "temperature",
         "max_tokens", "max_facts", "alpha", "x"]), inner, max_size=4)), max_leaves=12)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(["defaults", "models", "profiles", "other"]),
                       st.dictionaries(st.sampled_from(["alpha", "beta", "temperature", "full"]), toml_values,
                                       max_size=3), max_size=3))
def test_any_table_gives_a_models_file_or_a_config_error_and_nothing_else(data):
    try:
        models = parse_models(data, "generated.toml")
    except ConfigError as exc:
        assert exc.errors and all(e["where"].startswith("generated.toml: ") and e["reason"] for e in exc.errors)
        return
    for profile in models.profiles.values():
        assert profile.verify.name in models.models


def test_run_with_a_bad_or_missing_models_file_is_a_usage_error_naming_it(run_cli, home, tmp_path):
    missing = run_cli("run", "--profile", "full", home=home)
    assert missing.returncode == 2
    assert f"--profile needs a models file: pass --models FILE or write {home}/models.toml" in missing.stderr
    path = tmp_path / "models.toml"
    path.write_text(models_toml("http://127.0.0.1:1/v1"))
    unknown = run_cli("run", "--models", path, "--profiles", "full,kimi", home=home)
    assert unknown.returncode == 2
    assert f"{path}: no profile 'kimi' (profiles defined: cross, full)" in unknown.stderr
    path.write_text('[models.a]\nmodel = "m"\nbase_url = 3\n')
    bad = run_cli("run", "--models", path, "--profile", "x", home=home)
    assert bad.returncode == 2 and f"{path}: models.a.base_url: must be non-empty text" in bad.stderr
    path.write_text(models_toml("http://127.0.0.1:1/v1"))
    lonely = run_cli("run", "--models", path, home=home)
    assert lonely.returncode == 2 and "no --profile or --profiles" in lonely.stderr
    tomllib.loads(models_toml("http://127.0.0.1:1/v1"))   # the helper's file is valid TOML
