"""QA: Ctrl-C in the middle of ``evalledger run`` says what happened, and a re-run carries on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from evalledger import ledger
from evalledger.testing.stand_in import StandIn, StandInThread

REPO = Path(__file__).resolve().parents[1]
AUDIT = REPO / "benchmarks" / "samples" / "verifyfast-cases.audit.jsonl"


def test_sigint_during_run_exits_130_with_a_message_and_a_rerun_finishes(home, run_cli):
    assert run_cli("ingest", AUDIT, home=home).returncode == 0
    with StandInThread(StandIn(delay=0.2)) as stand_in:
        env = {**os.environ, "OPENAI_BASE_URL": stand_in.base_url, "OPENAI_API_KEY": "test"}
        command = [sys.executable, "-m", "evalledger", "--home", str(home), "run", "--judge", "openai",
                   "--model", "stand-in", "--concurrency", "2"]
        process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        process.stderr.readline()          # "cases 0/26 ...": the run has found its work
        time.sleep(1.0)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
        assert process.returncode == 130
        assert b"Traceback" not in err and b"interrupted" in err and b"again" in err
        assert run_cli("verify", home=home).returncode == 0
        rerun = subprocess.run(command + ["--quiet"], env=env, capture_output=True, timeout=120)
        assert rerun.returncode == 0, rerun.stderr
    with ledger.open_ledger(home, readonly=True) as led:
        assert len(list(led.read(types=["credit.scored"]))) == 26
