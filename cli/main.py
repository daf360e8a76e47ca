"""Entry point of ``evalledger``: global options, then one sub-command per public operation.

Each command module under ``cli/`` has ``register(subparsers)`` that adds its commands with
``set_defaults(func=handler)``; a handler takes the parsed args and returns the exit code:
0 ok, 1 findings (failed verify, rejected input), 2 usage error.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from evalledger.cli.errors import UsageError  # one class however this module is loaded (script or -m)
from evalledger.ledger import EnvelopeError, LedgerError

# Command modules, in the order their commands appear in --help.
COMMAND_MODULES = [
    "evalledger.cli.ledger_commands",
    "evalledger.cli.intake_commands",
    "evalledger.cli.run_commands",
    "evalledger.cli.watch_commands",
    "evalledger.cli.demo",
    "evalledger.cli.report_commands",
]




def build_parser() -> argparse.ArgumentParser:
    """The ``evalledger`` argument parser with every command module's commands."""
    parser = argparse.ArgumentParser(
        prog="evalledger",
        description="An event-sourced ledger for LLM-as-judge evaluation.",
    )
    parser.add_argument("--home", default=None,
                        help="ledger home directory (default: $EVALLEDGER_HOME or ./evalledger)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; the exit code (0 ok, 1 findings, 2 usage error)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except (UsageError, LedgerError, EnvelopeError) as exc:
        print(f"evalledger {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except OSError as exc:  # a path that cannot be used (missing folder, a file where a folder goes)
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"evalledger {args.command}: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # Every command commits whole batches only, so what is in the ledger stays valid.
        print(f"\nevalledger {args.command}: interrupted; everything committed before it is kept "
              "(running the command again carries on)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
