"""Replay under a new configuration, and diff: a source judged by a scripted model on the local
stand-in, replayed without any network with a stricter fuzzy threshold."""

from __future__ import annotations

import json
import re

import pytest

from evalledger import ledger
from evalledger.cli.main import main
from evalledger.stages.dispatcher import RunSettings, run_until_idle
from evalledger.testing.stand_in import StandIn, StandInThread
from stages_scripted import dispatch, pairs_sentence, response_of
from stages_support import RESPONSE, home_with, offline_judged, template_benchmark

NEAR_MARK = "Notes:"   # responses starting with this get a near-verbatim excerpt (similarity ~0.9)
SUFFIX = " overall"


def scripted(body, role):
    """Quote the pairs sentence, verbatim or with a few extra characters; reason; parse the count."""
    response = response_of(body)
    sentence = pairs_sentence(response)
    if role == "extract_excerpts":
        text = sentence + SUFFIX if response.startswith(NEAR_MARK) else sentence
        return {"excerpts": {"pair_count": [{"text": text, "confidence": "high"}]}}
    if role == "reason":
        return {"reasoning": {"pair_count": "the response states the count"}}
    if role == "parse":
        return {"pair_count": int(re.search(r"(\d+) pairs", response).group(1))}
    raise AssertionError(role)


RESPONSES = [
    {"question_id": "q1", "model": "exact-1", "text": RESPONSE},
    {"question_id": "q1", "model": "exact-2", "text": "Short: " + RESPONSE},
    {"question_id": "q1", "model": "near-1", "text": NEAR_MARK + " " + RESPONSE},
    {"question_id": "q1", "model": "near-2", "text": NEAR_MARK + " in short, " + RESPONSE},
]


def source_home(tmp_path, retries: int):
    config = {"deep_judgment_enabled": True, "deep_judgment_excerpt_retry_attempts": retries}
    home = home_with(tmp_path, ("b.json", template_benchmark(config=config, responses=RESPONSES,
                                                             fields=[_pair_field()])))
    with StandInThread(StandIn(reply_fn=dispatch(scripted))) as stand_in:
        settings = RunSettings(judge_backend="openai", judge_model="scripted-model",
                               judge_options={"base_url": stand_in.base_url, "backoff_base_s": 0.01})
        with ledger.open_ledger(home) as led:
            summary = run_until_idle(led, settings)
    assert summary.judged == 4 and summary.failed == 0
    return home


def _pair_field():
    return {"name": "pair_count", "type": "int", "description": "The number of chromosome pairs",
            "ground_truth": 23, "verify_with": {"type": "NumericExact"}}


def results(home) -> dict[str, dict]:
    lines = (home / "reports" / "evaluations.jsonl").read_text().splitlines()
    return {r["model"]: r for r in map(json.loads, lines)}


def test_raising_the_fuzzy_threshold_changes_exactly_the_near_verbatim_verdicts(tmp_path, capsys):
    source = source_home(tmp_path, retries=0)
    assert main(["--home", str(source), "report"]) == 0
    before = results(source)
    sims = {m: r["excerpts"]["template"]["pair_count"][0]["similarity"] for m, r in before.items()}
    assert all(sims[m] == 1.0 for m in ("exact-1", "exact-2"))
    assert all(0.8 <= sims[m] < 0.95 for m in ("near-1", "near-2"))            # passed at 0.8
    assert {m: r["verdict"] for m, r in before.items()} == dict.fromkeys(before, "pass")

    # Without --live: a case whose excerpt now fails asks the judge something new (its reasoning and
    # parse requests carry different excerpts), which the source never recorded.
    code = main(["--home", str(source), "replay", "--into", str(tmp_path / "no-live"),
                 "--set", "deep_judgment_fuzzy_match_threshold=0.95"])
    out = capsys.readouterr().out
    assert code == 1
    listed = re.findall(r"not recorded in the source: case (\w+) role (\w+)", out)
    near = {before[m]["case_id"] for m in ("near-1", "near-2")}
    assert {case for case, _ in listed} == near                         # the exact cases are not listed
    assert {role for _, role in listed} <= {"reason", "parse"}
    assert "'--live' makes those calls" in out and "0 live judge call(s)" in out

    target = tmp_path / "strict"
    code = main(["--home", str(source), "replay", "--into", str(target),
                 "--set", "deep_judgment_fuzzy_match_threshold=0.95", "--live", "offline"])
    out = capsys.readouterr().out
    assert code == 0, out
    after = results(target)
    assert {m: r["verdict"] for m, r in after.items()} == {
        "exact-1": "pass", "exact-2": "pass", "near-1": "fail", "near-2": "fail"}
    assert after["near-1"]["auto_failed"] and after["near-1"]["missing_excerpts"] == {"template": ["pair_count"]}

    with ledger.open_ledger(target) as led:
        first = next(led.read())
        with ledger.open_ledger(source, readonly=True) as src:
            source_head = src.head()
        assert first.type == "replay.started"
        assert (first.data["source_head_seq"], first.data["source_head_hash"]) == (source_head.seq, source_head.hash)
        assert first.data["overrides"] == {"deep_judgment_fuzzy_match_threshold": 0.95}
        calls = [e.data for e in led.read(types=["judge.called"])]
    replayed = [c for c in calls if c["backend"] == "replay"]
    live = [c for c in calls if c["backend"] != "replay"]
    assert replayed and {c["source_backend"] for c in replayed} == {"openai"}
    assert {c["case_id"] for c in live} == near and {c["backend"] for c in live} == {"offline"}
    assert {c["role"] for c in live} <= {"reason", "parse"}
    assert f"{len(live)} live judge call(s)" in out

    assert main(["diff", str(source), str(target), "--json"]) == 1
    diff = json.loads(capsys.readouterr().out)
    changed = {c["model"]: c for c in diff["changed_cases"]}
    assert set(changed) == {"near-1", "near-2"}
    assert {"what": "verdict", "a": "pass", "b": "fail"} in changed["near-1"]["changes"]
    because = " ".join(changed["near-1"]["events"]["only_in_b"])
    assert "excerpt.missing" in because and "case.auto_failed" in because
    assert "excerpt.extracted" in " ".join(changed["near-1"]["events"]["only_in_a"])
    rates = {m["metric"]: (m["a"], m["b"]) for m in diff["metric_changes"] if not m["usage"]}
    bench = next(iter(diff["changed_cases"]))["benchmark"]
    assert rates[f"benchmarks.{bench}.models.near-1.pass_rate"] == (1.0, 0.0)
    assert not any(".exact-1." in k for k in rates)

    assert main(["diff", str(source), str(target)]) == 1
    text = capsys.readouterr().out
    assert "2 of 4 cases changed" in text and "verdict: \"pass\" -> \"fail\"" in text


