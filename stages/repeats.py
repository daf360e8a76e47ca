"""Repeated judging: a case judged ``judge_repeats`` (K) times, its verdict decided by a declared rule.

At K = 1 a stage handler runs as it always did: no seed is sent, no repeat event is written, every
id and byte is what it was. At K > 1 the handler runs once per repeat r = 0..K-1 on a copy of the
case's work that sends ``seed = r`` (and ``temperature = repeat_temperature`` when set) with every
judge call, so each repeat's requests hash apart, are recorded apart and are found apart by replay;
each repeat's events carry ``repeat<r>`` in their idempotency keys. The case's outputs are then:

- repeat 0's own events (excerpts, fields, traits, claims, credit): the case's evidence, once;
- one ``repeat.judged`` per repeat: its sampling, verdict, score, trait scores, claim scores and
  credit score (the other repeats' evidence stays in their ``judge.called`` events);
- ``case.repeated``: the rule, the tie setting, every repeat's verdict, the passes, the flips and
  the case verdict the rule gives;
- the stage's terminal event: a template case's ``case.judged`` carries the rule's verdict (and
  ``repeats``); reconstruction and audit cases keep repeat 0's scores (they have no verdict to vote on).

All of it is committed in one append by the dispatcher, so a crash mid-case redoes the case and the
port answers every repeat's calls from the record: each repeat is judged once.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Awaitable, Callable

from evalledger.ledger import NewEvent
from evalledger.stages.casework import CaseWork

TERMINAL_TYPES = ("case.judged", "claim.scored", "credit.scored")


def repeat_sampling(repeat: int, temperature: float | None) -> dict[str, Any]:
    """What repeat ``repeat`` sends besides the judge's own parameters: its seed, maybe a temperature."""
    sampling: dict[str, Any] = {"seed": repeat}
    if temperature is not None:
        sampling["temperature"] = temperature
    return sampling


def decide(verdicts: list[str], rule: str, tie: str) -> str:
    """The case verdict from its repeats' verdicts: ``all`` passes only when every repeat passed;
    ``majority`` passes when more passed than failed, fails when fewer, and a tie goes to ``tie``."""
    passed = verdicts.count("pass")
    failed = len(verdicts) - passed
    if rule == "all":
        return "pass" if failed == 0 else "fail"
    if passed != failed:
        return "pass" if passed > failed else "fail"
    return tie


def flips(verdicts: list[str]) -> int:
    """How many times the verdict changes from one repeat to the next (repeat order)."""
    return sum(1 for a, b in zip(verdicts, verdicts[1:]) if a != b)


def repeat_summary(outputs: list[NewEvent], repeat: int, sampling: dict[str, Any]) -> dict[str, Any]:
    """One repeat's results read from its output events (``repeat.judged``'s payload)."""
    out: dict[str, Any] = {"repeat": repeat, "sampling": sampling, "verdict": None}
    traits: dict[str, Any] = {}
    claims: dict[str, Any] = {}
    for event in outputs:
        data = event.data
        if event.type == "case.judged":
            out.update(verdict=data.get("verdict"), score=data.get("score"),
                       auto_failed=bool(data.get("auto_failed")), abstained=bool(data.get("abstained")))
        elif event.type == "trait.scored":
            traits[str(data.get("trait"))] = data.get("score")
        elif event.type == "claim.scored":
            claims[str(data.get("claim_id"))] = data.get("score")
        elif event.type == "credit.scored":
            out.update(credit_score=data.get("credit_score"), zone=data.get("zone"))
    out["traits"] = dict(sorted(traits.items()))
    out["claims"] = dict(sorted(claims.items()))
    return out


