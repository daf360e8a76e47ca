"""Where the shared fixtures are: ``shared/`` beside this checkout (as CI lays it out)."""

from __future__ import annotations

from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared"
if not SHARED.is_dir():  # a checkout elsewhere on a developer machine
    SHARED = Path("/work/shared")
KARENINA = SHARED / "fixtures" / "karenina"
KARENINA_REPLIES = KARENINA / "llm_responses"
assert KARENINA_REPLIES.is_dir(), f"the shared Karenina fixtures are missing (looked in {KARENINA})"
