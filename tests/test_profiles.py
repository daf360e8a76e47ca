"""Profiles with two named models on two real local servers: each profile's cases are judged by its
own judge, results are grouped by profile with a zone matrix each, prices give costs (or "unknown"),
the profiles replay with no server, and no API key ever reaches the home, its logs or reports."""

from __future__ import annotations

import json

from evalledger.stages.intake_status import case_states
from evalledger.testing.stand_in import StandInThread, Status
from profiles_support import (
    ALPHA_KEY,
    ANSWER,
    BETA_KEY,
    KEYS_ENV,
    KeyedStandIn,
    every_file_bytes,
    models_toml,
    read,
    scripted_judge,
    write,
)
from stages_scripted import role_of
from stages_support import AUDIT_LINES, template_benchmark

PRICES = "[prices.alpha-1]\ninput_per_million = 2.0\noutput_per_million = 8.0\n"   # beta-1 has no price


def profile_home(tmp_path, run_cli, alpha_url: str, beta_url: str):
    """A home with a question-only benchmark, audit lines, models.toml and a price file."""
    home = tmp_path / "home"
    assert run_cli("init", home=home).returncode == 0
    bench = write(tmp_path / "chromosomes.json", template_benchmark(responses=[]))
    audit = write(tmp_path / "cases.audit.jsonl", AUDIT_LINES)
    assert run_cli("ingest", bench, audit, home=home).returncode == 0
    write(home / "models.toml", models_toml(alpha_url, beta_url, cross_audit="audit = {high_severe_min = 1}"))
    write(tmp_path / "prices.toml", PRICES)
    return home


def test_two_profiles_on_two_servers_judge_each_case_under_each_profile(tmp_path, run_cli):
    alpha, beta = KeyedStandIn(reply_fn=scripted_judge()), KeyedStandIn(reply_fn=scripted_judge(pairs_offset=1))
    beta.script(Status(503, body=json.dumps({"error": f"invalid key {BETA_KEY} for this deployment"})))
    with StandInThread(alpha) as a, StandInThread(beta) as b:
        home = profile_home(tmp_path, run_cli, a.base_url, b.base_url)
        ran = run_cli("run", "--quiet", "--profiles", "full,cross", "--config", tmp_path / "prices.toml",
                      home=home, env=KEYS_ENV)
        again = run_cli("run", "--quiet", "--profiles", "full,cross", home=home, env=KEYS_ENV)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert again.returncode == 0 and again.stdout.strip() == "nothing pending"

    # Each server answered only its profile's roles; the keys went to the right server, as headers.
    alpha_roles = sorted(role_of(r["body"]) for r in alpha.requests)
    beta_roles = [role_of(r["body"]) for r in beta.requests]
    beta_roles.remove(beta_roles[0])   # the 503 was asked again
    beta_roles.sort()
    assert alpha_roles == sorted(["answer", "parse"] + ["decompose", "check_facts", "check_logic"] * 2)
    assert beta_roles == sorted(["parse"] + ["decompose"] * 2 + ["check_facts", "check_logic"] * 2)
    assert set(alpha.authorizations) == {f"Bearer {ALPHA_KEY}"}
    assert set(beta.authorizations) == {f"Bearer {BETA_KEY}"}
    assert all(r["body"]["model"] == "beta-1" and r["body"]["temperature"] == 0.2 for r in beta.requests)

    # Every profile case carries its profile, on its case.opened and in its stage outputs' case.
    opened = [e.data for e in read(home, "case.opened")]
    by_profile = {}
    for case in opened:
        by_profile.setdefault(case.get("profile"), []).append(case)
    assert {k: len(v) for k, v in by_profile.items()} == {None: 2, "full": 3, "cross": 3}
    assert all(c["judged_by"]["name"] == "beta" for c in by_profile["cross"])
    assert all(c["config"]["audit"] == {"high_severe_min": 1} for c in by_profile["cross"])
    answered = [c for c in opened if c.get("answered_by")]
    assert sorted(c["profile"] for c in answered) == ["cross", "full"]
    assert all(c["response"] == ANSWER and c["model"] == "alpha" for c in answered)
    credit = {e.stream[5:]: e.data["credit_score"] for e in read(home, "credit.scored")}
    profile_of = {c["case_id"]: c.get("profile") for c in opened}
    assert sorted((profile_of[c], s) for c, s in credit.items()) == [
        ("cross", 1), ("cross", 5), ("full", 2), ("full", 5)]   # cross's audit override: one high error -> 1
    states = case_states_of(home)
    assert all(states[c["case_id"]] == "judged" for c in opened if c.get("profile"))
    assert all(states[c["case_id"]] == "opened" for c in by_profile[None])   # no profile named them

    # cost_usd per call: alpha's from the price table, beta's unknown (absent), never a made-up 0.
    for event in read(home, "judge.called"):
        d = event.data
        if d["model"] == "alpha-1" and d.get("usage") and not d.get("source_event"):
            usage = d["usage"]
            assert d["cost_usd"] == round((usage["prompt_tokens"] * 2 + usage["completion_tokens"] * 8) / 1e6, 8)
        if d["model"] == "beta-1":
            assert "cost_usd" not in d
    [completed] = [e.data for e in read(home, "run.completed") if "model_calls" in e.data][:1]
    assert completed["cost_usd"] is None and completed["model_calls"] == len(alpha.requests) + len(beta.requests) - 1

    assert run_cli("report", home=home).returncode == 0
    stats = json.loads((home / "reports" / "aggregate-stats.json").read_text())
    [audit] = [b for b in stats["benchmarks"].values() if b["kind"] == "audit"]
    assert sorted(audit["audit"]) == ["(no model)", "(no model) [cross]", "(no model) [full]"]
    assert audit["audit"]["(no model) [full]"]["matrix"]["BAD"]["BAD"] == 1
    assert audit["models"]["(no model) [cross]"]["cost"] is None
    assert audit["models"]["(no model) [full]"]["cost"] > 0
    [template] = [b for b in stats["benchmarks"].values() if b["kind"] == "template"]
    assert {m: s["passed"] for m, s in template["models"].items()} == {"alpha [cross]": 0, "alpha [full]": 1}
    report = (home / "reports" / "a" / "report.md").read_text() if (home / "reports" / "a").exists() else ""
    aggregate = (home / "reports" / "aggregate-report.md").read_text()
    assert "### Audit zones: (no model) [cross]" in aggregate and "### Audit zones: (no model) [full]" in aggregate
    cross_row = next(line for line in aggregate.splitlines() if line.startswith("| (no model) [cross] |"))
    assert cross_row.rstrip(" |").endswith("unknown") and "0.000000" not in cross_row
    index = (home / "reports" / "index.md").read_text()
    unpriced = len(beta.requests) - 1
    assert "cost unknown USD (" in index
    assert f"({unpriced} {'call' if unpriced == 1 else 'calls'} to a model with no price)" in index
    assert stats["totals"]["cost"] is None and stats["totals"]["unpriced_calls"] == len(beta.requests) - 1
    assert "cost of this run: " in ran.stdout and "model call(s), unknown (a model with no price" in ran.stdout
    del report

    # No key anywhere: ledger, mirror, reports, lock files; nor in what the commands printed.
    for path, data in every_file_bytes(home).items():
        assert ALPHA_KEY.encode() not in data and BETA_KEY.encode() not in data, path
    for output in (ran.stdout, ran.stderr, again.stdout, again.stderr):
        assert ALPHA_KEY not in output and BETA_KEY not in output
    [refused] = [e.data for e in read(home, "judge.called") if e.data.get("http_status") == 503]
    assert "[redacted]" in refused["error"]   # the server echoed the key; the record does not


