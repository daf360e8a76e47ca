"""Entry point of ``evalledger``: global options, then one sub-command per public operation.

``cli.commands`` declares every command (its arguments and help) with ``set_defaults(func=...)``
naming its handler, which is imported only when the command runs: ``--help`` imports no ledger,
judge or report code. A handler takes the parsed args and returns the exit code: 0 ok,
1 findings (failed verify, rejected input), 2 usage error.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from typing import Any

from evalledger.cli import commands
from evalledger.cli.errors import UsageError  # one class however this module is loaded (script or -m)

# One example a command, shown at the end of its --help (tests/test_cli_forgiving.py checks each
# command has one).
EXAMPLES = {
    "init": "evalledger --home ./evalledger init",
    "note": "evalledger note 3f2a 'parse looks wrong' --author ana   # a case id prefix",
    "log": "evalledger log --type case.judged --from 100 --json",
    "verify": "evalledger verify --expect-head 714:9c1e...   # a head published earlier",
    "export": "evalledger export --out ledger-export.jsonl",
    "import": "evalledger --home ./copy import ledger-export.jsonl",
    "migrate": "evalledger --home ./old-home migrate --to ./new-home",
    "ingest": "evalledger ingest benchmarks/samples/pharmacology.benchmark.json",
    "status": "evalledger status --json",
    "source": "evalledger source 3f2a --out original.jsonl   # the file case 3f2a came from",
    "validate": "evalledger validate my-benchmark.json responses.jsonl",
    "rebind": "evalledger rebind solar-system-basics   # after fixing a ground truth",
    "run": "evalledger run --judge openai --model gpt-4o-mini --concurrency 8",
    "watch": "evalledger watch --log-format json",
    "demo": "evalledger demo --dir /tmp",
    "report": "evalledger report",
    "rebuild": "evalledger rebuild",
    "history": "evalledger history 3f2a --json",
    "override": "evalledger override 3f2a --verdict pass --reason 'synonym accepted' --author ana",
    "confirm": "evalledger confirm 3f2a --author ana --reason 'parse checked by hand'",
    "sample": "evalledger sample --n 50 --stratify verdict --seed 1 --out review-queue.csv",
    "agreement": "evalledger agreement --against ./other-judge --json",
    "whatif": "evalledger whatif --set deep_judgment_fuzzy_match_threshold=0.70:0.95:0.05",
    "replay": "evalledger replay --into ./replayed --set deep_judgment_fuzzy_match_threshold=0.9",
    "diff": "evalledger diff ./evalledger ./replayed --json",
    "keygen": "evalledger keygen --out ~/.evalledger/signer.key --name team-evals",
    "checkpoint": "evalledger checkpoint --key ~/.evalledger/signer.key --publish /mnt/witness/checkpoints.jsonl",
    "prove": "evalledger prove 3f2a --out case-3f2a.proof.json",
    "check-proof": "evalledger check-proof case-3f2a.proof.json --pubkey signer.key.pub",
    "view": "evalledger view --review --compare ./replayed   # then open the URL it prints",
}

HOME_HELP = "ledger home directory (default: $EVALLEDGER_HOME or ./evalledger)"
STORE_HELP = ("keep the home's events in PostgreSQL: postgresql://USER@HOST/DB[?schema=NAME] (default: "
              "$EVALLEDGER_STORE; the home keeps inbox, reports and read models; see docs/scale.md)")


def did_you_mean(word: str, choices) -> str:
    """' (did you mean X?)' naming the closest of ``choices`` to ``word``, or '' when none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class Parser(argparse.ArgumentParser):
    """argparse that suggests the command a mistyped one was close to."""

    def error(self, message: str):
        """Print usage and the message (with a suggestion for an invalid choice), exit 2."""
        bad = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if bad:
            choices = re.findall(r"'([^']*)'", bad.group(2))
            message = f"unknown command {bad.group(1)!r}{did_you_mean(bad.group(1), choices)}"
        super().error(message)


def option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """Every option a parser accepts (``--json``, ``-h``, ...)."""
    return [o for action in parser._actions for o in action.option_strings]


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: global options, then each command module's commands.

    Every command also takes ``--home`` after its name (``evalledger status --home H``), and
    gets a description (its help line) when its module gave none.
    """
    parser = Parser(
        prog="evalledger",
        description="An event-sourced ledger for LLM-as-judge evaluation.",
        epilog="example: evalledger --home ./evalledger status",
    )
    parser.add_argument("--home", default=None, help=HOME_HELP)
    parser.add_argument("--store", default=None, metavar="URL", help=STORE_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for register in commands.REGISTER:
        register(sub)
    helps = {action.dest: action.help for action in sub._choices_actions}
    for name, command in sub.choices.items():
        if "--home" not in option_strings(command):
            # SUPPRESS: given after the command it wins; not given, the global value stays
            command.add_argument("--home", default=argparse.SUPPRESS, help=HOME_HELP)
        if "--store" not in option_strings(command):
            command.add_argument("--store", default=argparse.SUPPRESS, metavar="URL", help=STORE_HELP)
        command.description = command.description or helps.get(name)
        if name in EXAMPLES and not (command.epilog or "").startswith("example"):
            command.epilog = f"example:\n  {EXAMPLES[name]}" + (f"\n\n{command.epilog}" if command.epilog else "")
        command.formatter_class = argparse.RawDescriptionHelpFormatter
    return parser


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse ``argv``; an unknown option is reported by the command it was given to, with a suggestion."""
    args, extras = parser.parse_known_args(argv)
    if extras:
        # argparse types its private sub-parser table loosely; here it is the commands by name.
        commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
        command = commands.get(args.command) if args.command else None  # type: ignore[union-attr]
        target = command or parser
        hints = "".join(did_you_mean(e.split("=", 1)[0], option_strings(target)) for e in extras
                        if e.startswith("-"))
        target.print_help(sys.stderr)
        target.exit(2, f"{target.prog}: error: unrecognized arguments: {' '.join(extras)}{hints}\n")
    return args


