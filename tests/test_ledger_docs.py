"""The Python example of docs/ledger.md runs as written, and the slicing rule it states holds."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from evalledger import ledger

DOC = Path(__file__).resolve().parents[1] / "docs" / "ledger.md"


def test_the_api_example_runs(tmp_path):
    example = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    result = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert "nothing was appended" in result.stdout and "True seq 2 " in result.stdout
    assert (tmp_path / "backup.jsonl").read_bytes() == (tmp_path / "evalledger" / "events.jsonl").read_bytes()
    assert (tmp_path / "copy.jsonl").read_bytes() == (tmp_path / "backup.jsonl").read_bytes()


def test_a_line_sliced_gives_the_hashed_bytes(home):
    with ledger.open_ledger(home) as led:
        [event] = led.append(ledger.NewEvent("case:a", "note.added", {"text": "slice me"}))
    line = (home / "events.jsonl").read_bytes()
    assert line[:-155] + b"}" == event.canonical()
    assert ledger.envelope.chain_hash(event.prev_hash, line[:-155] + b"}") == event.hash
