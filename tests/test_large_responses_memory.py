"""Cases with 1 MB responses: ``report`` and ``rebuild`` fold them a few at a time. The fold held
a page of 1,024 scanned rows, and an update of up to 5,000 events held them all decoded: 150 such
cases took ``report`` from 57 to 190 MB, and 5,000 would have taken 5 GB."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from evalledger import ledger
from evalledger.testing.peak_rss import peak_rss_mb
from intake_support import home_with_long_responses

MEGABYTE_RESPONSE = 33_000   # 30-byte sentences: a response of about 1 MB (intake takes at most 1,000,000 characters)


def command_peak(home: Path, command: str) -> float:
    """Peak RSS in MB of ``evalledger --home HOME COMMAND`` in a process of its own."""
    code, mb, errors = peak_rss_mb([sys.executable, "-m", "evalledger", "--home", str(home), command])
    assert code == 0, errors[-2000:]
    return mb


@pytest.mark.parametrize("command", ["report", "rebuild"])
def test_folding_cases_with_megabyte_responses_holds_a_few_at_a_time(tmp_path, command):
    few = home_with_long_responses(tmp_path, 10, "few", MEGABYTE_RESPONSE)
    many = home_with_long_responses(tmp_path, 46, "many", MEGABYTE_RESPONSE)   # a 46 MB file: under the 50 MB limit
    with ledger.open_ledger(many, readonly=True) as led:
        sizes = [len(e.data["response"]) for e in led.read(types=["case.opened"])]
    assert len(sizes) == 46 and min(sizes) > 900_000
    small, large = command_peak(few, command), command_peak(many, command)
    assert large - small < 20, f"{command}: {small:.0f} MB for 10 such cases, {large:.0f} MB for 46"
    assert (many / "reports" / "many" / "report.md").is_file()   # the benchmark's report


RUN = ("import sys; from pathlib import Path; from evalledger import ledger\n"
       "from evalledger.stages.dispatcher import RunSettings, run_until_idle\n"
       "in_flight = None if sys.argv[3] == 'default' else int(sys.argv[3])\n"
       "with ledger.open_ledger(Path(sys.argv[1])) as led:\n"
       "    summary = run_until_idle(led, RunSettings(max_cases_in_flight=in_flight))\n"
       "assert summary.judged == int(sys.argv[2]), summary\n")


@pytest.mark.parametrize("in_flight, most", [("1", 25), ("default", 80)])
def test_a_run_over_megabyte_responses_holds_a_few_cases_at_a_time(tmp_path, in_flight, most):
    """A run read pending cases' ``case.opened`` events a page (256 cases) at a time and held the
    page whole: 46 cases with 1 MB responses cost ~70 MB more than 10 even one case at a time. And
    the cases in flight (16 by default) were committed in one transaction, every one of them encoded
    at once: 395 MB for 10 such cases, 630 MB for 46; now a transaction takes a few of them."""
    few = home_with_long_responses(tmp_path, 10, "few", MEGABYTE_RESPONSE)
    many = home_with_long_responses(tmp_path, 46, "many", MEGABYTE_RESPONSE)
    peaks = []
    for home, cases in ((few, 10), (many, 46)):
        code, mb, errors = peak_rss_mb([sys.executable, "-c", RUN, str(home), str(cases), in_flight])
        assert code == 0, errors[-2000:]
        peaks.append(mb)
    assert peaks[1] - peaks[0] < most, f"a run ({in_flight} in flight): {peaks[0]:.0f} MB for 10 such cases, " \
                                       f"{peaks[1]:.0f} for 46"


def test_the_viewers_index_of_megabyte_responses_holds_a_few_at_a_time(tmp_path):
    """The viewer indexes responses (for its text search) in batches of 2,000 events: 46 cases with
    1 MB responses were one batch, held whole; a batch now ends early on long texts."""
    peaks = []
    for cases in (10, 46):
        home = home_with_long_responses(tmp_path, cases, f"v{cases}", MEGABYTE_RESPONSE)
        code, mb, errors = peak_rss_mb([sys.executable, "-m", "evalledger", "--home", str(home), "view",
                                        "--export", str(tmp_path / f"site{cases}")])
        assert code == 0, errors[-2000:]
        assert len(list((tmp_path / f"site{cases}" / "case").iterdir())) == cases
        peaks.append(mb)
    assert peaks[1] - peaks[0] < 25, f"view --export: {peaks[0]:.0f} MB for 10 such cases, {peaks[1]:.0f} for 46"
