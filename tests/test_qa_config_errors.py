"""QA: a bad run configuration is a usage error that names the file or option and the key."""

from __future__ import annotations


def test_an_unknown_key_in_a_config_file_names_the_file_and_the_key(home, tmp_path, run_cli):
    config = tmp_path / "run.toml"
    config.write_text("deep_judgment_enabeld = true\n")
    done = run_cli("run", "--config", config, home=home)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{config}: deep_judgment_enabeld: unknown key" in done.stderr


def test_an_unknown_key_given_with_set_is_named_as_set(home, run_cli):
    done = run_cli("run", "--set", "audit.high_severe_mn=4", home=home)
    assert done.returncode == 2
    assert "--set audit.high_severe_mn: unknown key" in done.stderr


def test_set_may_correct_a_value_from_the_config_file(home, tmp_path, run_cli):
    config = tmp_path / "run.toml"
    config.write_text("deep_judgment_fuzzy_match_threshold = 5\n")
    bad = run_cli("run", "--config", config, home=home)
    assert bad.returncode == 2 and f"{config}: deep_judgment_fuzzy_match_threshold" in bad.stderr
    fixed = run_cli("run", "--quiet", "--config", config, "--set", "deep_judgment_fuzzy_match_threshold=0.5",
                    home=home)
    assert fixed.returncode == 0 and "nothing pending" in fixed.stdout
