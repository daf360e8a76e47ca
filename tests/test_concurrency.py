"""``--concurrency N`` means judge calls in flight, through the CLI against the real stand-in.

- calls of one case that do not depend on each other go out together: a rubric's traits, an
  audit's fact and logic checks (the stand-in counts the requests it answers at once);
- enough cases are in flight to keep N calls busy (more than the 16 cases of before), and never
  more than N calls at once;
- the events stay deterministic: the same home judged at concurrency 1 and 32 gives the same case
  outputs and byte-identical reports, and its replay judges every case from the record;
- ``CaseWork.together`` appends its steps' outputs in step order whatever finishes first, and
  raises the same error whatever the timing.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import shutil
from pathlib import Path

import pytest

from evalledger import ledger
from evalledger.stages.casework import CaseWork
from evalledger.stages.config import effective_config
from evalledger.stages.judge import JudgeCallFailed
from evalledger.stages.judge.budget import BudgetExhausted
from evalledger.testing.schema_instances import random_instance
from evalledger.testing.stand_in import StandIn, StandInThread, requested_schema
from stages_support import home_with, outputs, template_benchmark, write_json, write_jsonl
from watch_support import report_texts

TRAITS = 4


def rubric(traits: int) -> dict:
    """A rubric of ``traits`` independent standard LLM traits."""
    return {"traits": [{"name": f"trait{i}", "description": f"Quality {i} of the answer", "kind": "llm",
                        "min_score": 1, "max_score": 5} for i in range(traits)]}


def audit_rows(cases: int) -> list[dict]:
    """``cases`` distinct audit cases."""
    return [{"id": i, "tag": "clean", "difficulty": "easy", "description": f"case {i}",
             "context_input": f"Revenue rose {i}% in quarter {i}.", "model_output": f"Revenue rose {i}%.",
             "expected_credit_score": 5} for i in range(cases)]


def per_request_reply(body: dict) -> object:
    """An arbitrary instance of the request's schema, seeded by the request itself: the same
    request gets the same answer whatever order the requests arrive in."""
    schema = requested_schema(body)
    seed = hashlib.sha256(json.dumps(body.get("messages"), sort_keys=True).encode()).digest()
    return random_instance(schema, random.Random(seed)) if schema else {}


def ingest(run_cli, home: Path, tmp_path: Path, *files: tuple[str, object]) -> None:
    """Write each (name, content) into ``tmp_path`` and ingest them all."""
    paths = []
    for name, content in files:
        path = tmp_path / name
        write_jsonl(path, content) if name.endswith(".jsonl") else write_json(path, content)
        paths.append(path)
    done = run_cli("ingest", *paths, home=home)
    assert done.returncode == 0, done.stdout + done.stderr


def run_openai(run_cli, home: Path, stand_in: StandIn, concurrency: int, *extra: str):
    """``evalledger run --judge openai --concurrency N`` against ``stand_in``."""
    env = {"OPENAI_BASE_URL": stand_in.base_url, "OPENAI_MODEL": "stand-in", "OPENAI_API_KEY": "x"}
    done = run_cli("run", "--judge", "openai", "--quiet", "--concurrency", str(concurrency), *extra,
                   home=home, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def events(home: Path, type: str) -> list[ledger.Event]:
    with ledger.open_ledger(home, readonly=True) as led:
        return list(led.read(types=[type]))


def by_case(found: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """Stage outputs grouped by case stream, each case's in ledger order (a stable sort)."""
    return sorted(found, key=lambda output: output[0])


def test_one_cases_rubric_traits_are_asked_at_once_and_scored_in_rubric_order(run_cli, home, tmp_path):
    ingest(run_cli, home, tmp_path, ("b.json", template_benchmark(rubric=rubric(TRAITS))))
    with StandInThread(StandIn(delay=0.3)) as stand_in:
        run_openai(run_cli, home, stand_in, TRAITS)
        peak = stand_in.max_in_flight
    # one case: every trait's call was out at the same time (before: one after another)
    assert peak == TRAITS
    scored = events(home, "trait.scored")
    assert [e.data["trait"] for e in scored] == [f"trait{i}" for i in range(TRAITS)]
    assert [e.seq for e in scored] == sorted(e.seq for e in scored)


def test_enough_cases_run_to_keep_the_calls_busy_and_never_more_calls_than_asked(run_cli, home, tmp_path):
    # 40 audit cases: their 40 decompose calls can all be out at once at --concurrency 64. With
    # 16 cases in flight (before) at most 32 calls were (two checks a case); at 8 never more than 8.
    ingest(run_cli, home, tmp_path, ("cases.audit.jsonl", audit_rows(40)))
    second = ledger.init_home(tmp_path / "second")
    ingest(run_cli, second, tmp_path, ("few.audit.jsonl", audit_rows(12)))
    with StandInThread(StandIn(delay=0.2)) as stand_in:
        run_openai(run_cli, home, stand_in, 64)
        wide = stand_in.max_in_flight
        stand_in.max_in_flight = 0
        run_openai(run_cli, second, stand_in, 8)
        narrow = stand_in.max_in_flight
    assert wide > 32 and narrow == 8
    assert len(events(home, "credit.scored")) == 40 and len(events(second, "credit.scored")) == 12
    assert not events(home, "stage.failed") and not events(second, "stage.failed")


