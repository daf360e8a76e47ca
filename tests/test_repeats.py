"""Repeated judging (issue 19, item 1) through the CLI: a stand-in judge that answers by the seed of
each repeat, so verdicts flip; the rules (majority, all, ties); the reports' pass rates, flips,
unstable flags, Fleiss' kappa (by hand and against statsmodels) and score spread; SIGKILL mid-run
then resume (each repeat judged once); replay of a K=3 home with no live call; K=1 unchanged."""

from __future__ import annotations

import collections
import json
import math
import os
import signal
import subprocess
import sys
import time
from fractions import Fraction

import numpy as np
import pytest
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from evalledger.cli.main import main
from evalledger.ledger.envelope import event_id
from evalledger.projections.repeats import group_repeats, spread
from evalledger.stages.config import effective_config
from evalledger.stages.repeats import decide, flips
from evalledger.testing.stand_in import StandIn, StandInThread
from stages_scripted import role_of, user_text
from stages_support import RESPONSE, events, home_with, outputs, template_benchmark

# Per response tag, whether its pair count is right on repeat (seed) 0, 1, 2.
PLAN = {"STEADY-PASS": (1, 1, 1), "MOSTLY-PASS": (1, 1, 0), "MOSTLY-FAIL": (0, 1, 0), "STEADY-FAIL": (0, 0, 0)}
RUBRIC = {"traits": [{"name": "clarity", "kind": "llm", "description": "Clear", "min_score": 1, "max_score": 5}]}


def by_seed(body):
    """The stand-in's reply_fn: the parse is right or wrong as PLAN says for the request's seed; the
    clarity score is 3 on even seeds, 4 on odd ones. A request without a seed is seed 0."""
    role, seed, text = role_of(body), body.get("seed", 0), user_text(body)
    tag = next(t for t in PLAN if t in text)
    if role == "parse":
        return {"pair_count": 23 if PLAN[tag][seed] else 22}
    if role == "score_trait":
        return {"score": 3 + seed % 2, "reasoning": f"seed {seed}"}
    raise AssertionError(role)


def benchmark():
    """Four questions answered by one model, each response tagged with its plan."""
    bench = template_benchmark(rubric=RUBRIC)
    question = bench["questions"][0]
    bench["questions"] = [{**question, "id": f"q{i}", "question": f"{question['question']} ({i})"}
                          for i in range(1, len(PLAN) + 1)]
    bench["responses"] = [{"question_id": f"q{i}", "model": "m", "text": f"{tag}: {RESPONSE}"}
                          for i, tag in enumerate(PLAN, 1)]
    return bench


def stand_in_env(stand_in) -> dict:
    return {"OPENAI_BASE_URL": stand_in.base_url, "OPENAI_API_KEY": "test"}


@pytest.fixture
def cli(monkeypatch, capsys):
    """The evalledger CLI in this process (its ``main``), for speed: (exit code, stdout, stderr)."""
    def run(home, *args, env=None):
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        code = main(["--home", str(home), *map(str, args)])
        out = capsys.readouterr()
        return code, out.out, out.err
    return run


def judge(cli, home, stand_in, *flags):
    code, out, err = cli(home, "run", "--judge", "openai", "--model", "stand-in", "--quiet", *flags,
                         env=stand_in_env(stand_in))
    assert code == 0, err + out


def verdicts_by_tag(home) -> dict[str, str]:
    """The case verdict of each tagged response."""
    opened = {e.data["case_id"]: e.data["response"] for e in events(home, "case.opened")}
    return {next(t for t in PLAN if t in opened[e.data["case_id"]]): e.data["verdict"]
            for e in events(home, "case.judged")}


def report_files(cli, home):
    code, _, err = cli(home, "report")
    assert code == 0, err
    reports = home / "reports"
    agg = json.loads((reports / "aggregate-stats.json").read_text())
    results = [json.loads(line) for line in (reports / "evaluations.jsonl").read_text().splitlines()]
    return agg, results, (reports / "chromosomes" / "report.md").read_text()


# --- units: the rule, flips, spread, Fleiss on a hand-worked table ---------------------------------

