"""Re-bind the responses of earlier versions of a benchmark to its latest version: ``evalledger rebind``.

A fixed ground truth makes a new version (a new benchmark id). The responses already ingested
stay with the version they were judged against; ``rebind`` opens, for each of them whose
question the latest version still has, a case of the latest version with the same response, and
records that it did so (``responses.registered`` with ``rebound_from``). Case ids come from the
benchmark, question, model and response, so running it twice opens nothing new.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace

from evalledger.ledger import Ledger, event_id
from evalledger.stages import intake_events as ev
from evalledger.stages.formats import ParsedResponse
from evalledger.stages.intake import registered_benchmarks


class RebindError(LookupError):
    """No benchmark of that name, or nothing to re-bind it from."""


@dataclass
class RebindResult:
    """What ``rebind`` did: the latest version, and per earlier version what moved and what could not."""

    name: str
    latest: str
    version: int
    opened: int = 0
    already: int = 0
    dropped: list[str] = field(default_factory=list)      # "question q3 (model m): not in the latest version"
    sources: list[str] = field(default_factory=list)      # the earlier benchmark ids taken from


def rebind(led: Ledger, name: str) -> RebindResult:
    """Open the responses of every earlier version of ``name`` as cases of its latest version."""
    versions: dict[str, dict] = {}
    for event in registered_benchmarks(led):
        if event.data["name"] == name or event.data["benchmark"] == name:
            versions[event.data["benchmark"]] = event.data
    if not versions:
        raise RebindError(f"no benchmark named {name!r} in this ledger")
    latest = list(versions.values())[-1]
    kinds = {v["kind"] for v in versions.values()}
    if len(versions) == 1:
        raise RebindError(f"{latest['name']!r} has one version; nothing to re-bind")
    if len(kinds) > 1:
        raise RebindError(f"benchmarks named {latest['name']!r} are of different kinds ({', '.join(sorted(kinds))}); "
                          "they are not versions of one another")
    questions = {q["id"] for q in latest["questions"]}
    result = RebindResult(latest["name"], latest["benchmark"], latest.get("version") or 1)
    batch = []
    for old_id in list(versions)[:-1]:
        responses, seen = [], set()
        for event in led.read(types=["case.opened"]):
            d = event.data
            if d.get("benchmark") != old_id:
                continue
            key = (d["question_id"], d.get("model"), d["response"])
            if key in seen:
                continue
            seen.add(key)
            if d["question_id"] not in questions:
                result.dropped.append(f"question {d['question_id']} (model {d.get('model')}): not in the latest version")
                continue
            responses.append(ParsedResponse(d["question_id"], d.get("model"), d["response"], f"case {d['case_id']}"))
        if not responses:
            continue
        result.sources.append(old_id)
        digest = hashlib.sha256(f"rebind:{old_id}->{latest['benchmark']}".encode()).hexdigest()
        source = {"file": f"rebind of {old_id}", "sha256": digest}
        cause = event_id(f"benchmark:{latest['benchmark']}", "benchmark.registered", latest["benchmark"])
        cases = ev.cases(latest, responses, source, cause)
        record = list(ev.responses_parts(latest, source, [e.data["case_id"] for e in cases], len(cases), cause))
        record[0] = replace(record[0], data={**record[0].data, "rebound_from": old_id})
        batch += [*record, *cases]
    if batch:
        before = led.head().seq
        stored = led.append(batch)
        opened = [e for e in stored if e.type == "case.opened"]
        result.opened = sum(1 for e in opened if e.seq > before)
        result.already = len(opened) - result.opened
    return result
