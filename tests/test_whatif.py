"""whatif: every point of a sweep equals an actual `replay --into DIR --set KEY=VALUE` at that value,
no request reaches a server, and settings that need new judge calls are refused with the reason."""

from __future__ import annotations

import json

import pytest

from evalledger import ledger
from evalledger.stages.dispatcher import RunSettings, run_until_idle
from evalledger.stages.whatif import NEEDS_CALLS, WhatIfRefused, parse_sweep, sweep_values
from evalledger.testing.stand_in import StandIn, StandInThread
from stages_scripted import every_path_judge, pairs_sentence, response_of, role_of, template_judge
from stages_support import AUDIT_LINES, RESPONSE, home_with, reconstruction_file, template_benchmark

PARAPHRASE = "Human somatic cells hold 23 pairs of chromosomes in all, it is said [1]."


def near_copy_judge():
    """The template judge, but its excerpt of the paraphrased response changes a few words, so its
    recorded similarity sits between the swept thresholds."""
    template = template_judge()

    def reply(body):
        role = role_of(body)
        if role == "extract_excerpts" and "hold" in response_of(body):
            text = pairs_sentence(response_of(body)).replace("hold", "contain").replace("it is said", "we read")
            return {"excerpts": {"pair_count": [{"text": text, "confidence": "high"}]}}
        return template(body, role)

    return reply


def judged_source(tmp_path, reply_fn, *files):
    """A home with ``files`` judged by the chat-completions stand-in answering with ``reply_fn``."""
    home = home_with(tmp_path, *files)
    with StandInThread(StandIn(reply_fn=reply_fn)) as stand_in, ledger.open_ledger(home) as led:
        settings = RunSettings(judge_backend="openai", judge_model="m", judge_options={"base_url": stand_in.base_url})
        run_until_idle(led, settings)
    return home


def replayed_metric(run_cli, source, target, key, value, bench_metric):
    """The metric a real `replay --set` at ``value`` reports in its aggregate-stats.json."""
    done = run_cli("replay", "--into", target, "--set", f"{key}={value}", "--quiet", home=source)
    assert done.returncode in (0, 1), done.stderr
    agg = json.loads((target / "reports" / "aggregate-stats.json").read_text())
    return bench_metric(agg), done.returncode


def replayed_audit(run_cli, source, target, bench, group, *sets):
    """The audit group's figures a real `replay --set ...` (each of ``sets``) writes in its
    aggregate-stats.json; the replay must succeed."""
    args = [a for s in sets for a in ("--set", s)]
    done = run_cli("replay", "--into", target, *args, "--quiet", home=source)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads((target / "reports" / "aggregate-stats.json").read_text())["benchmarks"][bench]["audit"][group]


def test_each_audit_zone_point_equals_a_replay_at_that_value(tmp_path, run_cli):
    source = judged_source(tmp_path / "src", every_path_judge(), ("a.jsonl", AUDIT_LINES))
    with StandInThread(StandIn(reply_fn=every_path_judge())) as watcher:   # a server nothing may call
        done = run_cli("whatif", "--set", "audit.high_severe_min=1:3:1", "--set", "audit.zone_mid_max=3",
                       "--json", "--quiet", home=source, env={"OPENAI_BASE_URL": watcher.base_url})
    assert watcher.requests == []                # replay answered every point; no request was sent
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["values"] == [1, 2, 3]
    [zones, exact] = sorted(doc["series"])
    assert (doc["series"][zones]["metric"], doc["series"][exact]["metric"]) == ("zone_accuracy", "exact_match_rate")
    bench, group = zones.split(" / ", 1)
    seen = []
    for point in doc["points"]:
        audit = replayed_audit(run_cli, source, tmp_path / f"replay-{point['value']}", bench, group,
                               f"audit.high_severe_min={point['value']}", "audit.zone_mid_max=3")
        assert point["metrics"][zones]["value"] == audit["zone_accuracy"]
        assert point["metrics"][exact]["value"] == audit["exact_match_rate"]
        assert point["unrecorded_requests"] == 0
        seen.append(audit["exact_match_rate"])
    assert seen == [0.5, 1.0, 1.0]               # high_severe_min=1 turns the one high finding into a 1
    chart = source / "reports" / "whatif-audit.high_severe_min.svg"
    assert chart.read_text().startswith("<svg") and "polyline" in chart.read_text()


