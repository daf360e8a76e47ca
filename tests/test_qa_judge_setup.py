"""QA: a judge that cannot be set up (no model) is a usage error at start, for `run` and `watch`."""

from __future__ import annotations

NO_MODEL = {"OPENAI_MODEL": "", "OPENAI_API_KEY": "test", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}


def test_watch_with_an_openai_judge_and_no_model_exits_2_instead_of_failing_every_batch(home, run_cli):
    done = run_cli("watch", "--judge", "openai", home=home, env=NO_MODEL, timeout=30)
    assert done.returncode == 2 and "needs a model" in done.stderr
    assert "batch_failed" not in done.stderr


def test_run_with_nothing_pending_still_reports_the_bad_judge(home, run_cli):
    done = run_cli("run", "--set", "judge_backend=openai", home=home, env=NO_MODEL)
    assert done.returncode == 2 and "needs a model" in done.stderr
