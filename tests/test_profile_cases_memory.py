"""Opening a profile's cases reads the cases already opened an event at a time and appends the new
ones 1,000 at a time as they are made: its memory does not grow with the cases (it held every
``case.opened`` payload and every new profile case at once, ~10 KB a case)."""

from __future__ import annotations

import sys
from pathlib import Path

from evalledger import ledger
from evalledger.testing.peak_rss import peak_rss_mb
from intake_support import home_with_long_responses

# A run with --profiles cross opens these before judging anything: no judge is called for it.
OPEN = """
import asyncio, sys
from evalledger import ledger
from evalledger.stages.config import VerificationConfig
from evalledger.stages.models_file import parse_models
from evalledger.stages.profiles import ProfilePlan
models = parse_models({"models": {"beta": {"base_url": "http://127.0.0.1:9/v1", "model": "beta-1",
                                           "api_key_env": "BETA_KEY"}},
                       "profiles": {"cross": {"verify": "beta"}}})
with ledger.open_ledger(sys.argv[1]) as led:
    asyncio.run(ProfilePlan([models.profiles["cross"]]).open_cases(led, "r1", VerificationConfig(), False, None))
"""


def profile_cases_peak(tmp_path: Path, cases: int) -> float:
    """Peak RSS (MB) of opening profile ``cross``'s cases in a home of ``cases`` cases."""
    home = home_with_long_responses(tmp_path, cases, "profiled")
    code, mb, errors = peak_rss_mb([sys.executable, "-c", OPEN, str(home)])
    assert code == 0, errors[-2000:]
    with ledger.open_ledger(home, readonly=True) as led:
        profiled = [e.data["origin_case"] for e in led.read(types=["case.opened"]) if e.data.get("profile") == "cross"]
    assert len(profiled) == len(set(profiled)) == cases
    return mb


def test_opening_profile_cases_does_not_grow_with_the_cases(tmp_path):
    small, large = profile_cases_peak(tmp_path, 2000), profile_cases_peak(tmp_path, 8000)
    # what is left is the ids of the cases opened (a set) and caches that stop growing at 10,000
    # entries (1.5 KB a case at these sizes, 0.6 KB from 4,000 to 20,000 cases); it was 7.4
    per_case_kb = (large - small) * 1024 / 6000
    assert per_case_kb < 3.0, f"the peak grows {per_case_kb:.2f} KB a case ({small:.0f} -> {large:.0f} MB)"
