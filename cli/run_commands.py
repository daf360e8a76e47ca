"""``evalledger run``: process everything pending until idle, then exit (no domain logic here).

``add_judge_options`` and ``run_settings`` are the judge and config options any command that runs
the stages takes (``run``; the watch daemon can share them).
"""

from __future__ import annotations

import sys

from evalledger.cli.errors import UsageError
from evalledger.cli.ledger_commands import open_existing
from evalledger.cli.progress import Progress
from evalledger.stages.config import ConfigError, run_layer
from evalledger.stages.dispatcher import RunSettings, run_until_idle
from evalledger.stages.judge import JudgeError


def add_judge_options(p) -> None:
    """--judge, --model, --config, --set, --no-cache, --concurrency, --response-format."""
    p.add_argument("--judge", choices=("offline", "openai", "replay"), default=None,
                   help="judge backend (default: the config's judge_backend, else offline)")
    p.add_argument("--model", default=None, help="judge model (openai: required unless OPENAI_MODEL is set)")
    p.add_argument("--config", dest="config_file", default=None, metavar="FILE",
                   help="a TOML or JSON file of VerificationConfig keys (wins over a benchmark's config)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="one config key (dotted for nested: audit.high_severe_min=4); wins over --config")
    p.add_argument("--no-cache", action="store_true", help="do not reuse recorded judge replies")
    p.add_argument("--concurrency", type=int, default=None, help="judge calls in flight at once")
    p.add_argument("--response-format", choices=("json_schema", "json_object", "prompt"), default=None,
                   help="how the openai judge sends the reply schema (default: the config's "
                        "judge_response_format, else json_schema; a refusal moves to the next mode)")


def run_settings(args, **flags) -> RunSettings:
    """The dispatcher's settings from ``add_judge_options``' arguments; a bad key is a usage error."""
    try:
        layer = run_layer(args.config_file, args.sets)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    if args.concurrency is not None and args.concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    options = {"concurrency": args.concurrency} if args.concurrency else {}
    if getattr(args, "response_format", None):
        options["response_format"] = args.response_format
    settings = RunSettings(config_layer=layer, judge_backend=args.judge, judge_model=args.model,
                           judge_options=options, no_cache=args.no_cache, **flags)
    try:
        settings.check_judge()
    except (ConfigError, ValueError, JudgeError) as exc:   # no model, no key, a bad judge option
        raise UsageError(str(exc)) from None
    return settings


def register(sub) -> None:
    """Add the ``run`` command."""
    p = sub.add_parser("run", help="judge every pending case until idle, then exit",
                       description="Process everything pending until idle, then exit. The judge defaults "
                                   "to the configuration's judge_backend, which defaults to offline.")
    add_judge_options(p)
    p.add_argument("--retry-failed", action="store_true", help="try the cases with stage.failed again")
    p.add_argument("--quiet", action="store_true", help="no progress display")
    p.set_defaults(func=cmd_run)


def cmd_run(args) -> int:
    """Run until idle; exit 1 when a case failed (its stage.failed says why), else 0."""
    settings = run_settings(args, retry_failed=args.retry_failed)
    progress = None if args.quiet else Progress(sys.stderr)
    with open_existing(args) as led:
        try:
            summary = run_until_idle(led, settings, progress)
        except (ConfigError, ValueError, JudgeError) as exc:   # a judge that cannot be set up
            raise UsageError(str(exc)) from None
    if summary.busy:
        print("another run is processing this ledger in this process; it will take these cases")
        return 0
    if summary.cases == 0:
        print("nothing pending")
        if args.config_file or args.sets:
            print("  a new --config or --set applies to cases not judged yet; to judge the judged ones again "
                  "under it, replay them into a new home: evalledger replay --into DIR --set KEY=VALUE "
                  "(answers from the recorded calls) or with --live")
        return 0
    if settings.judge_settings().backend == "offline":
        print("judge: offline, a heuristic baseline, not a language model; use --judge openai for verdicts "
              "that matter")
    print(f"run {summary.run_id}: {summary.cases} case(s), {summary.judged} judged, {summary.failed} failed, "
          f"{summary.judge_calls} judge call(s), {summary.retries} retr{'y' if summary.retries == 1 else 'ies'}")
    for failure in summary.failures:
        print(f"  failed {failure['stage']} case {failure['case_id']}: {failure['reason']}")
    return 1 if summary.failed else 0