def test_replay_refuses_a_home_that_has_content(tmp_path, capsys):
    source = home_with(tmp_path, ("b.json", template_benchmark()))
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("x")
    assert main(["--home", str(source), "replay", "--into", str(busy)]) == 2
    assert "not empty" in capsys.readouterr().err


@pytest.mark.parametrize("inside", ["inbox/r", "r", "reports/r"])
def test_replay_refuses_a_target_inside_the_source_home(tmp_path, capsys, inside):
    """A replay into a folder of the source home was made: the next ingest took the replay's
    files for the inbox's (moved to rejected/, benchmark.rejected appended to the source)."""
    source = offline_judged(tmp_path)
    with ledger.open_ledger(source, readonly=True) as led:
        head = led.head()
    assert main(["--home", str(source), "replay", "--into", str(source / inside)]) == 2
    assert "is inside the source home" in capsys.readouterr().err
    assert not (source / inside).exists()
    with ledger.open_ledger(source, readonly=True) as led:
        assert led.head() == head


def test_source_in_a_replayed_home_gives_the_file_the_source_home_keeps(tmp_path, run_cli):
    """A replay copies its inputs' events, not the files: ``source CASE`` in the replay's home said
    the bytes were nowhere. They are read (hash-checked) from the home it replayed."""
    source = offline_judged(tmp_path)
    assert run_cli("replay", "--into", tmp_path / "r", home=source).returncode == 0
    with ledger.open_ledger(tmp_path / "r", readonly=True) as led:
        case_id = next(e.data["case_id"] for e in led.read(types=["case.opened"]))
    there = run_cli("source", case_id, home=source)
    here = run_cli("source", case_id, home=tmp_path / "r")
    assert here.returncode == 0 and here.stdout == there.stdout and there.stdout, here.stderr


def test_replay_says_which_of_the_source_runs_settings_it_did_not_apply(tmp_path, run_cli):
    """A source run with --set (or --repeats) judged under settings a plain replay does not layer:
    the replay's verdicts differed with nothing said. It names them; the same --set is quiet."""
    source = home_with(tmp_path, ("b.json", template_benchmark()))
    assert run_cli("run", "--set", "deep_judgment_fuzzy_match_threshold=0.95", home=source).returncode == 0
    plain = run_cli("replay", "--into", tmp_path / "plain", home=source)
    assert "this replay did not: deep_judgment_fuzzy_match_threshold=0.95" in plain.stdout, plain.stdout
    same = run_cli("replay", "--into", tmp_path / "same", "--set", "deep_judgment_fuzzy_match_threshold=0.95",
                   home=source)
    assert same.returncode == 0 and "did not" not in same.stdout, same.stdout


@pytest.mark.parametrize("sets", [["no_equals_sign"], ["not_a_config_key=1"]])
def test_replay_rejects_a_bad_set(tmp_path, sets, capsys):
    source = home_with(tmp_path, ("b.json", template_benchmark()))
    args = ["--home", str(source), "replay", "--into", str(tmp_path / "r")]
    for item in sets:
        args += ["--set", item]
    assert main(args) == 2
    assert not (tmp_path / "r" / "ledger.db").exists()


