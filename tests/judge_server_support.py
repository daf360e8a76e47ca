"""Shared by the tests that run ``evalledger run --judge openai`` against a stand-in server on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

from evalledger import ledger
from evalledger.testing.stand_in import StandIn

SAMPLE = Path(__file__).resolve().parents[1] / "benchmarks" / "samples" / "pharmacology.benchmark.json"


def judge_calls(home: Path) -> list[dict]:
    """Every judge.called payload, after checking the hash chain."""
    with ledger.open_ledger(home) as led:
        assert led.verify().ok
        return [e.data for e in led.read(types=["judge.called"])]


def run_openai(run_cli, home: Path, server: StandIn, key: str, *args: str, timeout: float = 60):
    """``evalledger run --judge openai --quiet ARGS`` against ``server`` (already started), with ``key``."""
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_MODEL": "stand-in-judge-1", "OPENAI_API_KEY": key}
    return run_cli("run", "--judge", "openai", "--quiet", *args, home=home, env=env, timeout=timeout)
