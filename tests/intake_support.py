"""Helpers shared by the intake tests: small valid documents and ledger inspection."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import IO

from evalledger import ledger
from evalledger.stages.formats.stream import NotStreamable, read_document
from shared_fixtures import KARENINA  # noqa: F401 - re-exported for the intake tests

SAMPLES = Path(__file__).resolve().parent.parent / "benchmarks" / "samples"

BENCHMARK = {
    "format": "evalledger/benchmark@1",
    "name": "chromosomes",
    "config": {"deep_judgment_enabled": True, "deep_judgment_fuzzy_match_threshold": 0.8},
    "questions": [{
        "id": "q1",
        "question": "How many pairs of chromosomes does a normal human somatic cell have?",
        "template": {"fields": [
            {"name": "pair_count", "type": "int", "description": "The number of chromosome pairs",
             "ground_truth": 23, "verify_with": {"type": "NumericExact"}},
            {"name": "cites_source", "type": "bool", "description": "Whether a source is cited",
             "ground_truth": True, "verify_with": {"type": "TraceRegex", "pattern": "\\[\\d+\\]"}},
        ]},
        "rubric": {"traits": [
            {"name": "clarity", "kind": "llm", "description": "Is the answer clear?", "min_score": 1, "max_score": 5},
            {"name": "no_hedging", "kind": "regex", "pattern": "(?i)maybe|perhaps", "invert": True},
        ]},
    }],
    "responses": [{"question_id": "q1", "model": "model-a",
                   "text": "Human somatic cells are diploid, containing 46 chromosomes organized into 23 pairs."}],
}


def benchmark(**changes) -> dict:
    """A deep copy of BENCHMARK with top-level keys replaced."""
    doc = copy.deepcopy(BENCHMARK)
    doc.update(changes)
    return doc


def write_json(path: Path, doc) -> Path:
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return path


def response_lines(benchmark_ref: str, rows: list[tuple[str, str, str]]) -> str:
    return "".join(json.dumps({"benchmark": benchmark_ref, "question_id": q, "model": m, "text": t}) + "\n"
                   for q, m, t in rows)


def events(led: ledger.Ledger, type: str | None = None) -> list[ledger.Event]:
    return list(led.read(types=[type] if type else None))


def types(led: ledger.Ledger) -> list[str]:
    return [e.type for e in led.read()]


def streamed_document(fh: IO[bytes], read_size: int) -> dict | None:
    """A native benchmark file as ``formats.stream.read_document`` gives it (a window of
    ``read_size`` bytes at a time), its arrays put back together; None when it says no."""
    got: dict = {}
    try:
        for key, number, item in read_document(fh, frozenset({"questions", "responses"}), read_size):
            if number is None:
                got[key] = item
            elif number < 0:
                got[key] = []
            else:
                got[key].append(item)
    except NotStreamable:
        return None
    return got


def write_sums_benchmark(path: Path, name: str, count: int) -> Path:
    """A native benchmark ``name`` of ``count`` questions q0.. ("What is i plus one?", one int
    field) and no responses."""
    questions = [{"id": f"q{i}", "question": f"What is {i} plus one?", "template": {"fields": [
        {"name": "value", "type": "int", "description": "The sum", "ground_truth": i + 1,
         "verify_with": {"type": "NumericTolerance", "tolerance": 0, "mode": "absolute"}}]}}
        for i in range(count)]
    path.write_text(json.dumps({"format": "evalledger/benchmark@1", "name": name, "questions": questions}))
    return path


def home_with_long_responses(folder: Path, cases: int, name: str, sentences: int = 40) -> Path:
    """A home in ``folder`` holding ``cases`` ingested arithmetic cases whose responses are ~1.2 KB,
    as real ones are (a memory test's cases must weigh what real cases weigh); ``sentences``
    30-byte sentences a response (40: ~1.2 KB; 33,000: ~1 MB)."""
    from evalledger.stages.intake import ingest_path
    from evalledger.testing.arithmetic import arithmetic_benchmark
    doc = arithmetic_benchmark(cases // 2, name)
    for response in doc["responses"]:
        response["text"] += " Worked through step by step. " * sentences
    source = folder / f"{name}-{cases}.json"
    source.write_text(json.dumps(doc))
    home = folder / f"home-{name}-{cases}"
    with ledger.open_ledger(home) as led:   # responses up to the format's 1,000,000 characters
        assert ingest_path(led, source, max_response_chars=1_000_000).ok
    return home
