"""Issue 13 item 2: a file replaced or growing while it is ingested.

Intake reads a file once and hashes, size-checks and parses that one read; what it files away in
processed/ is what it read. A second process swaps the inbox file as fast as it can meanwhile.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time

from evalledger import ledger
from evalledger.stages.intake import ingest_bytes, ingest_path
from watch_support import benchmark_file

SWAPS = 800

SWAPPER = """
import os, sys, time
staging, target = sys.argv[1], sys.argv[2]
names = sorted(os.listdir(staging), key=lambda n: int(n.split('.')[0]))
for name in names:
    tmp = target + '.swap'
    os.link(os.path.join(staging, name), tmp)
    os.replace(tmp, target)          # atomic: the inbox name always holds one whole file
    time.sleep(0.002)
"""


def test_a_file_swapped_during_ingest_is_recorded_under_its_own_hash_and_filed_as_read(tmp_path):
    home = ledger.init_home(tmp_path / "home")
    staging = tmp_path / "staging"
    staging.mkdir()
    contents = {}
    for i in range(SWAPS):
        contents[f"bench-{i}"] = benchmark_file(i, questions=1, models=("m",))
        (staging / f"{i}.json").write_bytes(contents[f"bench-{i}"])
    target = home / "inbox" / "drop.json"
    swapper = subprocess.Popen([sys.executable, "-c", SWAPPER, str(staging), str(target)])
    ingests = 0
    with ledger.open_ledger(home) as led:
        while swapper.poll() is None or target.exists():
            try:
                ingest_path(led, target, from_inbox=True)
                ingests += 1
            except FileNotFoundError:   # between our move and the swapper's next drop
                time.sleep(0.0005)
        assert swapper.wait() == 0
        received = [e.data for e in led.read(types=["file.received"])]
        assert ingests > 20 and len(received) > 20
        for data in received:
            assert hashlib.sha256(contents[data["benchmark_name"]]).hexdigest() == data["sha256"], \
                f"{data['benchmark_name']} recorded under another file's hash"
        for kept in (home / "processed").iterdir():
            assert hashlib.sha256(kept.read_bytes()).hexdigest() == kept.stem, f"processed/{kept.name}"
        # Every content dropped again: either it is new, or "known" as itself.
        for name, raw in contents.items():
            again = ingest_bytes(led, raw, "again.json")
            assert again.status in ("accepted", "known")
            assert again.benchmark_name == name
    assert not list((home / "rejected").iterdir())


GROWER = """
import sys, time
path = sys.argv[1]
with open(path, 'ab') as fh:
    for _ in range(4000):
        fh.write(b' ' * 256)
        fh.flush()
"""


def test_a_file_growing_past_max_bytes_during_ingest_is_never_accepted_over_the_limit(tmp_path):
    limit = 64 * 1024
    home = ledger.init_home(tmp_path / "home")
    attempts = 0
    with ledger.open_ledger(home) as led:
        for attempt in range(12):
            path = tmp_path / f"growing-{attempt}.json"
            path.write_bytes(benchmark_file(attempt, questions=1, models=("m",)))
            grower = subprocess.Popen([sys.executable, "-c", GROWER, str(path)])
            while grower.poll() is None:
                result = ingest_path(led, path, max_bytes=limit)
                attempts += 1
                if result.status == "rejected":
                    assert "over the limit of 65536 bytes" in result.errors[0]["reason"]
            grower.wait()
        sizes = [e.data["size"] for e in led.read(types=["file.received"])]
        rejected = list(led.read(types=["benchmark.rejected"]))
    assert attempts > 12 and sizes and rejected
    assert max(sizes) <= limit, "accepted past the limit"
    for kept in (home / "processed").iterdir():
        assert kept.stat().st_size <= limit