def test_diff_names_changed_claim_scores_from_the_events(tmp_path, capsys):
    from evalledger.testing import synthetic as syn
    claims = [{"id": "c1", "text": "A", "type": "fact", "importance": 2},
              {"id": "c2", "text": "B", "type": "fact", "importance": 1}]
    homes = []
    for name, second in (("a", 3), ("b", 8)):
        with ledger.open_ledger(tmp_path / name) as led:
            case_id, first = syn.opened("rec", "reconstruction", "D1", "m",
                                        {"doc_id": "D1", "original_claims": claims, "target_document": ""})
            led.append([syn.benchmark("rec", "reconstruction"), first, syn.claim(case_id, "c1", 9),
                        syn.claim(case_id, "c2", second)])
        homes.append(str(tmp_path / name))
    assert main(["diff", *homes, "--json"]) == 1
    diff = json.loads(capsys.readouterr().out)
    [case] = diff["changed_cases"]
    assert case["changes"] == [{"what": "claim c2 score", "a": 3, "b": 8}]
    assert [e.split(" ")[0] for e in case["events"]["only_in_a"]] == ["claim.scored"]
    assert '"score":8' in case["events"]["only_in_b"][0]
    changed = {m["metric"]: (m["a"], m["b"]) for m in diff["metric_changes"]}
    assert changed["benchmarks.rec.reconstruction.m.overall.weighted_average_score"] == (7.0, 8.6667)
    assert main(["diff", homes[0], homes[0]]) == 0


# --- a live judge that cannot be set up is refused before the new home is made ------------------------

@pytest.mark.parametrize("env, missing", [
    ({"OPENAI_MODEL": "", "OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""}, "OPENAI_MODEL"),
    ({"OPENAI_MODEL": "m", "OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""}, "OPENAI_API_KEY"),
])
def test_replay_live_openai_that_cannot_be_set_up_is_a_usage_error_and_makes_nothing(
        tmp_path, run_cli, env, missing):
    source = offline_judged(tmp_path)
    target = tmp_path / "x"
    done = run_cli("replay", "--into", target, "--live", "openai", home=source, env=env)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()                 # one line, no traceback
    assert line.startswith("evalledger replay: error: --live openai:") and missing in line
    assert not target.exists()                                 # nothing created, no events copied
    assert done.stdout == ""


def test_replay_live_openai_on_a_local_server_needs_no_key(tmp_path, run_cli):
    source = offline_judged(tmp_path)
    with StandInThread(StandIn()) as stand_in:
        done = run_cli("replay", "--into", tmp_path / "x", "--live", "openai", home=source,
                       env={"OPENAI_MODEL": "m", "OPENAI_API_KEY": "", "OPENAI_BASE_URL": stand_in.base_url})
    assert done.returncode == 0, done.stderr
    assert "1 case(s) re-run: 1 judged" in done.stdout


# --- a replay that misses many requests: a summary, the first few, and the full list in a file -------

def test_replay_missing_many_requests_prints_a_summary_and_writes_the_full_list(tmp_path, run_cli):
    responses = [{"question_id": "q1", "model": f"m{i:02d}", "text": RESPONSE} for i in range(25)]
    home = home_with(tmp_path, ("b.json", template_benchmark(responses=responses)))
    with ledger.open_ledger(home) as led:                     # judged without deep judgment
        assert run_until_idle(led, RunSettings(judge_backend="offline")).judged == 25
    target = tmp_path / "deep"
    done = run_cli("replay", "--into", target, "--set", "deep_judgment_enabled=true", home=home)
    assert done.returncode == 1, done.stderr                  # requests never recorded: exit 1, as documented
    listing = target / "replay-unrecorded.jsonl"
    rows = [json.loads(line) for line in listing.read_text().splitlines()]
    # Each case asks for excerpts first; that miss fails the case, so one request per case.
    assert len(rows) == 25 and {r["role"] for r in rows} == {"extract_excerpts"}
    assert all(set(r) == {"case_id", "role", "request_hash", "stage"} for r in rows)
    assert len({r["case_id"] for r in rows}) == 25
    out = done.stdout
    shown = re.findall(r"not recorded in the source: case (\w+) role (\w+) request (\w+)", out)
    assert len(shown) == 20 and shown == [(r["case_id"], r["role"], r["request_hash"]) for r in rows[:20]]
    assert f"... and {len(rows) - 20} more" in out
    roles = {}
    for r in rows:
        roles[r["role"]] = roles.get(r["role"], 0) + 1
    summary = ", ".join(f"{role} {n}" for role, n in sorted(roles.items()))
    assert f"{len(rows)} judge request(s) the new configuration needs were never recorded in the source: " \
           f"{summary}" in out
    assert str(listing) in out
    assert "cases 25/25" in done.stderr                       # progress, as run shows it

    quiet = run_cli("replay", "--into", tmp_path / "quiet", "--set", "deep_judgment_enabled=true", "--quiet",
                    home=home)
    assert quiet.returncode == 1 and quiet.stderr == ""
