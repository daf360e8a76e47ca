"""``--config`` files that are not config files: devices, FIFOs, huge files, repeated keys; and
the upper bounds of every number in VerificationConfig."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalledger.stages.config import (
    MAX_CONFIG_BYTES, ConfigError, VerificationConfig, benchmark_config_errors, load_config_file, run_layer,
)


def usage_error(done) -> str:
    """The one error line of a usage error (exit 2, no traceback)."""
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    return line


@pytest.mark.parametrize("command", ["run", "watch"])
def test_config_from_dev_zero_is_refused_at_once(home, run_cli, command):
    extra = ["--once"] if command == "watch" else []
    line = usage_error(run_cli(command, *extra, "--config", "/dev/zero", home=home, timeout=30))
    assert "/dev/zero: not a regular file" in line


def test_config_from_a_fifo_or_a_folder_is_refused_without_waiting_for_a_writer(home, run_cli, tmp_path):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    assert "config.json: not a regular file" in usage_error(run_cli("run", "--config", fifo, home=home, timeout=30))
    folder = tmp_path / "folder.toml"
    folder.mkdir()
    assert "folder.toml: not a regular file" in usage_error(run_cli("run", "--config", folder, home=home))


def test_a_config_file_over_the_size_cap_is_refused(tmp_path):
    big = tmp_path / "big.json"
    big.write_text('{"deep_judgment_enabled": true' + " " * MAX_CONFIG_BYTES + "}")
    with pytest.raises(ConfigError, match=f"larger than {MAX_CONFIG_BYTES} bytes"):
        load_config_file(big)


def test_duplicate_keys_in_a_json_config_name_the_file_and_the_key(home, run_cli, tmp_path):
    path = tmp_path / "dup.json"
    path.write_text('{"deep_judgment_enabled": true, "audit": {"max_facts": 2, "max_facts": 9}}')
    line = usage_error(run_cli("run", "--config", path, home=home))
    assert "dup.json: $.audit.max_facts: duplicate key in the same object" in line
    top = tmp_path / "top.json"
    top.write_text('{"deep_judgment_enabled": true, "deep_judgment_enabled": false}')
    with pytest.raises(ConfigError, match=r"\$\.deep_judgment_enabled: duplicate key"):
        load_config_file(top)


def test_duplicate_keys_in_a_toml_config_are_refused(home, run_cli, tmp_path):
    path = tmp_path / "dup.toml"
    path.write_text("deep_judgment_enabled = true\ndeep_judgment_enabled = false\n")
    assert "dup.toml: not valid TOML" in usage_error(run_cli("run", "--config", path, home=home))


def test_duplicate_keys_in_a_set_value_are_refused():
    with pytest.raises(ConfigError, match=r"--set audit=.*\$\.max_facts: duplicate key"):
        run_layer(None, ['audit={"max_facts": 2, "max_facts": 3}'])
    assert run_layer(None, ["judge_model=plain text"]) == {"judge_model": "plain text"}


# --- upper bounds ---------------------------------------------------------------------------------

def number_fields(model) -> dict[str, tuple]:
    """Every int/float field of a config model with its (ge, le) bounds, nested models included."""
    out = {}
    for name, info in model.model_fields.items():
        if info.annotation in (int, float, int | None, float | None):
            ge = next((m.ge for m in info.metadata if getattr(m, "ge", None) is not None), None)
            le = next((m.le for m in info.metadata if getattr(m, "le", None) is not None), None)
            out[name] = (ge, le)
    return out


def test_every_number_in_the_config_has_an_upper_bound():
    from evalledger.stages.config import AuditStrategy, ClaimScoreBands, DeepJudgmentTraitConfig
    for model in (VerificationConfig, AuditStrategy, ClaimScoreBands, DeepJudgmentTraitConfig):
        fields = number_fields(model)
        assert fields, model
        unbounded = [name for name, (_, le) in fields.items() if le is None]
        assert unbounded == [], f"{model.__name__}: {unbounded}"


def test_the_issue_value_is_refused_in_a_benchmark_and_on_the_command_line(home, run_cli):
    errors = benchmark_config_errors({"deep_judgment_excerpt_retry_attempts": 1_000_000_000})
    assert errors and errors[0]["where"] == "config.deep_judgment_excerpt_retry_attempts"
    assert "less than or equal to 20" in errors[0]["reason"]
    line = usage_error(run_cli("run", "--set", "deep_judgment_excerpt_retry_attempts=1000000000", home=home))
    assert "deep_judgment_excerpt_retry_attempts" in line and "less than or equal to 20" in line


@given(st.sampled_from(sorted(number_fields(VerificationConfig))), st.integers(min_value=0, max_value=10**12))
def test_a_value_is_accepted_exactly_when_it_lies_within_the_documented_bounds(name, value):
    ge, le = number_fields(VerificationConfig)[name]
    inside = (ge is None or value >= ge) and value <= le
    assert (benchmark_config_errors({name: value}) == []) == inside


def test_the_bounds_are_documented_in_docs_stages():
    from pathlib import Path
    text = (Path(__file__).resolve().parents[1] / "docs" / "stages.md").read_text()
    for name, (_, le) in number_fields(VerificationConfig).items():
        row = next((line for line in text.splitlines() if line.startswith(f"| `{name}`")), None)
        assert row is not None and str(le) in row.replace(",", ""), (name, le, row)


def test_config_json_numbers_nan_and_huge_integers_are_named(tmp_path):
    path = tmp_path / "nan.json"
    path.write_text(json.dumps({"deep_judgment_fuzzy_match_threshold": float("nan")}))
    with pytest.raises(ConfigError, match="NaN"):
        load_config_file(path)