def test_audit_checks_of_one_case_go_out_together(run_cli, home, tmp_path):
    ingest(run_cli, home, tmp_path, ("one.audit.jsonl", audit_rows(1)))
    with StandInThread(StandIn(delay=0.2)) as stand_in:
        run_openai(run_cli, home, stand_in, 8)
        assert stand_in.max_in_flight == 2   # check_facts and check_logic
    types = [e.type for e in events(home, "facts.checked") + events(home, "logic.checked")]
    assert types == ["facts.checked", "logic.checked"]
    # each check's call records its place: after decompose (place 0), block 1, steps 0 and 1
    places = {e.data["role"]: e.data.get("order") for e in events(home, "judge.called")}
    assert places == {"decompose": None, "check_facts": [1, 0, 0], "check_logic": [1, 1, 0]}


def test_the_same_home_judged_at_concurrency_1_and_32_gives_identical_outputs_and_reports(run_cli, tmp_path):
    deep = {"deep_judgment_enabled": True, "deep_judgment_rubric_mode": "enable_all"}
    responses = [{"question_id": "q1", "model": f"model-{m}", "text": f"There are {20 + m} pairs [1]."}
                 for m in range(3)]
    metric = {"name": "covers", "kind": "metric", "tp_instructions": ["names the number", "cites"],
              "tn_instructions": ["rambles"], "metrics": ["f1"]}
    source = ledger.init_home(tmp_path / "source")
    ingest(run_cli, source, tmp_path,
           ("deep.json", template_benchmark(name="deep", config=deep, responses=responses, rubric=rubric(3))),
           ("plain.json", template_benchmark(name="plain", responses=responses,
                                            rubric={"traits": rubric(3)["traits"] + [metric]})),
           ("cases.audit.jsonl", audit_rows(6)))
    homes = {c: shutil.copytree(source, tmp_path / f"at{c}") for c in (1, 32)}
    with StandInThread(StandIn(delay=0.01, reply_fn=per_request_reply)) as stand_in:
        for concurrency, home in homes.items():
            run_openai(run_cli, home, stand_in, concurrency)
        assert stand_in.max_in_flight > 1
    # cases commit as they finish, so only each case's own events keep their order
    assert by_case(outputs(homes[1])) == by_case(outputs(homes[32]))
    assert len(events(homes[1], "trait.scored")) > 6 and events(homes[1], "credit.scored")
    # the traits' calls went out together, and each says where it came from
    placed = [e.data["order"] for e in events(homes[32], "judge.called") if e.data["role"] == "score_trait"]
    assert len(placed) > 6 and all(placed)
    reports = {}
    for concurrency, home in homes.items():
        assert run_cli("report", home=home).returncode == 0
        reports[concurrency] = report_texts(home)
    # Every report, byte for byte, but for the line naming the ledger head: the judge traffic
    # (latencies, the limit each call was sent under) is recorded too, so the heads differ.
    assert len(reports[1]) > 5 and reports[1] == reports[32]
    # the replay answers every call from the record, the traits' calls made at once included
    replayed = run_cli("replay", "--into", tmp_path / "replayed", home=homes[32])
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    cases = [output for output in outputs(tmp_path / "replayed") if output[0].startswith("case:")]
    assert by_case(cases) == by_case(outputs(homes[32]))


# --- CaseWork.together, on a real case of a real ledger ----------------------------------------------

@pytest.fixture
def work(tmp_path) -> CaseWork:
    home = home_with(tmp_path, ("b.json", template_benchmark()))
    [opened] = events(home, "case.opened")
    config = effective_config(None, {})
    return CaseWork(opened, "template", config, config.hash(), "run1", judge=None)


def step(name: str, wait: float, error: BaseException | None = None):
    async def run(branch: CaseWork) -> str:
        await asyncio.sleep(wait)
        branch.emit("trait.scored", {"trait": name}, step="trait", part=name)
        if error is not None:
            raise error
        return name
    return run


def test_together_appends_in_step_order_whatever_finishes_first(work):
    names = asyncio.run(work.together([step("slow", 0.05), step("mid", 0.02), step("fast", 0.0)]))
    assert names == ["slow", "mid", "fast"]
    assert [e.data["trait"] for e in work.outputs] == ["slow", "mid", "fast"]
    assert [e.key for e in work.outputs] == [f"template:{work.case_id}:trait:{n}:1" for n in ("slow", "mid", "fast")]


def test_together_waits_for_every_step_and_raises_a_stopping_error_first(work):
    finished = []

    async def late(branch: CaseWork) -> None:
        await asyncio.sleep(0.05)
        finished.append("late")

    failed = JudgeCallFailed("score_trait", work.case_id, "h", "invalid reply", 1)
    with pytest.raises(BudgetExhausted):
        asyncio.run(work.together([step("a", 0.0, failed), late, step("b", 0.01, BudgetExhausted("spent"))]))
    assert finished == ["late"]      # a step that raised did not cut the others short
    assert work.outputs == []        # a case that raised emits nothing
    with pytest.raises(JudgeCallFailed):   # failures of the case alone: the first in step order
        asyncio.run(work.together([step("a", 0.02, failed), step("b", 0.0, ValueError("later"))]))