def test_each_fuzzy_threshold_point_equals_a_replay_at_that_value(tmp_path, run_cli):
    responses = [{"question_id": "q1", "model": "exact", "text": RESPONSE},
                 {"question_id": "q1", "model": "paraphrase", "text": PARAPHRASE}]
    # Judged at a low threshold: the near copy (similarity 0.46) was accepted and reasoned about.
    bench = template_benchmark(config={"deep_judgment_enabled": True, "deep_judgment_excerpt_retry_attempts": 0,
                                       "deep_judgment_fuzzy_match_threshold": 0.3}, responses=responses)
    source = judged_source(tmp_path / "src", near_copy_judge(), ("b.json", bench))
    done = run_cli("whatif", "--set", "deep_judgment_fuzzy_match_threshold=0.10:0.90:0.40", "--json", "--quiet",
                   home=source)
    assert done.returncode == 1, done.stderr              # some points met requests never recorded
    assert "never recorded" in done.stderr
    doc = json.loads(done.stdout)
    assert doc["values"] == [0.1, 0.5, 0.9]
    for point in doc["points"]:
        target = tmp_path / f"replay-{point['value']}"
        replay = run_cli("replay", "--into", target, "--set", f"deep_judgment_fuzzy_match_threshold={point['value']}",
                         "--quiet", home=source)
        agg = json.loads((target / "reports" / "aggregate-stats.json").read_text())
        for name, metric in point["metrics"].items():
            bench_id, model = name.split(" / ", 1)
            assert metric["value"] == agg["benchmarks"][bench_id]["models"][model]["pass_rate"], (point, name)
        unrecorded = (target / "replay-unrecorded.jsonl")
        lines = unrecorded.read_text().splitlines() if unrecorded.exists() else []
        assert point["unrecorded_requests"] == len(lines)
        assert (replay.returncode == 1) == bool(lines)
    curve = {p["value"]: p["metrics"].get(f"{bench_id} / paraphrase", {}).get("value") for p in doc["points"]}
    # Above 0.46 the near copy is rejected, and the reason request (which quotes the excerpts) then
    # differs from the recorded one: replay cannot answer it, so the case fails there, as in replay.
    assert curve == {0.1: 1.0, 0.5: None, 0.9: None}
    assert [p["unrecorded_requests"] for p in doc["points"]] == [0, 1, 1]
    assert all(p["metrics"][f"{bench_id} / exact"]["value"] == 1.0 for p in doc["points"])
    text = run_cli("whatif", "--set", "deep_judgment_fuzzy_match_threshold=0.1,0.9", "--quiet", home=source).stdout
    assert "pass_rate" in text and "0.1 |" in text


@pytest.mark.parametrize("key", sorted(NEEDS_CALLS))
def test_settings_that_need_new_calls_are_refused_with_the_reason(key):
    with pytest.raises(WhatIfRefused, match="cannot be answered from the recorded calls") as info:
        parse_sweep([f"{key}=1:3:1"])
    assert NEEDS_CALLS[key] in str(info.value)