async def judge_case(handler: Callable[[CaseWork], Awaitable[None]], work: CaseWork) -> None:
    """Run ``handler`` on ``work`` once, or ``judge_repeats`` times with the repeat events (module docstring)."""
    config = work.config
    if config.judge_repeats <= 1:
        await handler(work)
        return
    repeats: list[CaseWork] = []
    for r in range(config.judge_repeats):   # one after another: a repeat's calls never race its twin's
        sub = dataclasses.replace(work, outputs=[], repeat=r,
                                  sampling=repeat_sampling(r, config.repeat_temperature))
        await handler(sub)
        repeats.append(sub)
    summaries = [repeat_summary(sub.outputs, sub.repeat or 0, sub.sampling or {}) for sub in repeats]
    primary = repeats[0].outputs
    work.outputs.extend(e for e in primary if e.type != "case.judged")
    for sub, summary in zip(repeats, summaries):
        sub.outputs = []
        sub.emit("repeat.judged", summary, step="repeat")   # not "judge": repeat 0's own case.judged has that key
        work.outputs.extend(sub.outputs)
    decision = _decision(summaries, config.repeat_rule, config.repeat_tie)
    work.emit("case.repeated", decision, step="repeats")
    judged = next((e for e in primary if e.type == "case.judged"), None)
    if judged is not None:
        work.emit("case.judged", _ruled(judged.data, decision), step="judge", stage=_stage_of(judged))


def _decision(summaries: list[dict[str, Any]], rule: str, tie: str) -> dict[str, Any]:
    """``case.repeated``'s payload: the rule and every repeat's verdict, and what the rule decides."""
    verdicts = [s["verdict"] for s in summaries]
    decision: dict[str, Any] = {"repeats": len(summaries), "rule": rule, "tie": tie, "verdicts": verdicts,
                                "seeds": [s["sampling"].get("seed") for s in summaries]}
    if all(v in ("pass", "fail") for v in verdicts):
        decision.update(passed=verdicts.count("pass"), flips=flips(verdicts),
                        unstable=len(set(verdicts)) > 1, verdict=decide(verdicts, rule, tie))
    else:   # reconstruction and audit repeats score, they do not pass or fail
        decision["verdict"] = None
    return decision


def _ruled(first: dict[str, Any], decision: dict[str, Any]) -> dict[str, Any]:
    """Repeat 0's ``case.judged`` with the rule's verdict (and why, when it differs from repeat 0's)."""
    data = {k: v for k, v in first.items() if k != "case_id"}
    verdict = decision["verdict"]
    if verdict != data.get("verdict"):
        data["reasons"] = list(data.get("reasons") or []) + [
            f"repeats: {decision['passed']} of {decision['repeats']} passed; the {decision['rule']} rule "
            f"decides {verdict}"]
    data["verdict"] = verdict
    data["repeats"] = {k: decision[k] for k in ("repeats", "rule", "tie", "verdicts", "passed", "flips")}
    return data


def _stage_of(event: NewEvent) -> str | None:
    """The stage an output was emitted under (its meta), so the ruled verdict keeps it."""
    return (event.meta or {}).get("stage")


def recorded_repeat_layer(source) -> dict[str, Any]:
    """The repeat settings ``source``'s cases were judged under, as a config layer (empty when no
    case was judged more than once): what a what-if must hold fixed to find each repeat's calls."""
    first = next(iter(source.read(types=["case.repeated"])), None)
    if first is None:
        return {}
    layer = {"judge_repeats": first.data["repeats"], "repeat_rule": first.data["rule"],
             "repeat_tie": first.data["tie"]}
    repeat = next(iter(source.read(types=["repeat.judged"])), None)
    temperature = repeat.data["sampling"].get("temperature") if repeat is not None else None
    if temperature is not None:
        layer["repeat_temperature"] = temperature
    return layer


def replay_hint(source, overrides: dict[str, Any]) -> str | None:
    """Why a replay of a home judged with repeats misses its requests, when that is why: the source
    judged K > 1 times and the replay's ``--set`` layer asks for another K (each repeat's seed is in
    its requests' hashes, so only the same K finds them)."""
    k = recorded_repeat_layer(source).get("judge_repeats")
    if k is None or overrides.get("judge_repeats") == k:
        return None
    return (f"the source judged its cases {k} times (judge_repeats = {k}); each repeat's requests carry its seed, "
            f"so replay them with --set judge_repeats={k}")

