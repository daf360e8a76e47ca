"""The daemon's checkpoints: sign the ledger every N new events or M minutes, and publish them."""

from __future__ import annotations

import time
from pathlib import Path

from evalledger.cli.errors import UsageError


class Checkpointer:
    """Decides when the daemon signs a checkpoint, signs it, appends it and publishes the copies."""

    def __init__(self, led, key_path: str, every_events: int | None, every_minutes: float | None,
                 publish: list[str], log) -> None:
        from evalledger.cli.proof_commands import load_signer
        signer = load_signer(key_path)
        if every_events is not None and every_events < 1 or every_minutes is not None and every_minutes <= 0:
            raise UsageError("--checkpoint-events must be at least 1 and --checkpoint-minutes positive")
        self.led, self.signer, self.publish, self.log = led, signer, publish, log
        self.every_events = every_events if every_events or every_minutes else 1000
        self.every_seconds = every_minutes * 60 if every_minutes else None
        stored = list(led.read(types=["checkpoint.signed"]))
        self.last_size = stored[-1].data["size"] if stored else 0
        self.last_at = time.monotonic()

    def maybe(self) -> None:
        """Sign a checkpoint when enough new events arrived or enough time passed since the last."""
        from evalledger.cli.proof_commands import publish
        from evalledger.ledger import checkpoint as cps
        head = self.led.head()
        new = head.seq - self.last_size - (1 if self.last_size else 0)   # not counting the last checkpoint's own event
        due = (self.every_events is not None and new >= self.every_events) or (
            self.every_seconds is not None and new > 0 and time.monotonic() - self.last_at >= self.every_seconds)
        if not due:
            return
        try:
            checkpoint, note = cps.make_checkpoint(self.led, self.signer)
        except cps.TreeMismatch as exc:   # said at each pass it is due; the daemon carries on judging
            self.log("checkpoint_refused", level="error", error=str(exc))
            return
        path = cps.record_checkpoint(self.led, checkpoint, note, self.signer.verifier)
        self.last_size, self.last_at = checkpoint.size, time.monotonic()
        self.log("checkpoint", seq=checkpoint.size, hash=checkpoint.head, root=checkpoint.root.hex(),
                 file=str(path) if path else None)
        line = cps.checkpoint_line(checkpoint, note)
        for target in self.publish:
            try:
                self.log("published", target=publish(note, line, target), seq=checkpoint.size)
            except OSError as exc:
                self.log("publish_failed", level="warning", target=target, seq=checkpoint.size, error=str(exc))


def checkpointer_for(args, led, log) -> Checkpointer | None:
    """The daemon's Checkpointer when --checkpoint-key was given, else None."""
    if not getattr(args, "checkpoint_key", None):
        if getattr(args, "publish", None) or getattr(args, "checkpoint_events", None) or \
                getattr(args, "checkpoint_minutes", None):
            raise UsageError("--publish, --checkpoint-events and --checkpoint-minutes need --checkpoint-key")
        return None
    return Checkpointer(led, str(Path(args.checkpoint_key)), args.checkpoint_events, args.checkpoint_minutes,
                        args.publish or [], log)