def test_refusals_through_the_cli_write_nothing(tmp_path, run_cli):
    home = home_with(tmp_path, ("b.json", template_benchmark()))
    before = ledger.open_ledger(home).head()
    done = run_cli("whatif", "--set", "deep_judgment_max_excerpts_per_attribute=1:5:1", home=home)
    assert done.returncode == 2 and "new extract_excerpts calls" in done.stderr
    for bad, reason in (("judge_model=a,b", "not a setting a what-if can sweep"),
                        ("claim_bands.partially_min=9:10:1", "partially_min must be <= fully_min"),
                        ("deep_judgment_fuzzy_match_threshold=0.9:0.1:0.1", "below START"),
                        ("deep_judgment_fuzzy_match_threshold=0:1:0", "step must be positive"),
                        ("deep_judgment_fuzzy_match_threshold=0.5:1.5:0.5", "less than or equal to 1"),
                        ("deep_judgment_fuzzy_match_threshold=0.8", "exactly one --set")):
        done = run_cli("whatif", "--set", bad, home=home)
        assert done.returncode == 2 and reason in done.stderr, (bad, done.stderr)
    with ledger.open_ledger(home) as led:
        assert led.head() == before
    assert not list(home.glob("reports/whatif-*"))


def test_sweep_values_are_exact_decimals():
    assert sweep_values("0.70:0.95:0.05") == [0.7, 0.75, 0.8, 0.85, 0.9, 0.95]
    assert sweep_values("1:3:1") == [1, 2, 3]
    assert sweep_values("0.7,0.8") == [0.7, 0.8]
    with pytest.raises(WhatIfRefused, match="at most"):
        sweep_values("0:1000:1")
    with pytest.raises(WhatIfRefused, match="not a number"):
        sweep_values("a:b:c")


def test_a_claim_band_point_equals_a_replay_at_that_value(tmp_path, run_cli):
    source = judged_source(tmp_path / "src", every_path_judge(), ("doc.reconstruction.json", reconstruction_file()))
    with StandInThread(StandIn(reply_fn=every_path_judge())) as watcher:   # a server nothing may call
        done = run_cli("whatif", "--set", "claim_bands.fully_min=4,8", "--json", "--quiet", home=source,
                       env={"OPENAI_BASE_URL": watcher.base_url})
    assert watcher.requests == [] and done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    [name] = doc["series"]
    assert doc["series"][name]["metric"] == "pct_fully_reconstructed"
    bench, model = name.split(" / ", 1)
    low, high = (p["metrics"][name]["value"] for p in doc["points"])
    assert low > high                 # a lower bar counts more claims fully reconstructed
    # (every point of every setting is checked against a replay in tests/test_whatif_facts.py)
    replayed, code = replayed_metric(
        run_cli, source, tmp_path / "replay-4", "claim_bands.fully_min", 4,
        lambda agg: agg["benchmarks"][bench]["reconstruction"][model]["overall"]["pct_fully_reconstructed"])
    assert code == 0 and low == replayed


def test_a_home_judged_with_repeats_is_swept_under_its_own_repeat_settings(tmp_path, run_cli):
    """Each repeat's requests carry its seed: the what-if holds the source's judge_repeats, so every
    point is answered from the record and equals a replay given the same repeats."""
    home = home_with(tmp_path / "src", ("a.jsonl", AUDIT_LINES))
    with StandInThread(StandIn(reply_fn=every_path_judge())) as stand_in, ledger.open_ledger(home) as led:
        run_until_idle(led, RunSettings(judge_backend="openai", judge_model="m", config_layer={"judge_repeats": 3},
                                        judge_options={"base_url": stand_in.base_url}))
    with StandInThread(StandIn(reply_fn=every_path_judge())) as watcher:
        done = run_cli("whatif", "--set", "audit.high_severe_min=1:2:1", "--json", "--quiet", home=home,
                       env={"OPENAI_BASE_URL": watcher.base_url})
    assert watcher.requests == []
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    zones = next(name for name, s in doc["series"].items() if s["metric"] == "zone_accuracy")
    bench, group = zones.split(" / ", 1)
    for point in doc["points"]:
        assert point["unrecorded_requests"] == 0
        audit = replayed_audit(run_cli, home, tmp_path / f"replay-{point['value']}", bench, group,
                               f"audit.high_severe_min={point['value']}", "judge_repeats=3")
        assert point["metrics"][zones]["value"] == audit["zone_accuracy"]
    refused = run_cli("whatif", "--set", "judge_repeats=1:3:1", home=home)
    assert refused.returncode == 2 and "cannot be swept" in refused.stderr