def bind_home_to_store(args: argparse.Namespace) -> None:
    """With --store (or $EVALLEDGER_STORE), bind the home to that PostgreSQL store before the command.

    ``init`` binds the home itself (so it can say whether the home existed); ``validate``, which
    writes nothing, reads the store without binding the home (cli/intake_commands.py); every other
    command opens the home as usual and finds the store named in its ``store.url``.
    """
    args.store = args.store or os.environ.get("EVALLEDGER_STORE") or None
    if args.store and args.command not in ("init", "validate"):
        from evalledger import ledger
        ledger.bind_store(args.home or ledger.default_home(), args.store)


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns its exit code (0 ok, 1 findings, 2 usage error)."""
    parser = build_parser()
    args = parse(parser, argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    return run_command(args)


def run_command(args: argparse.Namespace) -> int:
    """Run the parsed command, turning the errors every command may meet into messages and exit codes."""
    import sqlite3

    # Imported here, not at the top: parsing and --help need none of the ledger.
    from evalledger.ledger import DiskFull, EnvelopeError, LedgerError, StoreReplaced
    from evalledger.ledger.persistence import is_disk_full
    # sys.stdout is None when the shell closed it (``>&-``): print() then writes nothing, as before
    watched = sys.stdout = WatchedStdout(sys.stdout) if sys.stdout is not None else None
    try:
        bind_home_to_store(args)
        code = int(args.func(args) or 0)
        if watched is not None:
            watched.flush()   # here, not at exit: output buffered to a full disk is said as such
        return code
    except (DiskFull, StoreReplaced) as exc:   # not usage errors: the message says what is kept and what to do
        print(f"evalledger {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except (UsageError, LedgerError, EnvelopeError) as exc:
        print(f"evalledger {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except sqlite3.Error as exc:   # the read models' own writes (report, watch) on a full disk
        if not is_disk_full(exc):
            raise
        print(f"evalledger {args.command}: error: the disk is full ({exc}); the ledger keeps every event "
              "committed before it; free space and run the command again", file=sys.stderr)
        return 1
    except OSError as exc:  # a path that cannot be used (missing folder, a file where a folder goes)
        where = f"{exc.filename}: " if exc.filename else ""
        if is_disk_full(exc) and watched is not None and exc is watched.failed:
            print(f"evalledger {args.command}: error: standard output: the disk is full ({exc.strerror or exc}): "
                  "what was written there is incomplete; the ledger keeps every event committed before "
                  "it; free space and run the command again", file=sys.stderr)
            return 1
        if is_disk_full(exc):   # a file of the reports or a home folder: not a usage error
            print(f"evalledger {args.command}: error: {where}the disk is full ({exc.strerror or exc}); the "
                  "ledger keeps every event committed before it; free space and run the command again",
                  file=sys.stderr)
            return 1
        print(f"evalledger {args.command}: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # Every command commits whole batches only, so what is in the ledger stays valid.
        print(f"\nevalledger {args.command}: interrupted; everything committed before it is kept "
              "(running the command again carries on)", file=sys.stderr)
        return 130
    finally:
        if watched is not None and sys.stdout is watched:
            sys.stdout = watched.stream
            if watched.failed is not None:
                stdout_to_null()


class WatchedStdout:
    """``sys.stdout`` while a command runs, remembering the error a write or flush of it met: a
    full disk behind standard output (``> /dev/full``) names no file, and was reported as if the
    ledger's own files had met it."""

    def __init__(self, stream: Any, owner: WatchedStdout | None = None):
        self.stream = stream
        self.owner = owner or self     # the text stream, which keeps the error for its buffer too
        self.failed: OSError | None = None

    def write(self, data: Any) -> int:
        try:
            return self.stream.write(data)
        except OSError as exc:
            self.owner.failed = exc
            raise

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as exc:
            self.owner.failed = exc
            raise

    @property
    def buffer(self) -> WatchedStdout:
        """The byte stream under it (``log --json`` and others write bytes), watched the same way."""
        return WatchedStdout(self.stream.buffer, self.owner)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def stdout_to_null() -> None:
    """Point standard output at the null device once writing to it failed (a full disk, a closed
    pipe) and the failure was reported: the interpreter's own flush at exit would otherwise meet
    it again and print it as an ignored exception, exiting 120."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):   # no descriptor to point elsewhere (an in-process caller's)
        pass


if __name__ == "__main__":
    sys.exit(main())
