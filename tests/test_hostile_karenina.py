"""Karenina templates whose literals JSON cannot hold (1e400, 10**30-sized integers, lone
surrogates): that question is rejected with its template line, the rest of the checkpoint
registers, through ``ingest`` and through ``watch --once``."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from intake_support import KARENINA, events
from evalledger import ledger
from evalledger.stages.formats import FileRejected
from evalledger.stages.formats.decode import loads
from evalledger.stages.formats.karenina_ast import unstorable

HEADER = "from karenina.schemas.entities import BaseAnswer\nfrom pydantic import Field\n\nclass Answer(BaseAnswer):\n"


def verified_field(ground_truth: str, kind: str = "float", primitive: str = "NumericExact()") -> str:
    """A VerifiedField template whose ground truth is the given source text (line 5)."""
    return HEADER + f"    result: {kind} = VerifiedField(description='r', ground_truth={ground_truth}, verify_with={primitive})\n"


def correct_dict(source: str) -> str:
    """An old-style template: ``self.correct = <source>`` on line 8."""
    return (HEADER + "    result: int = Field(description='r')\n\n    def model_post_init(self, __context):\n"
            f"        self.correct = {source}\n\n    def verify(self) -> bool:\n"
            "        return self.result == self.correct['result']\n")


BAD_TEMPLATES = {
    "inf-ground-truth": (verified_field("1e400"), 5, "cannot be stored"),
    "inf-in-correct": (correct_dict("{'result': 1e999}"), 8, "cannot be stored"),
    "surrogate": (verified_field("'\\ud800'", "str", "ExactMatch()"), 5, "unpaired surrogate"),
    "huge-int": (verified_field("123456789012345678901234567890", "int"), 5, "64 bits"),
}


def checkpoint(path: Path, templates: dict[str, str]) -> Path:
    """The minimal fixture's valid question plus one question per template."""
    doc = json.loads((KARENINA / "minimal.jsonld").read_text())
    valid = doc["dataFeedElement"][0]
    for name, source in templates.items():
        element = copy.deepcopy(valid)
        element["@id"] = f"urn:test:{name}"
        element["item"]["hasPart"]["text"] = source
        doc["dataFeedElement"].append(element)
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return path


def test_each_unstorable_literal_rejects_its_question_with_the_line_and_keeps_the_rest(home, run_cli, tmp_path):
    path = checkpoint(tmp_path / "bad-literals.jsonld", {name: t for name, (t, _, _) in BAD_TEMPLATES.items()})
    done = run_cli("ingest", path, home=home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "accepted bad-literals.jsonld" in done.stdout
    [registered] = events(ledger.open_ledger(home), "benchmark.registered")
    assert [q["id"] for q in registered.data["questions"]] == ["urn:karenina:test:q001"]
    rejected = {r["where"]: r["reason"] for r in registered.data["rejected_questions"]}
    for index, (name, (_, line, reason)) in enumerate(BAD_TEMPLATES.items(), start=1):
        where = f"$.dataFeedElement[{index}].item.hasPart.text, template line {line}"
        assert where in rejected, (name, rejected)
        assert reason in rejected[where] and "question not registered" in rejected[where]
        assert f"not translated: {where}" in done.stdout


def test_a_checkpoint_of_only_unstorable_literals_is_rejected_with_an_event(home, run_cli, tmp_path):
    path = checkpoint(tmp_path / "all-bad.jsonld", {"inf": BAD_TEMPLATES["inf-ground-truth"][0]})
    doc = json.loads(path.read_text())
    doc["dataFeedElement"] = doc["dataFeedElement"][1:]
    path.write_text(json.dumps(doc))
    done = run_cli("ingest", path, home=home)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    [rejected] = events(ledger.open_ledger(home), "benchmark.rejected")
    assert "template line 5" in rejected.data["errors"][0]["where"]


def test_watch_files_a_checkpoint_with_an_unstorable_literal_and_registers_its_valid_question(home, run_cli):
    checkpoint(home / "inbox" / "bad-literals.jsonld", {"inf": BAD_TEMPLATES["inf-in-correct"][0]})
    done = run_cli("watch", "--once", home=home, timeout=120)
    assert done.returncode == 0, done.stderr
    assert list((home / "inbox").iterdir()) == []
    assert len(list((home / "processed").glob("*.jsonld"))) == 1
    [registered] = events(ledger.open_ledger(home), "benchmark.registered")
    assert len(registered.data["questions"]) == 1 and len(registered.data["rejected_questions"]) == 1


@given(st.recursive(st.none() | st.booleans() | st.floats() | st.integers(min_value=-2**70, max_value=2**70)
                    | st.text(), lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=10))
@settings(max_examples=300)
def test_unstorable_agrees_with_what_a_json_benchmark_file_may_hold(value):
    """A literal is storable exactly when the same value written as JSON passes the file decoder."""
    try:
        loads(json.dumps(value))
        accepted = True
    except FileRejected:
        accepted = False
    assert (unstorable(value) is None) == accepted


@pytest.mark.parametrize("value", [b"x", 1j, {"k": {1e400}}])
def test_unstorable_names_bytes_complex_and_nested_infinity(value):
    assert unstorable(value)