def test_the_rules_and_ties_decide_as_documented():
    assert decide(["pass", "pass", "fail"], "majority", "fail") == "pass"
    assert decide(["pass", "fail", "fail"], "majority", "pass") == "fail"
    assert decide(["pass", "fail"], "majority", "fail") == "fail"
    assert decide(["pass", "fail"], "majority", "pass") == "pass"
    assert decide(["pass", "pass", "fail"], "all", "pass") == "fail"
    assert decide(["pass", "pass"], "all", "fail") == "pass"
    assert flips(["pass", "fail", "pass"]) == 2 and flips(["pass", "pass", "fail"]) == 1 and flips(["fail"]) == 0


def test_spread_by_hand():
    # 3, 4, 3: mean 10/3, variance ((1/3)^2 * 2 + (2/3)^2) / 3 = 2/9, sd = sqrt(2)/3
    assert spread([3, 4, 3]) == {"n": 3, "mean": 3.3333, "sd": round(math.sqrt(2) / 3, 4), "range": 1.0}
    assert spread([True, False, None]) == {"n": 2, "mean": 0.5, "sd": 0.5, "range": 1.0}
    assert spread([None, None]) is None


def _state(case_id, verdicts):
    runs = {str(r): {"verdict": v, "sampling": {"seed": r}, "traits": {}, "claims": {}} for r, v in enumerate(verdicts)}
    return {"case_id": case_id, "question_id": case_id, "repeats": {
        "runs": runs, "decision": {"rule": "majority", "tie": "fail", "verdict": decide(verdicts, "majority", "fail")}}}


def test_fleiss_kappa_across_repeats_by_hand_and_against_statsmodels():
    # Subjects (cases) x categories (pass, fail), 3 raters (repeats): [3,0], [2,1], [1,2], [0,3], [3,0].
    # P_i = 1, 1/3, 1/3, 1, 1 -> P̄ = (11/3)/5 = 11/15; p_pass = 9/15, p_fail = 6/15 -> P_e = 117/225;
    # kappa = (11/15 - 117/225) / (1 - 117/225) = (48/225) / (108/225) = 4/9.
    plans = [("a", "ppp"), ("b", "ppf"), ("c", "fpf"), ("d", "fff"), ("e", "ppp")]
    cases = [_state(cid, ["pass" if x == "p" else "fail" for x in plan]) for cid, plan in plans]
    got = group_repeats(cases)
    assert got["fleiss_kappa"] == round(float(Fraction(4, 9)), 4) and got["kappa_cases"] == 5
    table = np.array([[3, 0], [2, 1], [1, 2], [0, 3], [3, 0]])
    assert got["fleiss_kappa"] == round(sm_fleiss_kappa(table), 4)
    assert got["unstable"] == 2 and got["unstable_share"] == 0.4
    assert [c["case_id"] for c in got["unstable_cases"]] == ["b", "c"]
    assert group_repeats([{"case_id": "x", "question_id": "x", "repeats": {}}]) is None


def test_the_repeat_keys_are_typed_bounded_and_left_out_of_the_hash_at_their_defaults(cli, home):
    assert effective_config(None, {"judge_repeats": 1}).hash() == effective_config().hash()
    assert "judge_repeats" not in effective_config().to_json()
    assert effective_config(None, {"judge_repeats": 3}).to_json()["judge_repeats"] == 3
    code, _, err = cli(home, "run", "--set", "judge_repeats=21")
    assert code == 2 and "judge_repeats" in err and "less than or equal to 20" in err
    code, _, err = cli(home, "run", "--set", "repeat_rule=most")
    assert code == 2 and "repeat_rule" in err
    code, _, err = cli(home, "run", "--repeats", "0")
    assert code == 2 and "--repeats takes 1 to 20" in err


# --- through the CLI ---------------------------------------------------------------------------