def case_states_of(home) -> dict[str, str]:
    from evalledger import ledger
    with ledger.open_ledger(home, readonly=True) as led:
        return case_states(led)


def test_profiles_replay_with_no_server_each_from_its_own_judge(tmp_path, run_cli):
    # Both judges get the very same requests (same question, same answer): only the model tells
    # which recorded answer is whose, and the profiles disagree on the verdict.
    with StandInThread(KeyedStandIn(reply_fn=scripted_judge())) as a, \
            StandInThread(KeyedStandIn(reply_fn=scripted_judge(pairs_offset=1))) as b:
        home = profile_home(tmp_path, run_cli, a.base_url, b.base_url)
        assert run_cli("run", "--quiet", "--profiles", "full,cross", home=home, env=KEYS_ENV).returncode == 0
    replayed = tmp_path / "replayed"
    result = run_cli("replay", "--into", replayed, "--quiet", home=home)
    # The two cases no profile judged are re-run too, and answered from the profiles' records
    # (the same requests); each profile case only from its own judge's.
    assert result.returncode == 0, result.stdout + result.stderr
    assert "8 case(s) re-run: 8 judged, 0 failed; 0 live judge call(s)" in result.stdout

    def verdicts(where):
        profile = {e.data["case_id"]: e.data.get("profile") for e in read(where, "case.opened")}
        out = {(profile[e.data["case_id"]], e.type, str(e.data.get("verdict") or e.data.get("credit_score")))
               for e in read(where, "case.judged", "credit.scored") if profile[e.data["case_id"]]}
        return sorted(out)

    assert verdicts(replayed) == verdicts(home)
    assert ("cross", "case.judged", "fail") in verdicts(home) and ("full", "case.judged", "pass") in verdicts(home)
    assert not read(replayed, "stage.failed")


def test_two_profiles_in_one_home_are_compared_judge_against_judge(tmp_path, run_cli):
    """`agreement --profiles A,B` pairs each profile case with the other profile's case of the same
    origin: cross's judge misreads the count, so the template verdicts disagree once."""
    with StandInThread(KeyedStandIn(reply_fn=scripted_judge())) as a, \
            StandInThread(KeyedStandIn(reply_fn=scripted_judge(pairs_offset=1))) as b:
        home = profile_home(tmp_path, run_cli, a.base_url, b.base_url)
        assert run_cli("run", "--quiet", "--profiles", "full,cross", home=home, env=KEYS_ENV).returncode == 0
    done = run_cli("agreement", "--profiles", "full,cross", "--json", home=home)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    full = {e.data["case_id"] for e in read(home, "case.opened") if e.data.get("profile") == "full"}
    # Two audit lines (opened from the same original cases) and one question both profiles'
    # answering model answered alike.
    assert doc["cases_in_both"] == len(full) == 3
    assert doc["verdicts"]["n"] == 1 and doc["verdicts"]["confusion"]["a_pass_b_fail"] == 1
    [disagreement] = doc["disagreements"]
    assert (disagreement["a"], disagreement["b"]) == ("pass", "fail") and disagreement["case_id"] in full
    assert doc["fields"]["pair_count"]["n"] == 1 and doc["fields"]["pair_count"]["percent_agreement"] == 0.0
    text = run_cli("agreement", "--profiles", "full,cross", home=home)
    assert text.returncode == 0 and "profile full" in text.stdout and "profile cross" in text.stdout
    unknown = run_cli("agreement", "--profiles", "full,nosuch", home=home)
    assert unknown.returncode == 2 and "no case was opened under profile 'nosuch'" in unknown.stderr
    assert "cross, full" in unknown.stderr
