"""``evalledger run``: process everything pending until idle, then exit (no domain logic here).

``run_settings`` turns the judge and config options (``cli.commands.add_judge_options``) into the
dispatcher's settings for any command that runs the stages (``run``, the watch daemon).
"""

from __future__ import annotations

import os
import sys

from evalledger.cli.errors import UsageError
from evalledger.cli.ledger_commands import open_existing
from evalledger.cli.progress import Progress
from evalledger.ledger import DiskFull
from evalledger.stages.config import ConfigError, run_layer
from evalledger.stages.dispatcher import RunSettings, run_until_idle
from evalledger.stages.judge import JudgeError
from evalledger.stages.judge.shared_limit import check_shared

# The judge server could not answer (unreachable, credentials refused, failing): the run stopped
# early with its cases pending. Not a finding (1) nor a usage error (2): running again finishes.
EXIT_STOPPED = 3


# --flag -> the judge_options key it sets (docs/judge.md gives the bounds).
PROVIDER_FLAGS = {"temperature": "--temperature", "max_tokens": "--max-tokens",
                  "max_completion_tokens": "--max-completion-tokens", "timeout_s": "--timeout",
                  "max_reply_bytes": "--max-reply-bytes", "breaker_failures": "--breaker-failures",
                  "retry_after_max_s": "--retry-after-max"}


def provider_options(args) -> dict:
    """The JudgeSettings keys the provider flags set; a value out of bounds is a usage error."""
    from pydantic import ValidationError

    from evalledger.stages.config import JudgeOptions
    given = {key: getattr(args, key, None) for key in PROVIDER_FLAGS}
    given = {key: value for key, value in given.items() if value is not None}
    if given.get("temperature") not in (None, "omit"):
        try:
            given["temperature"] = float(given["temperature"])
        except ValueError:
            raise UsageError(f"--temperature takes a number from 0 to 2 or 'omit', not {given['temperature']!r}") from None
    try:
        return JudgeOptions(**given).settings_keys()
    except ValidationError as exc:
        err = exc.errors()[0]
        raise UsageError(f"{PROVIDER_FLAGS[str(err['loc'][0])]}: {err['msg']}") from None


def run_settings(args, **flags) -> RunSettings:
    """The dispatcher's settings from ``cli.commands.add_judge_options``' arguments; a bad key is a usage error."""
    try:
        layer = run_layer(args.config_file, args.sets + repeats_set(args))
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    if args.concurrency is not None and args.concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    options = {"concurrency": args.concurrency} if args.concurrency else {}
    shared = getattr(args, "shared_concurrency", None)
    if shared is not None:
        if shared < 0:
            raise UsageError("--shared-concurrency must be 0 (remove the budget) or more")
        options["shared_concurrency"] = shared
    if getattr(args, "response_format", None):
        options["response_format"] = args.response_format
    options.update(provider_options(args))
    flags.update(run_limits(args, layer))
    settings = RunSettings(config_layer=layer, judge_backend=args.judge, judge_model=args.model,
                           judge_options=options, no_cache=args.no_cache, **flags)
    try:
        backend = settings.judge_settings().backend
    except (ConfigError, ValueError, JudgeError) as exc:
        raise UsageError(str(exc)) from None
    if backend == "replay":
        # The replay judge answers from a source ledger; here the source would be the home itself,
        # which has no answer for a case not yet judged: every pending case would fail for good.
        raise UsageError("the replay judge re-runs a home into a NEW home: use "
                         "'evalledger --home SOURCE replay --into DIR' (run and watch judge with offline or openai)")
    try:
        settings.check_judge()
    except (ConfigError, ValueError, JudgeError) as exc:   # no model, no key, a bad judge option
        raise UsageError(str(exc)) from None
    if settings.max_cost is not None and not getattr(settings.profiles, "profiles", None):
        judge = settings.judge_settings()
        model = judge.model or os.environ.get("OPENAI_MODEL")   # as the openai backend resolves it
        if judge.backend == "openai" and model not in settings.run_config().prices:
            raise UsageError(f"--max-cost needs a price for the judge model {model!r}: "
                             "set prices.<model> in --config")
    return settings


def repeats_set(args) -> list[str]:
    """``--repeats K`` as the ``--set judge_repeats=K`` it stands for (it wins over --config and --set)."""
    from evalledger.stages.config import MAX_REPEATS
    repeats = getattr(args, "repeats", None)
    if repeats is None:
        return []
    if not 1 <= repeats <= MAX_REPEATS:
        raise UsageError(f"--repeats takes 1 to {MAX_REPEATS} (judge each case that many times), not {repeats}")
    return [f"judge_repeats={repeats}"]


def committed_account(led) -> str:
    """What the ledger holds now, read back from it: the head and the cases by state."""
    from evalledger.stages.intake_status import state_counts
    head = led.head()
    per_benchmark = state_counts(led, head.seq)
    count = {state: sum(c[state] for c in per_benchmark.values()) for state in ("judged", "failed", "opened")}
    return (f"Committed: every event up to seq {head.seq}; cases: {count['judged']} judged, "
            f"{count['failed']} failed, {count['opened']} still pending (a rerun takes them up)")


