"""Shared helpers for the stage and dispatcher tests: homes, benchmark files, reading events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalledger import ledger
from evalledger.stages.intake import ingest_path

RESPONSE = "Human somatic cells are diploid, containing 46 chromosomes organized into 23 pairs [1]."


def template_benchmark(*, name: str = "chromosomes", config: dict | None = None, responses: list[dict] | None = None,
                       rubric: dict | None = None, fields: list[dict] | None = None) -> dict[str, Any]:
    """A native benchmark with one question (the FORMATS.md example) and its responses."""
    question = {
        "id": "q1",
        "question": "How many pairs of chromosomes does a normal human somatic cell have?",
        "template": {"fields": fields or [
            {"name": "pair_count", "type": "int",
             "description": "The number of chromosome pairs in a normal human somatic cell",
             "ground_truth": 23, "verify_with": {"type": "NumericExact"}},
            {"name": "cites_source", "type": "bool", "description": "Whether a source is cited",
             "ground_truth": True, "verify_with": {"type": "TraceRegex", "pattern": "\\[\\d+\\]"}},
        ]},
    }
    if rubric is not None:
        question["rubric"] = rubric
    return {"format": "evalledger/benchmark@1", "name": name, "config": config or {},
            "questions": [question],
            "responses": responses if responses is not None else [
                {"question_id": "q1", "model": "model-a", "text": RESPONSE}]}


def reconstruction_file(doc_id: str = "1976SINGAP02176") -> dict[str, Any]:
    """A reconstruction document with three claims of different types and importance."""
    return {
        "format": "evalledger/reconstruction@1", "doc_id": doc_id,
        "original_claims": [
            {"id": "c1", "text": "Singapore supports the US naval presence in the region", "type": "policy_position",
             "importance": 3},
            {"id": "c2", "text": "The minister met the ambassador on 12 May", "type": "event", "importance": 1},
            {"id": "c3", "text": "Trade between the two countries grew 10 percent", "type": "economic",
             "importance": 2},
        ],
        "target_document": "Cable text ...",
        "reconstruction": {
            "answers": [{"id": "q1", "question": "What is Singapore's position?",
                         "answer": "Singapore supports the US naval presence in the region."},
                        {"id": "q2", "question": "What happened economically?",
                         "answer": "Trade grew by about 10 percent."}],
            "synthesis": "Singapore backs the US navy's presence; trade grew 10 percent."},
    }


AUDIT_LINES = [
    {"id": 1, "tag": "clean", "difficulty": "easy", "description": "faithful",
     "context_input": "Revenue rose 12% to $5.6 billion in 2023.", "model_output": "Revenue rose 12% in 2023.",
     "expected_credit_score": 5},
    {"id": 2, "tag": "major_factual", "difficulty": "medium", "description": "reversed direction",
     "context_input": "Revenue rose 12% to $5.6 billion in 2023.",
     "model_output": "Revenue fell 12% in 2023, so the company is shrinking.", "expected_credit_score": 2},
]


def write_json(path: Path, obj: Any) -> Path:
    path.write_text(json.dumps(obj))
    return path


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def home_with(tmp_path: Path, *files: tuple[str, Any]) -> Path:
    """A fresh home with each (file name, content) ingested through the intake."""
    home = tmp_path / "home"
    ledger.init_home(home)
    with ledger.open_ledger(home) as led:
        for name, content in files:
            path = tmp_path / name
            if name.endswith(".jsonl"):
                write_jsonl(path, content)
            else:
                write_json(path, content)
            result = ingest_path(led, path)
            assert result.status == "accepted", result
    return home


def offline_judged(tmp_path: Path) -> Path:
    """A home whose one case the offline judge judged (its runs name the offline backend)."""
    from evalledger.stages.dispatcher import RunSettings, run_until_idle
    home = home_with(tmp_path, ("b.json", template_benchmark()))
    with ledger.open_ledger(home) as led:
        assert run_until_idle(led, RunSettings(judge_backend="offline")).judged == 1
    return home


def events(home: Path, *types: str, stream: str | None = None) -> list[ledger.Event]:
    with ledger.open_ledger(home) as led:
        return list(led.read(types=list(types) or None, stream=stream))


def data(home: Path, type: str) -> list[dict]:
    return [e.data for e in events(home, type)]


def outputs(home: Path) -> list[tuple[str, str, str]]:
    """Every stage output (not judge traffic, not run events) as (stream, type, canonical data)."""
    skip = {"judge.called", "run.started", "run.completed", "file.received", "benchmark.registered",
            "responses.registered", "case.opened"}
    return [(e.stream, e.type, ledger.canonical_json(e.data).decode()) for e in events(home) if e.type not in skip]


class InterruptedOnce(ledger.Ledger):
    """A real ledger whose ``nth`` append holding a ``case.judged`` raises ``error`` (as a signal
    handler would) before it commits."""

    def __init__(self, led: ledger.Ledger, nth: int, error: type[BaseException] = KeyboardInterrupt):
        super().__init__(led.recorder, led.home)
        self.countdown = nth
        self.error = error

    def append(self, events, expected_version=None, tracking=None):
        """Append, except that the ``nth`` batch holding a verdict raises instead of committing."""
        batch = list(events) if isinstance(events, list) else [events]
        if any(e.type == "case.judged" for e in batch):
            self.countdown -= 1
            if self.countdown == 0:
                raise self.error()
        return super().append(events, expected_version, tracking)
