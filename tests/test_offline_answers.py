"""The offline parser takes the answer-like value: the result after '=', the named subject."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest

from evalledger import ledger
from evalledger.stages.judge.offline.answer import answer_name, answer_number

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("sentence, question, value", [
    ("20 x 69 = 1380.", "What is 20 times 69?", 1380),
    ("40 - 59 gives -19.", "What is 40 minus 59?", -19),
    ("If you multiply 12 and 7 you get 84.", "What is 12 times 7?", 84),
    ("It is 30 (22 + 9).", "What is 22 plus 9?", 30),
    ("The half-life is about 48 hours.", "What is the half-life in hours?", None),  # left to the general rules
])
def test_answer_number(sentence, question, value):
    assert answer_number(sentence, question) == value


@pytest.mark.parametrize("sentence, question, value", [
    ("Jupiter is the largest planet.", "Which planet is the largest?", "Jupiter"),
    ("The capital of Canada is Ottawa.", "What is the capital of Canada?", "Ottawa"),
    ("Mercury - it is the planet closest to the Sun.", "Which planet is closest to the Sun?", "Mercury"),
    ("Definitely Saturn; it has the rings.", "Which planet has rings?", "Saturn"),
    ("Titan.", "What is the largest moon of Saturn?", "Titan"),
    ("The antidote is N-acetylcysteine (NAC).", "What is the antidote?", "N-acetylcysteine"),
])
def test_answer_name(sentence, question, value):
    assert answer_name(sentence, question) == value


def test_arithmetic_and_named_answers_are_judged_right_through_the_cli(tmp_path, run_cli):
    benchmark = {
        "format": "evalledger/benchmark@1", "name": "first-day-answers",
        "questions": [
            {"id": "m1", "question": "What is 20 times 69?", "template": {"fields": [
                {"name": "result", "type": "int", "description": "The result", "ground_truth": 1380,
                 "verify_with": {"type": "NumericTolerance", "tolerance": 0, "mode": "absolute"}}]}},
            {"id": "p1", "question": "Which planet is the biggest?", "template": {"fields": [
                {"name": "planet", "type": "str", "description": "The planet named", "ground_truth": "Jupiter",
                 "verify_with": {"type": "ExactMatch"}}]}}],
        "responses": [{"question_id": "m1", "model": "m", "text": "20 x 69 = 1380."},
                      {"question_id": "p1", "model": "m", "text": "Jupiter is the largest planet."}],
    }
    path = tmp_path / "answers.benchmark.json"
    path.write_text(json.dumps(benchmark))
    home = tmp_path / "h"
    run_cli("init", home=home)
    assert run_cli("ingest", path, home=home).returncode == 0
    done = run_cli("run", home=home)
    assert done.returncode == 0, done.stderr
    with ledger.open_ledger(home, readonly=True) as led:
        verdicts = [e.data["verdict"] for e in led.read(types=["case.judged"])]
        values = sorted(str(e.data.get("extracted")) for e in led.read(types=["field.verified"]))
    assert verdicts == ["pass", "pass"] and values == ["1380", "Jupiter"]


def test_the_held_out_figure_in_the_readme_is_what_the_script_measures(capsys):
    script = REPO / "benchmarks" / "heldout" / "evaluate_heldout.py"
    runpy.run_path(str(script), run_name="__not_main__")["main"]([])
    figure = capsys.readouterr().out.splitlines()[0].split(": ")[1].split(" ")[0]
    assert figure in (REPO / "README.md").read_text()


def test_run_with_the_offline_judge_says_it_is_a_heuristic(tmp_path, run_cli):
    home = tmp_path / "h"
    run_cli("init", home=home)
    run_cli("ingest", REPO / "benchmarks" / "samples" / "verifyfast-cases.audit.jsonl", home=home)
    done = run_cli("run", home=home)
    assert done.returncode == 0
    assert done.stdout.splitlines()[0].startswith("judge: offline, a heuristic baseline, not a language model")


def test_run_with_a_new_config_on_a_judged_home_points_to_replay(tmp_path, run_cli):
    home = tmp_path / "h"
    run_cli("init", home=home)
    run_cli("ingest", REPO / "benchmarks" / "samples" / "verifyfast-cases.audit.jsonl", home=home)
    assert run_cli("run", home=home).returncode == 0
    again = run_cli("run", "--set", "audit.max_facts=3", home=home)
    assert again.returncode == 0
    assert "nothing pending" in again.stdout and "evalledger replay --into DIR" in again.stdout
    plain = run_cli("run", home=home)
    assert "replay" not in plain.stdout
