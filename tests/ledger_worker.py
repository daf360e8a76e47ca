"""A real writer process for the ledger's concurrency and crash tests.

    python tests/ledger_worker.py LEDGER WORKER COUNT [--forever]

Appends batches of 1 to 5 ``note.added`` events on stream ``case:w<WORKER>``. Every event says
which batch it belongs to and how big that batch is (``text = "<batch>/<index>/<size>/..."``), so
a test can check that no batch was split. Prints ``ready`` once the ledger is open, so a test can
time a SIGKILL to land while it is appending; ``--forever`` never stops on its own.
"""

from __future__ import annotations

import random
import sys

from evalledger import ledger
from evalledger.ledger import NewEvent

PAD = "x" * 1500  # a 5-event batch spans several pages, so a kill can land inside its write


def batch_events(worker: str, batch: int, size: int) -> list[NewEvent]:
    return [NewEvent(f"case:w{worker}", "note.added", {"text": f"{batch}/{i}/{size}/{PAD}", "author": worker},
                     key=f"{worker}:{batch}:{i}") for i in range(size)]


def main(argv: list[str]) -> int:
    path, worker, count = argv[0], argv[1], int(argv[2])
    forever = "--forever" in argv
    rng = random.Random(f"{worker}:{path}")
    led = ledger.open_ledger(path)
    print("ready", flush=True)
    written, batch = 0, 0
    while forever or written < count:
        size = rng.randint(1, 5) if forever else min(rng.randint(1, 5), count - written)
        batch += 1
        led.append(batch_events(worker, batch, size))
        written += size
    led.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
