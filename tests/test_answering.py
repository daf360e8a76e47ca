"""Answering models: questions brought with their ground truth alone are answered by a profile's
run model on a real local server, each answer recorded as a judge call, judged as if dropped in,
then a rerun and a replay need no server at all."""

from __future__ import annotations

import copy

from evalledger.testing.stand_in import StandIn, StandInThread
from profiles_support import ANSWER, KEYS_ENV, models_toml, read, scripted_judge, write
from stages_scripted import role_of
from stages_support import RESPONSE, template_benchmark


def two_questions(responses: list[dict]) -> dict:
    """The chromosome benchmark with a second question (q2) asking the same in other words."""
    bench = template_benchmark(responses=responses)
    second = copy.deepcopy(bench["questions"][0])
    second.update(id="q2", question="How many chromosome pairs are in a human body cell?")
    bench["questions"].append(second)
    return bench


def questions_home(tmp_path, run_cli, url: str, responses: list[dict]):
    home = tmp_path / "home"
    assert run_cli("init", home=home).returncode == 0
    assert run_cli("ingest", write(tmp_path / "questions.json", two_questions(responses)), home=home).returncode == 0
    write(home / "models.toml", models_toml(url))
    return home


def test_questions_alone_are_answered_judged_then_rerun_and_replayed_with_no_server(tmp_path, run_cli):
    with StandInThread(StandIn(reply_fn=scripted_judge())) as server:
        home = questions_home(tmp_path, run_cli, server.base_url, responses=[])
        ran = run_cli("run", "--quiet", "--profile", "full", home=home, env=KEYS_ENV)
        asked = [role_of(r["body"]) for r in server.requests]
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert sorted(asked) == ["answer", "answer", "parse", "parse"]

    calls = {e.id: e for e in read(home, "judge.called") if e.data["role"] == "answer"}
    opened = [e for e in read(home, "case.opened")]
    assert sorted(e.data["question_id"] for e in opened) == ["q1", "q2"]
    for event in opened:
        d = event.data
        call = calls[d["answered_by"]["event"]]
        assert call.stream == event.stream and call.seq < event.seq     # recorded on the case it opened
        assert call.data["reply"] == {"answer": ANSWER} and d["response"] == ANSWER
        assert (d["model"], d["profile"], d["answered_by"]["model"]) == ("alpha", "full", "alpha-1")
        assert d["question"]["template"]["fields"][0]["ground_truth"] == 23
    assert sorted(e.data["verdict"] for e in read(home, "case.judged")) == ["pass", "pass"]

    # No server from here on: the answers and the judgments come from the ledger.
    rerun = run_cli("run", "--quiet", "--profile", "full", home=home, env=KEYS_ENV)
    assert rerun.returncode == 0 and rerun.stdout.strip() == "nothing pending"
    replayed = tmp_path / "replayed"
    replay = run_cli("replay", "--into", replayed, "--quiet", home=home)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "2 case(s) re-run: 2 judged, 0 failed; 0 live judge call(s)" in replay.stdout
    assert sorted(e.data["response"] for e in read(replayed, "case.opened")) == [ANSWER, ANSWER]
    assert sorted(e.data["verdict"] for e in read(replayed, "case.judged")) == ["pass", "pass"]


def test_only_questions_without_a_response_are_answered_and_an_answer_is_paid_once(tmp_path, run_cli):
    dropped = [{"question_id": "q2", "model": "model-a", "text": RESPONSE}]
    with StandInThread(StandIn(reply_fn=scripted_judge())) as server:
        home = questions_home(tmp_path, run_cli, server.base_url, responses=dropped)
        ran = run_cli("run", "--quiet", "--profiles", "full,cross", home=home, env=KEYS_ENV)
        answers = [r for r in server.requests if role_of(r["body"]) == "answer"]
    assert ran.returncode == 0, ran.stdout + ran.stderr
    # Both profiles answer q1 with alpha: the same request, sent once and reused for the second.
    assert len(answers) == 1 and "human somatic cell" in answers[0]["body"]["messages"][1]["content"]
    answered = [e.data for e in read(home, "case.opened") if e.data.get("answered_by")]
    assert sorted((d["question_id"], d["profile"]) for d in answered) == [("q1", "cross"), ("q1", "full")]
    derived = [e.data for e in read(home, "case.opened") if e.data.get("origin_case")]
    assert sorted((d["question_id"], d["profile"], d["model"]) for d in derived) == [
        ("q2", "cross", "model-a"), ("q2", "full", "model-a")]


def test_a_failed_answer_opens_no_case_says_so_and_the_next_run_answers(tmp_path, run_cli):
    with StandInThread(StandIn(reply_fn=scripted_judge(answer="   "))) as server:
        home = questions_home(tmp_path, run_cli, server.base_url, responses=[])
        failed = run_cli("run", "--quiet", "--profile", "full", home=home, env=KEYS_ENV)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "failed answer (full, question q1)" in failed.stdout and "the answer is empty" in failed.stdout
    assert not read(home, "case.opened") and not read(home, "stage.failed")
    with StandInThread(StandIn(reply_fn=scripted_judge())) as server:
        write(home / "models.toml", models_toml(server.base_url))
        fixed = run_cli("run", "--quiet", "--profile", "full", home=home, env=KEYS_ENV)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert sorted(e.data["verdict"] for e in read(home, "case.judged")) == ["pass", "pass"]


