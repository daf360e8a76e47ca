"""Start-up time of ``evalledger --help`` (and ``evalledger COMMAND --help``) against bare Python.

Run:  python benchmarks/perf/cli_startup_bench.py              (30 rounds)
      python benchmarks/perf/cli_startup_bench.py --rounds 3   (CI size)

Each round starts, in turn, ``python -c pass`` (the baseline: the interpreter and its site
set-up, which the CLI cannot avoid), ``python -m evalledger --help`` and
``python -m evalledger verify --help``, and takes each one's wall time from start to exit.
Interleaving keeps the ratio meaningful when other load on the machine comes and goes. The
medians are compared: target ``--help`` within 3x of bare Python, and under 0.15 s of wall time
(a figure that holds on a quiet machine only; on a loaded one read the ratio).

It also lists which heavy modules one ``--help`` imported (``python -X importtime``): target none.
Exit status 0 when every target is met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

RATIO_TARGET = 3.0
WALL_TARGET_S = 0.15
# What a --help must not import: each costs tens to hundreds of milliseconds.
HEAVY = ("aiohttp", "pydantic", "sqlite_utils", "sqlite3", "cryptography", "watchdog", "numpy", "pandas",
         "psycopg", "regex", "dateutil", "evalledger.ledger", "evalledger.stages.dispatcher",
         "evalledger.projections")

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "evalledger --help": [sys.executable, "-m", "evalledger", "--help"],
    "evalledger verify --help": [sys.executable, "-m", "evalledger", "verify", "--help"],
}


def wall(command: list[str]) -> float:
    """Seconds from starting ``command`` to its exit (its output thrown away)."""
    started = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def imported_modules(command: list[str]) -> set[str]:
    """The modules ``command`` (a ``python ...`` command line) imports, from ``-X importtime``."""
    done = subprocess.run([command[0], "-X", "importtime", *command[1:]], capture_output=True, text=True, check=True)
    return {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}


def heavy_in(modules: set[str]) -> list[str]:
    """The HEAVY modules (or their submodules) among ``modules``."""
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def main(argv: list[str] | None = None) -> int:
    """Time the commands round by round, print the medians and ratios, check the targets."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=30, help="rounds of the three commands (default 30)")
    args = parser.parse_args(argv)
    for command in COMMANDS.values():   # warm the file cache and the bytecode
        wall(command)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.rounds):
        for name, command in COMMANDS.items():
            times[name].append(wall(command))
    base = statistics.median(times["python -c pass"])
    print(f"baseline python -c pass: median {base * 1000:.1f} ms over {args.rounds} rounds")
    ok = True
    for name in list(COMMANDS)[1:]:
        median = statistics.median(times[name])
        ratios = [t / b for t, b in zip(times[name], times["python -c pass"])]
        ratio = statistics.median(ratios)
        met = ratio <= RATIO_TARGET
        ok = ok and met
        print(f"{name}: median {median * 1000:.1f} ms, ratio {ratio:.2f}x bare Python "
              f"(target <= {RATIO_TARGET:g}x: {'met' if met else 'MISSED'}); wall target < {WALL_TARGET_S:g} s: "
              f"{'met' if median < WALL_TARGET_S else 'missed (a quiet machine is needed for it)'}")
    heavy = heavy_in(imported_modules(COMMANDS["evalledger --help"]))
    print(f"heavy modules imported by --help: {len(heavy)} (target 0){': ' + ', '.join(heavy) if heavy else ''}")
    return 0 if ok and not heavy else 1


if __name__ == "__main__":
    sys.exit(main())
