"""override: only template cases have a pass/fail verdict to override; a template case that
failed before it was judged can be overridden, and reports say it was never judged."""

from __future__ import annotations

import json

from evalledger import ledger
from evalledger.testing.stand_in import StandIn, StandInThread, Status
from stages_support import AUDIT_LINES, home_with, reconstruction_file, template_benchmark


def cases_by_kind(home) -> dict[str, str]:
    with ledger.open_ledger(home) as led:
        return {e.data["kind"]: e.data["case_id"] for e in led.read(types=["case.opened"])}


def overrides_in(home) -> int:
    with ledger.open_ledger(home) as led:
        return sum(1 for _ in led.read(types=["verdict.overridden"]))


def test_override_refuses_reconstruction_and_audit_cases(tmp_path, run_cli):
    home = home_with(tmp_path, ("b.json", template_benchmark()), ("rec.json", reconstruction_file()),
                     ("audit.jsonl", AUDIT_LINES))
    cases = cases_by_kind(home)
    for kind in ("reconstruction", "audit"):
        done = run_cli("override", cases[kind], "--verdict", "pass", "--reason", "r", "--author", "a", home=home)
        assert done.returncode == 2, done.stdout
        [line] = done.stderr.strip().splitlines()
        article = "an" if kind == "audit" else "a"
        assert f"case {cases[kind]} is {article} {kind} case, which has no pass/fail verdict" in line
        assert "override applies to the verdicts of template cases" in line
    assert overrides_in(home) == 0
    done = run_cli("override", cases["template"], "--verdict", "pass", "--reason", "r", "--author", "a", home=home)
    assert done.returncode == 0, done.stderr
    assert overrides_in(home) == 1


def test_override_of_an_unknown_case_is_a_clear_usage_error(tmp_path, run_cli):
    home = home_with(tmp_path, ("b.json", template_benchmark()))
    done = run_cli("override", "ffffffffffff", "--verdict", "pass", "--reason", "r", "--author", "a", home=home)
    assert done.returncode == 2
    assert done.stderr.strip() == "evalledger override: error: no case 'ffffffffffff' in this ledger"


def test_a_template_case_that_failed_unjudged_shows_the_override_beside_not_judged(tmp_path, run_cli):
    home = home_with(tmp_path, ("b.json", template_benchmark()))
    # A judge that refuses every request (400, not retried): the case fails, unjudged.
    with StandInThread(StandIn().script(*[Status(400)] * 8)) as stand_in:
        done = run_cli("run", "--judge", "openai", "--model", "m", home=home,
                       env={"OPENAI_BASE_URL": stand_in.base_url})
    assert done.returncode == 1, done.stderr
    case_id = cases_by_kind(home)["template"]
    done = run_cli("override", case_id, "--verdict", "pass", "--reason", "checked by hand", "--author", "rev",
                   home=home)
    assert done.returncode == 0, done.stderr
    assert run_cli("report", home=home).returncode == 0
    [row] = [json.loads(x) for x in (home / "reports" / "evaluations.jsonl").read_text().splitlines()]
    assert (row["status"], row["verdict"], row["original_verdict"]) == ("failed", "pass", None)
    assert row["override"] == {"verdict": "pass", "reason": "checked by hand", "author": "rev"}
    [report] = (home / "reports").glob("*/report.md")
    text = report.read_text()
    assert "pass (overridden by rev: checked by hand; original failed, not judged)" in text
    assert "original n/a" not in text
