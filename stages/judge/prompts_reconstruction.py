"""Prompt of the reconstruction judge (reconstruction-judge.md): score each original claim 0-10.

The judge scores claims; code computes every percentage. The target document is shown for
reference only ("no double-dipping").
"""

from __future__ import annotations

RUBRIC = """SCORING RUBRIC:
- 10: Perfect - all details exactly correct (all entities, dates, relationships)
- 8-9: Substantially correct - minor omissions
- 6-7: Mostly correct - some inaccuracies (e.g. the concern attributed to the wrong party)
- 4-5: Partial - gist correct but significant gaps (e.g. wrong numbers or timeline)
- 2-3: Weak - vaguely related but largely wrong
- 1: Minimal - topic touched but point missed
- 0: Not reconstructed"""


def claims_messages(req) -> list[dict[str, str]]:
    """score_claims: every original claim against the analyst's answers and synthesis."""
    system = (
        "You are evaluating a document reconstruction exercise.\n\n"
        "TASK: For each original claim, determine how well it was reconstructed from the analyst's "
        "answers. Score each claim on its own; do not compute percentages and do not weight claims "
        "by importance.\n\n" + RUBRIC + "\n\n"
        "For EACH claim give: score (0-10), justification (1-2 sentences), evidence_refs (the ids of "
        'the answers, or "synthesis", that contain it; [] when none).\n'
        'Answer with JSON keyed by claim id, every claim once: {"evaluations": {"c1": {"score": 0, '
        '"justification": "...", "evidence_refs": ["q1"]}}}\nReturn ONLY the JSON object, no text around it.')
    claims = "\n".join(f"[{c.id}] {c.text}" for c in req.claims)
    answers = "\n".join(f"- {a.id}: {a.answer}" for a in req.answers)
    user = (f"ORIGINAL CLAIMS (Ground Truth):\n{claims}\n\n"
            f"RECONSTRUCTION ATTEMPT (what the analyst produced):\nQuestion Answers:\n{answers or '(none)'}\n\n"
            f"Synthesis:\n{req.synthesis or '(none)'}")
    if req.target_document:
        user += f"\n\n---\nTARGET DOCUMENT (for reference only, not to help scoring):\n{req.target_document}"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
