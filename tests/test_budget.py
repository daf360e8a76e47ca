"""Budget caps: --max-calls and --max-cost stop a run cleanly, the cases it did not finish stay
pending (never stage.failed), and a rerun finishes them without paying twice for a call."""

from __future__ import annotations

from evalledger import ledger
from evalledger.stages.dispatcher import RunSettings, run_until_idle
from evalledger.stages.intake_status import case_states
from evalledger.testing.stand_in import StandIn, StandInThread
from profiles_support import read, scripted_judge, write

# The tag agrees with the expected score (the intake refuses a contradiction): a wrong line is major_factual.
LINES = [{"id": i, "tag": "clean" if i % 2 else "major_factual", "difficulty": "easy", "description": f"line {i}",
          "context_input": f"Revenue rose {i}% to $5.6 billion in 2023.",
          "model_output": f"Revenue rose {i}% in 2023." if i % 2 else f"Revenue fell {i}% in 2023, so it shrank.",
          "expected_credit_score": 5 if i % 2 else 2} for i in range(1, 7)]
PRICES = "[prices.judge-1]\ninput_per_million = 1000.0\noutput_per_million = 1000.0\n"


def audit_home(tmp_path, run_cli):
    home = tmp_path / "home"
    assert run_cli("init", home=home).returncode == 0
    assert run_cli("ingest", write(tmp_path / "lines.audit.jsonl", LINES), home=home).returncode == 0
    write(tmp_path / "prices.toml", PRICES)
    return home


def states(home) -> dict[str, str]:
    with ledger.open_ledger(home, readonly=True) as led:
        return case_states(led)


def openai_env(url: str) -> dict[str, str]:
    return {"OPENAI_BASE_URL": url, "OPENAI_MODEL": "judge-1"}


def test_max_calls_stops_the_run_with_cases_pending_and_a_rerun_finishes_without_paying_twice(tmp_path, run_cli):
    home = audit_home(tmp_path, run_cli)
    with StandInThread(StandIn(reply_fn=scripted_judge())) as server:
        capped = run_cli("run", "--quiet", "--judge", "openai", "--max-calls", "7", home=home,
                         env=openai_env(server.base_url))
        after_cap = len(server.requests)
        scored_after_cap = len(read(home, "credit.scored"))
        states_after_cap = states(home)
        finished = run_cli("run", "--quiet", "--judge", "openai", home=home, env=openai_env(server.base_url))
    assert capped.returncode == 0, capped.stdout + capped.stderr
    assert after_cap == 7                                   # exactly the cap: nothing sent past it
    lines = [line for line in capped.stdout.splitlines() if line.startswith("stopped:")]
    assert len(lines) == 1
    assert lines[0].startswith("stopped: the call budget is spent (--max-calls 7: 7 call(s) made); ")
    assert "case(s) left pending (run again, with a larger budget, to finish them)" in lines[0]
    left = int(lines[0].split("; ")[1].split()[0])
    assert 0 < left <= 6   # cases run concurrently: a capped run may finish none of them
    assert scored_after_cap == 6 - left
    assert sorted(states_after_cap.values()) == ["judged"] * (6 - left) + ["opened"] * left

    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert set(states(home).values()) == {"judged"}
    assert not read(home, "stage.failed")                   # the cap never failed a case
    assert len(read(home, "credit.scored")) == 6
    # Every audit case takes three calls; the calls the capped run made were reused, not re-sent.
    assert len(server.requests) == 6 * 3
    [stopped] = [e.data for e in read(home, "run.completed") if e.data.get("stopped")]
    assert stopped["model_calls"] == 7 and stopped["left_pending"] == left
    # A budget stop is clean: exit 0 above, on stdout, never the infrastructure stop's stderr line.
    assert stopped["stop"] == "budget" and stopped["pending"] == left
    assert "stopped early" not in capped.stderr


def test_under_a_budget_an_unreachable_judge_still_stops_with_exit_3(tmp_path, run_cli):
    home = audit_home(tmp_path, run_cli)
    done = run_cli("run", "--quiet", "--judge", "openai", "--max-calls", "50", home=home,
                   env=openai_env("http://127.0.0.1:9/v1"))
    assert done.returncode == 3, done.stdout + done.stderr
    assert "stopped early" in done.stderr and "cannot connect" in done.stderr
    assert not [line for line in done.stdout.splitlines() if line.startswith("stopped:")]
    [completed] = [e.data for e in read(home, "run.completed")]
    assert completed["stop"] == "judge_unavailable" and completed["pending"] == completed["left_pending"] == 6
    assert not read(home, "stage.failed")


def test_max_cost_stops_once_the_calls_cost_that_much(tmp_path, run_cli):
    home = audit_home(tmp_path, run_cli)
    with StandInThread(StandIn(reply_fn=scripted_judge())) as server:
        capped = run_cli("run", "--quiet", "--judge", "openai", "--config", tmp_path / "prices.toml",
                         "--max-cost", "0.2", "--concurrency", "1", home=home, env=openai_env(server.base_url))
    assert capped.returncode == 0, capped.stdout + capped.stderr
    [line] = [line for line in capped.stdout.splitlines() if line.startswith("stopped:")]
    assert line.startswith("stopped: the cost budget is spent (--max-cost 0.2 USD: ")
    costs = [e.data["cost_usd"] for e in read(home, "judge.called")]
    # At one call in flight the run stops at the first call that reached the cap: spent >= cap,
    # and without that last call it was below.
    assert sum(costs) >= 0.2 > sum(costs) - costs[-1]
    assert "opened" in set(states(home).values()) and not read(home, "stage.failed")


def test_max_cost_without_a_price_for_the_judge_is_a_usage_error(tmp_path, run_cli):
    home = audit_home(tmp_path, run_cli)
    result = run_cli("run", "--judge", "openai", "--max-cost", "1", home=home,
                     env=openai_env("http://127.0.0.1:9/v1"))
    assert result.returncode == 2
    assert "--max-cost needs a price for the judge model 'judge-1': set prices.<model> in --config" in result.stderr
    assert not read(home, "run.started")


def test_a_zero_call_budget_through_the_python_api_leaves_every_case_pending(tmp_path, run_cli):
    home = audit_home(tmp_path, run_cli)
    with StandInThread(StandIn(reply_fn=scripted_judge())) as server:
        settings = RunSettings(judge_backend="openai", judge_model="judge-1", max_calls=0,
                               judge_options={"base_url": server.base_url})
        with ledger.open_ledger(home) as led:
            summary = run_until_idle(led, settings)
    assert server.requests == []
    assert summary.judged == summary.failed == 0 and summary.left_pending == 6
    assert summary.stopped.startswith("the call budget is spent (--max-calls 0")
    # The same stop mechanism as an unavailable judge, told apart by ``stop``; both names of the count.
    assert summary.stop == "budget" and summary.pending == 6
    assert set(states(home).values()) == {"opened"}