def test_a_call_budget_spent_while_answering_leaves_the_rest_for_the_next_run(tmp_path, run_cli):
    with StandInThread(StandIn(reply_fn=scripted_judge())) as server:
        home = questions_home(tmp_path, run_cli, server.base_url, responses=[])
        capped = run_cli("run", "--quiet", "--profile", "full", "--max-calls", "1", home=home, env=KEYS_ENV)
        asked_when_capped = [role_of(r["body"]) for r in server.requests]
        opened_when_capped = read(home, "case.opened")
        finished = run_cli("run", "--quiet", "--profile", "full", home=home, env=KEYS_ENV)
        asked = [role_of(r["body"]) for r in server.requests]
    assert capped.returncode == 0, capped.stdout + capped.stderr
    assert asked_when_capped == ["answer"]
    assert "stopped: the call budget is spent (--max-calls 1: 1 call(s) made); 1 case(s) left pending" in capped.stdout
    [first] = opened_when_capped   # one answer came in and opened its case; the other was never asked
    assert first.data["answered_by"] and not read(home, "stage.failed")
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert sorted(asked) == ["answer", "answer", "parse", "parse"]   # nothing asked twice
    assert sorted(e.data["verdict"] for e in read(home, "case.judged")) == ["pass", "pass"]
    assert all(e.meta.get("profile") == "full" for e in read(home, "judge.called", "case.judged"))


def test_every_instance_of_the_answer_schema_passes_the_answer_checks_and_strict_mode():
    import json

    from hypothesis import HealthCheck, assume, given, settings
    from jsonschema import Draft202012Validator

    from evalledger.stages.judge import role
    from evalledger.testing.schema_instances import instances
    from evalledger.testing.strict_schema import strict_mode_problems

    spec = role("answer")
    request = spec.request(question="How many pairs of chromosomes does a human cell have?")
    schema = spec.reply_schema(request)
    assert strict_mode_problems(schema) == []
    validator = Draft202012Validator(schema)

    @settings(max_examples=50, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(instances(schema))
    def passes(instance):
        assume(validator.is_valid(instance))   # the generator does not read "pattern"; jsonschema does
        assert spec.validate_reply(request, json.loads(json.dumps(instance))).answer.strip()

    passes()
    for blank in ("", "   ", "\n"):
        assert not validator.is_valid({"answer": blank})


def test_answering_models_of_the_models_file_answer_in_a_run_without_profiles(tmp_path, run_cli):
    with StandInThread(StandIn(reply_fn=scripted_judge())) as server:
        home = questions_home(tmp_path, run_cli, server.base_url,
                              responses=[{"question_id": "q2", "model": "model-a", "text": RESPONSE}])
        write(home / "models.toml", 'answering = ["alpha"]\n' + models_toml(server.base_url))
        env = {**KEYS_ENV, "OPENAI_BASE_URL": server.base_url, "OPENAI_MODEL": "judge-1"}
        ran = run_cli("run", "--quiet", "--judge", "openai", home=home, env=env)
        asked = [(role_of(r["body"]), r["body"]["model"]) for r in server.requests]
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert sorted(asked) == [("answer", "alpha-1"), ("parse", "judge-1"), ("parse", "judge-1")]
    opened = {e.data["question_id"]: e.data for e in read(home, "case.opened")}
    assert "profile" not in opened["q1"] and opened["q1"]["answered_by"]["name"] == "alpha"
    assert opened["q1"]["response"] == ANSWER and opened["q1"]["model"] == "alpha"
    assert "answered_by" not in opened["q2"]                     # dropped in: not answered again
    assert sorted(e.data["verdict"] for e in read(home, "case.judged")) == ["pass", "pass"]
    [started] = [e.data for e in read(home, "run.started")]
    assert started["answering"][0]["model"] == "alpha-1"
    bad = tmp_path / "bad.toml"
    write(bad, 'answering = ["nobody"]\n' + models_toml("http://127.0.0.1:1/v1"))
    refused = run_cli("run", "--models", bad, home=home)
    assert refused.returncode == 2
    assert f"{bad}: answering[0]: no model named 'nobody' (models defined: alpha, beta)" in refused.stderr


def test_an_unreachable_answering_model_stops_the_run_with_exit_3_and_fails_no_question(tmp_path, run_cli):
    home = questions_home(tmp_path, run_cli, "http://127.0.0.1:9/v1", responses=[])
    stopped = run_cli("run", "--quiet", "--profile", "full", "--max-calls", "10", home=home, env=KEYS_ENV)
    assert stopped.returncode == 3, stopped.stdout + stopped.stderr
    assert "stopped early" in stopped.stderr and "cannot connect" in stopped.stderr
    assert "answering failed" not in stopped.stdout   # not a failure of the question: asked again later
    [completed] = [e.data for e in read(home, "run.completed")]
    assert completed["stop"] == "judge_unavailable" and "cannot connect" in completed["stopped"]
    assert not read(home, "case.opened") and not read(home, "stage.failed")
    with StandInThread(StandIn(reply_fn=scripted_judge())) as server:
        write(home / "models.toml", models_toml(server.base_url))
        finished = run_cli("run", "--quiet", "--profile", "full", home=home, env=KEYS_ENV)
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert sorted(e.data["verdict"] for e in read(home, "case.judged")) == ["pass", "pass"]