def test_repeats_flip_by_seed_and_the_reports_flag_the_unstable_cases_then_replay_reproduces_them(
        tmp_path, cli):
    home = home_with(tmp_path / "k3", ("b.json", benchmark()))
    with StandInThread(StandIn(reply_fn=by_seed)) as stand_in:
        judge(cli, home, stand_in, "--repeats", "3")
        sent = list(stand_in.requests)
    parse_seeds = collections.Counter(r["body"]["seed"] for r in sent if role_of(r["body"]) == "parse")
    assert parse_seeds == {0: 4, 1: 4, 2: 4}          # each repeat asked with its own seed
    assert verdicts_by_tag(home) == {"STEADY-PASS": "pass", "MOSTLY-PASS": "pass",
                                     "MOSTLY-FAIL": "fail", "STEADY-FAIL": "fail"}
    repeated = {e.data["case_id"]: e.data for e in events(home, "case.repeated")}
    assert sorted((d["verdicts"], d["flips"], d["unstable"]) for d in repeated.values()) == sorted([
        (["pass"] * 3, 0, False), (["pass", "pass", "fail"], 1, True),
        (["fail", "pass", "fail"], 2, True), (["fail"] * 3, 0, False)])
    assert {d["rule"] for d in repeated.values()} == {"majority"}
    keys = {e.data["case_id"]: [] for e in events(home, "repeat.judged")}
    for e in events(home, "repeat.judged"):
        keys[e.data["case_id"]].append((e.data["repeat"], e.data["sampling"]))
    assert all(sorted(v) == [(0, {"seed": 0}), (1, {"seed": 1}), (2, {"seed": 2})] for v in keys.values())
    for e in events(home, "repeat.judged"):   # deterministic ids: the repeat index is in the key
        assert e.id == event_id(e.stream, e.type, f"template:{e.data['case_id']}:repeat:repeat{e.data['repeat']}:1")
    for e in events(home, "field.verified"):  # repeat 0's evidence, keyed as repeat 0's
        assert e.id == event_id(e.stream, e.type, f"template:{e.data['case_id']}:verify:{e.data['field']}:repeat0:1")

    agg, results, report = report_files(cli, home)
    group = agg["benchmarks"][next(iter(agg["benchmarks"]))]["models"]["m"]["repeats"]
    assert group["unstable"] == 2 and group["unstable_share"] == 0.5 and group["repeat_counts"] == [3]
    # pass/fail counts per case: [3,0] [2,1] [1,2] [0,3]: P̄ = 2/3, P_e = 1/2, kappa = 1/3
    assert group["fleiss_kappa"] == 0.3333
    table = np.array([[r["repeats"]["passed"], 3 - r["repeats"]["passed"]] for r in results])
    assert group["fleiss_kappa"] == round(sm_fleiss_kappa(table), 4)
    assert group["trait_spread"]["clarity"] == {"scored": 4, "mean_sd": round(math.sqrt(2) / 3, 4),
                                                "max_range": 1.0, "varying": 4}
    rates = sorted(r["repeats"]["pass_rate"] for r in results)
    assert rates == [0.0, 0.3333, 0.6667, 1.0]
    assert all(r["repeats"]["trait_scores"]["clarity"]["scores"] == [3, 4, 3] for r in results)
    assert "### Repeated judging" in report and "Unstable cases:" in report
    unstable_rows = [line for line in report.splitlines() if line.startswith("| ") and "flips" not in line
                     and ("pass pass fail" in line or "fail pass fail" in line)]
    assert len(unstable_rows) == 2

    unstable_case = next(cid for cid, d in repeated.items() if d["flips"] == 2)
    code, out, _ = cli(home, "history", unstable_case)
    assert code == 0 and "verdicts=['fail', 'pass', 'fail'] flips=2 verdict='fail'" in out
    assert "repeat=1 sampling={'seed': 1} verdict='pass'" in out

    # Replay of the K=3 home: every repeat answered from the record, none live, the same verdicts.
    target = tmp_path / "replayed"
    code, out, err = cli(home, "replay", "--into", target, "--set", "judge_repeats=3")
    assert code == 0, err + out
    assert {e.data["backend"] for e in events(target, "judge.called")} == {"replay"}
    assert verdicts_by_tag(target) == verdicts_by_tag(home)
    code, out, _ = cli(home, "replay", "--into", tmp_path / "without-k")   # K=1 requests were never sent
    assert code == 1 and "replay them with --set judge_repeats=3" in out
    assert sorted(e.data["verdicts"] for e in events(target, "case.repeated")) == \
        sorted(d["verdicts"] for d in repeated.values())


