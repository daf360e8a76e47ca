"""Real judge requests for schema work: what the stages ask when benchmark files are judged.

``sample_requests(files)`` ingests the files into a temporary home, judges them offline with
deep judgment, search, rubric deep judgment with search and abstention detection switched on
(so every role is asked, and risk for a template's and a rubric's excerpts alike), and
returns one ``(role, typed request)`` per distinct reply schema: the judge requests recorded in
``judge.called``, plus parse, excerpt, reason and trait requests for every template and LLM
trait registered (files without responses, such as Karenina checkpoints, register templates
too). Used by the schema property tests, ``benchmarks/perf/schema_bench.py`` and
``benchmarks/judge_schema_compile.py``.
"""

from __future__ import annotations

import importlib.resources
import json
import tempfile
from pathlib import Path
from typing import Any, Iterable

DEEP_LAYER = {"deep_judgment_enabled": True, "deep_judgment_search_enabled": True,
              "deep_judgment_rubric_mode": "enable_all", "deep_judgment_rubric_search_enabled": True,
              "abstention_enabled": True}


def sample_files() -> list[Path]:
    """The sample benchmarks installed with the package (``evalledger.samples``), editable or not."""
    samples = Path(str(importlib.resources.files("evalledger.samples")))
    return sorted(samples.glob("*.json*"))


def sample_requests(files: Iterable[str | Path]) -> list[tuple[str, Any]]:
    """One (role, typed request) per distinct reply schema of the judge requests ``files`` give rise to."""
    from evalledger import ledger
    from evalledger.stages.dispatcher import RunSettings, run_until_idle
    from evalledger.stages.intake import ingest_path

    with tempfile.TemporaryDirectory(prefix="evalledger-requests-") as tmp:
        home = ledger.init_home(Path(tmp) / "home")
        files = [Path(f) for f in files]
        _search_corpus(Path(home) / "corpus", files)
        with ledger.open_ledger(home) as led:
            for path in files:
                ingest_path(led, path)
            run_until_idle(led, RunSettings(config_layer=DEEP_LAYER))
            events = list(led.read())
    raw = [(e.data["role"], e.data["request"]["payload"]) for e in events
           if e.type == "judge.called" and (e.data.get("request") or {}).get("payload") is not None]
    raw += registered_requests(e.data for e in events if e.type == "benchmark.registered")
    return distinct_by_schema(raw)


def _search_corpus(folder: Path, files: list[Path]) -> None:
    """A local search corpus holding the files' own text, so that excerpt searches find results
    and the judge is asked for their risk (an excerpt whose search finds nothing gets none)."""
    folder.mkdir(parents=True, exist_ok=True)
    for index, path in enumerate(files):
        (folder / f"{index:03d}-{path.stem}.txt").write_text(path.read_text(encoding="utf-8", errors="replace"))


def registered_requests(registrations: Iterable[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """Parse, excerpt, reason and trait request payloads for every registered template and LLM trait."""
    out: list[tuple[str, dict[str, Any]]] = []
    for data in registrations:
        for q in data.get("questions") or []:
            base = {"question": q.get("question", ""), "response": "an answer"}
            fields = [{k: f.get(k) for k in ("name", "type", "description", "values")}
                      for f in (q.get("template") or {}).get("fields", [])]
            if fields:
                out += [("parse", {**base, "fields": fields}),
                        ("extract_excerpts", {**base, "attributes": fields, "max_excerpts": 3}),
                        ("reason", {**base, "attributes": fields})]
            for t in (q.get("rubric") or {}).get("traits", []):
                if t.get("kind") == "llm":
                    kind = "boolean" if t.get("score_kind") == "boolean" else "score"
                    trait = {"name": t["name"], "kind": kind, "min_score": t.get("min_score") or 1,
                             "max_score": t.get("max_score") or 5}
                    out.append(("score_trait", {**base, "trait": trait}))
    return out


def distinct_by_schema(raw: Iterable[tuple[str, dict[str, Any]]]) -> list[tuple[str, Any]]:
    """Typed requests, one per (role, reply schema, request shape): risk requests of a template and
    of a rubric, and with one attribute or excerpts naming their own, are kept apart even when
    their schemas are alike (the same number of excerpts)."""
    from evalledger.stages.judge.registry import ROLE_NAMES, role

    seen: set[tuple[str, str, tuple]] = set()
    out: list[tuple[str, Any]] = []
    for name, payload in raw:
        if name not in ROLE_NAMES:
            continue   # search calls are recorded as judge.called too
        spec = role(name)
        request = spec.request.model_validate(payload)
        shape = (request.subject, bool(request.attribute)) if name == "assess_risk" else ()
        key = (name, json.dumps(spec.reply_schema(request), sort_keys=True), shape)
        if key not in seen:
            seen.add(key)
            out.append((name, request))
    return out