def run_limits(args, layer) -> dict:
    """The ``profiles``, ``max_calls`` and ``max_cost`` RunSettings of ``cli.commands.add_profile_options``'
    arguments."""
    from evalledger.cli.errors import UsageError
    from evalledger.cli.ledger_commands import home_of
    from evalledger.stages.models_file import default_models_path
    from evalledger.stages.profiles import AnsweringPlan, ProfilePlan
    out: dict = {}
    for flag, value in (("--max-calls", getattr(args, "max_calls", None)), ("--max-cost", getattr(args, "max_cost", None))):
        if value is not None and value < 0:
            raise UsageError(f"{flag} must be at least 0, not {value:g}")
    if getattr(args, "max_calls", None) is not None:
        out["max_calls"] = args.max_calls
    if getattr(args, "max_cost", None) is not None:
        out["max_cost"] = args.max_cost
    names = list(getattr(args, "profile_names", None) or [])
    names += [n.strip() for n in (getattr(args, "profile_list", None) or "").split(",") if n.strip()]
    if not names:
        if not hasattr(args, "models_file"):   # not `run` (the watch daemon takes no models file)
            return out
        path = args.models_file or default_models_path(home_of(args))
        models = _models_file(path) if path else None
        if args.models_file and not models.answering:
            raise UsageError(f"--models names {path}, but no --profile or --profiles says which profile "
                             "to run (and it lists no answering models)")
        if models is not None and models.answering:
            out["profiles"] = _priced(AnsweringPlan(models.answering), out, layer)
        return out
    path = args.models_file or default_models_path(home_of(args))
    if path is None:
        raise UsageError(f"--profile needs a models file: pass --models FILE or write {home_of(args)}/models.toml "
                         "(docs/judge.md: the models file)")
    if args.judge or args.model:
        raise UsageError("a profile names its judge: --judge and --model do not go with --profile/--profiles")
    try:
        plan = ProfilePlan(_models_file(path).select(names))
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    out["profiles"] = _priced(plan, out, layer)
    return out


def _models_file(path):
    """The models file at ``path``; its problems are a usage error."""
    from evalledger.cli.errors import UsageError
    from evalledger.stages.models_file import load_models_file
    try:
        return load_models_file(path)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def _priced(plan, limits: dict, layer):
    """``plan``, refused (usage error) under --max-cost when one of its models has no price."""
    from evalledger.cli.errors import UsageError
    from evalledger.stages.config import effective_config
    if limits.get("max_cost") is not None:
        unpriced = plan.unpriced(effective_config(None, layer))
        if unpriced:
            raise UsageError(f"--max-cost needs a price for every model, and the price table has none for "
                             f"{', '.join(unpriced)} (set prices.<model> in --config)")
    return plan


def cmd_run(args) -> int:
    """Run until idle; exit 1 when a case (or an answer) failed (its stage.failed says why), 3 when the
    judge server could not answer and the run stopped early (cases left pending), else 0.

    A spent budget (--max-calls, --max-cost) is an intended stop, not an error: it prints
    ``stopped: ...`` and exits 0 (1 if a case failed); the cases left pending wait for the next run.
    """
    from evalledger.cli.errors import UsageError
    if args.lease_seconds is not None and args.lease_seconds <= 0:
        raise UsageError("--lease-seconds must be more than 0")
    lease = {"lease_seconds": args.lease_seconds} if args.lease_seconds else {}
    settings = run_settings(args, retry_failed=args.retry_failed, **lease)
    progress = None if args.quiet else Progress(sys.stderr)
    with open_existing(args) as led:
        try:
            check_shared(settings.judge_settings(), led)
            summary = run_until_idle(led, settings, progress)
        except (ConfigError, ValueError, JudgeError) as exc:   # a judge that cannot be set up
            raise UsageError(str(exc)) from None
        except DiskFull as exc:
            if progress is not None and progress.tty:
                progress.stream.write("\n")   # off the progress bar's line
            # The account is read back from the ledger after the run stopped: cases in flight
            # when the disk filled may have committed after the append that failed.
            print(f"evalledger run: stopped: the disk is full ({exc.reason}); nothing of the batch that hit it "
                  f"was committed. {committed_account(led)}; free space and run the command again", file=sys.stderr)
            return 1
    if summary.busy:
        print("another run is processing this ledger in this process; it will take these cases")
        return 0
    if summary.cases == 0 and not summary.stopped and not summary.failures:
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
    if summary.model_calls and summary.cost_usd != 0:   # the offline judge costs nothing: no line
        print(f"cost of this run: {summary.model_calls} model call(s), "
              + (f"{summary.cost_usd:.6f} USD" if summary.cost_usd is not None
                 else "unknown (a model with no price in the config's price table)"))
    for failure in summary.failures:
        print(f"  failed {failure['stage']} case {failure['case_id']}: {failure['reason']}")
    if summary.stopped:
        if summary.stop == "judge_unavailable":
            print(f"evalledger run: stopped early: {summary.stopped}; {summary.pending} case(s) left pending, "
                  "none failed by it (run again to finish them)", file=sys.stderr)
            return EXIT_STOPPED
        print(f"stopped: {summary.stopped}; {summary.left_pending} case(s) left pending "
              "(run again, with a larger budget, to finish them)")
    return 1 if summary.failed or summary.failures else 0
