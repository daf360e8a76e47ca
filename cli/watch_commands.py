"""The ``watch`` and ``demo`` commands: the daemon wired to the real entry points.

``watch`` takes the home's watch lock, opens the ledger and runs ``cli.watch.Daemon`` with three
callbacks: intake (``stages.intake.ingest_path``), the dispatcher
(``stages.dispatcher.run_until_idle``) and the projections (``projections.refresh``). Nothing
here judges or renders; see docs/watch.md for the behaviour.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

from evalledger import ledger
from evalledger.cli import daemon_lock
from evalledger.cli.errors import UsageError
from evalledger.cli.intake_commands import check_max_response_chars
from evalledger.cli.ledger_commands import home_of
from evalledger.cli.run_commands import EXIT_STOPPED, run_settings
from evalledger.cli.watch import Callbacks, Daemon, Outcome, WatchOptions
from evalledger.cli.watch_log import Log
from evalledger.ledger.home import HOME_FOLDERS


class LogProgress:
    """The dispatcher's progress as log lines (a daemon's stderr is a log, not a terminal bar)."""

    def __init__(self, log: Log, between_cases=lambda: None, every_seconds: float = 5.0):
        self.log = log
        self.between_cases = between_cases   # the daemon's hook, called as each case finishes
        self.every = every_seconds
        self._last = 0.0

    def start(self, total: int, *counters) -> None:
        self.log("judging", cases=total)
        self._last = time.monotonic()

    def update(self, counters) -> None:
        self.between_cases()
        if time.monotonic() - self._last >= self.every:
            self._last = time.monotonic()
            self.log("progress", cases_done=counters.cases_done, judge_calls=counters.judge_calls,
                     failures=counters.failures)

    def finish(self, counters) -> None:
        """Nothing: the daemon logs the batch's summary itself."""


def real_callbacks(led: ledger.Ledger, settings, log: Log, options: WatchOptions | None = None,
                   checkpointer=None) -> Callbacks:
    """Intake, dispatcher and projections, bound to one open ledger, the run's settings and the
    daemon's intake limits; with a checkpointer, a checkpoint is considered each time the reports
    are refreshed (the head moved)."""
    from evalledger.projections import refresh
    from evalledger.stages.dispatcher import run_until_idle
    from evalledger.stages.intake import ingest_path
    from evalledger.stages.intake_files import put_back_taken
    options = options or WatchOptions()

    def refresh_and_checkpoint():
        paths = refresh(led)
        if checkpointer is not None:
            checkpointer.maybe()
        return paths

    return Callbacks(
        ingest=lambda path: ingest_path(led, path, from_inbox=True, max_response_chars=options.max_response_chars),
        process=lambda between_cases, should_stop: run_until_idle(led, settings, LogProgress(log, between_cases),
                                                                   should_stop),
        refresh=refresh_and_checkpoint,
        head=led.head,
        subscribe=led.subscribe,
        put_back=lambda home: put_back_taken(home, led),
    )


# After abandoning in-flight work, the process exits within this many seconds whatever is left.
EXIT_AFTER_ABANDON_SECONDS = 10.0


def exit_soon(seconds: float = EXIT_AFTER_ABANDON_SECONDS) -> None:
    """Make sure this process ends within ``seconds``: exit 0 then if it is still running.

    Abandoning raises in the main thread wherever it is; should that leave a lock held that a
    worker thread (the judge's recorder) then waits for, the interpreter would wait at exit for
    that thread for ever. Everything committed is in the ledger, so a hard exit loses nothing.
    """
    timer = threading.Timer(seconds, os._exit, args=(0,))
    timer.daemon = True
    timer.start()


def run_daemon(home: Path, settings, options: WatchOptions, log: Log, args=None) -> Outcome:
    """Hold the home's watch lock and run the daemon on it (AlreadyRunning when another holds it)."""
    from evalledger.cli.watch_checkpoints import checkpointer_for
    with daemon_lock.acquire(home):
        for folder in HOME_FOLDERS:   # put back a deleted inbox/, processed/, rejected/ or reports/
            (home / folder).mkdir(exist_ok=True)
        with ledger.open_ledger(home) as led:
            checkpointer = checkpointer_for(args, led, log) if args is not None else None
            outcome = Daemon(home, real_callbacks(led, settings, log, options, checkpointer), options, log,
                             on_abandon=exit_soon).run()
        if outcome.abandoned:
            # The stop may have landed between an append's commit and its mirror write; a writable
            # open completes the mirror, so the home verifies the moment the daemon has exited.
            ledger.open_ledger(home).close()
        return outcome


def cmd_watch(args) -> int:
    """``evalledger watch``: check the options, then run the daemon on the home."""
    home = Path(home_of(args))
    if home.is_file():  # a bare .jsonl or .db ledger has no inbox to watch
        raise UsageError(f"{home} is a ledger file; watch needs a home folder with an inbox "
                         "(evalledger --home DIR init)")
    if not ledger.is_home(home):
        raise UsageError(f"{home}: no evalledger home here (run 'evalledger --home {home} init')")
    if args.rescan_seconds <= 0:
        raise UsageError("--rescan-seconds must be positive")
    if args.grace_seconds < 0:
        raise UsageError("--grace-seconds must not be negative")
    check_max_response_chars(args.max_response_chars)
    options = WatchOptions(rescan_seconds=args.rescan_seconds, polling=args.polling, once=args.once,
                           grace_seconds=args.grace_seconds, max_response_chars=args.max_response_chars)
    log = Log(args.log_format)
    settings = run_settings(args)
    if settings.judge_settings().shared_concurrency and not ledger.store_of(home):
        raise UsageError("--shared-concurrency needs a home bound to a PostgreSQL store shared by several "
                         "workers (--store postgresql://...); a home of its own is limited by --concurrency")
    try:
        outcome = run_daemon(home, settings, options, log, args)
    except daemon_lock.AlreadyRunning as exc:
        if args.log_format == "json":
            log("already_running", level="error", pid=exc.pid, lock=str(exc.path), message=str(exc))
        else:
            print(f"evalledger watch: {exc}", file=sys.stderr)
        return 1
    if outcome.replaced:
        return 1   # the home's store was replaced under the daemon: said in the log, nothing written
    if args.once and outcome.stopped:
        return EXIT_STOPPED   # as `evalledger run`: the judge could not answer, cases are pending
    if args.once and (outcome.errors or outcome.ingested.get("rejected")):
        return 1
    return 0