def test_the_all_rule_and_a_tie_setting_decide_the_case_verdict(tmp_path, cli):
    all_rule = home_with(tmp_path / "all", ("b.json", benchmark()))
    ties = home_with(tmp_path / "tie", ("b.json", benchmark()))
    with StandInThread(StandIn(reply_fn=by_seed)) as stand_in:
        judge(cli, all_rule, stand_in, "--repeats", "3", "--set", "repeat_rule=all")
        assert {r["body"]["temperature"] for r in stand_in.requests} == {0.0}   # the judge's own
        judge(cli, ties, stand_in, "--repeats", "2", "--set", "repeat_tie=pass", "--set", "repeat_temperature=0.7")
        sent = stand_in.requests[4 * 3 * 2:]
    assert {(r["body"]["seed"], r["body"]["temperature"]) for r in sent} == {(0, 0.7), (1, 0.7)}
    assert {tuple(e.data["sampling"].items()) for e in events(ties, "repeat.judged")} == {
        (("seed", 0), ("temperature", 0.7)), (("seed", 1), ("temperature", 0.7))}
    assert verdicts_by_tag(all_rule) == {"STEADY-PASS": "pass", "MOSTLY-PASS": "fail",
                                         "MOSTLY-FAIL": "fail", "STEADY-FAIL": "fail"}
    [mostly_pass] = [e.data for e in events(all_rule, "case.judged") if e.data["repeats"]["passed"] == 2]
    assert "repeats: 2 of 3 passed; the all rule decides fail" in mostly_pass["reasons"]
    # Two repeats: MOSTLY-FAIL is fail then pass, a tie, which repeat_tie=pass makes a pass.
    assert verdicts_by_tag(ties) == {"STEADY-PASS": "pass", "MOSTLY-PASS": "pass",
                                     "MOSTLY-FAIL": "pass", "STEADY-FAIL": "fail"}
    assert {e.data["tie"] for e in events(ties, "case.repeated")} == {"pass"}


def test_sigkill_mid_run_then_resume_judges_each_repeat_exactly_once(tmp_path):
    home = home_with(tmp_path / "crashed", ("b.json", benchmark()))
    command = [sys.executable, "-m", "evalledger", "--home", str(home), "run", "--judge", "openai",
               "--model", "stand-in", "--concurrency", "1", "--repeats", "3"]
    with StandInThread(StandIn(delay=0.15, reply_fn=by_seed)) as stand_in:
        env = {**os.environ, **stand_in_env(stand_in)}
        process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        process.stderr.readline()               # the run has found its work (24 calls of 0.15 s, one at a time)
        time.sleep(1.0)
        still_running = process.poll() is None
        process.send_signal(signal.SIGKILL)
        process.wait(30)
        recorded_before_resume = len(events(home, "judge.called"))
        final = subprocess.run(command, env=env, capture_output=True, timeout=120)
        assert final.returncode == 0, final.stderr.decode()
    assert still_running and 0 < recorded_before_resume < 4 * 3 * 2   # killed mid-run, some calls kept
    repeats = collections.Counter((e.data["case_id"], e.data["repeat"]) for e in events(home, "repeat.judged"))
    assert len(repeats) == 4 * 3 and set(repeats.values()) == {1}
    paid = collections.Counter(e.data["request_hash"] for e in events(home, "judge.called")
                               if e.data["error"] is None and not e.data.get("source_event"))
    assert len(paid) == 4 * 3 * 2 and set(paid.values()) == {1}    # parse + clarity per repeat, each once
    got = outputs(home)
    assert len(got) == len(set(got))
    assert verdicts_by_tag(home) == {"STEADY-PASS": "pass", "MOSTLY-PASS": "pass",
                                     "MOSTLY-FAIL": "fail", "STEADY-FAIL": "fail"}


def test_one_repeat_sends_and_writes_exactly_what_a_run_without_repeats_does(tmp_path, cli):
    plain = home_with(tmp_path / "plain", ("b.json", benchmark()))
    once = home_with(tmp_path / "once", ("b.json", benchmark()))
    with StandInThread(StandIn(reply_fn=by_seed)) as stand_in:
        judge(cli, plain, stand_in)
        judge(cli, once, stand_in, "--repeats", "1")
        assert all("seed" not in r["body"] for r in stand_in.requests)
    assert outputs(once) == outputs(plain)
    def ids(home):   # every event but the run's own (run ids are random) has the same deterministic id
        return sorted(e.id for e in events(home) if not e.type.startswith("run."))
    assert ids(once) == ids(plain)
    assert events(once, "repeat.judged", "case.repeated") == []


def test_the_offline_judge_repeats_deterministically(tmp_path, cli):
    home = home_with(tmp_path / "offline", ("b.json", benchmark()))
    assert cli(home, "run", "--repeats", "3", "--quiet")[0] == 0
    decided = [e.data for e in events(home, "case.repeated")]
    assert len(decided) == 4 and not any(d["unstable"] for d in decided)
    hashes = collections.Counter(e.data["request_hash"] for e in events(home, "judge.called"))
    assert len(hashes) == 4 * 3 * 2      # the seed is in every request: three recorded calls per step

