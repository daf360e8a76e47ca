"""Telling an interrupt (a signal's exception) from a failure, when Python has wrapped it.

The watch daemon abandons work by raising ``Abandoned`` (a ``BaseException``) in its main thread
wherever it is; Ctrl-C raises ``KeyboardInterrupt``. Python turns some of these into ordinary
exceptions: in 3.11 an exception inside ``__set_name__`` (pydantic runs it while it builds a
model class, as a lazily imported prompt module does) becomes ``RuntimeError("Error calling
__set_name__ ...")`` caused by it. Caught as a failure, our own stop would be recorded as a
case's ``stage.failed`` or a file's rejection, for good. A broad ``except Exception`` that records
something asks ``interrupt_behind`` first and raises the interrupt instead.
"""

from __future__ import annotations


def interrupt_behind(exc: BaseException) -> BaseException | None:
    """The interrupt ``exc`` is, or was raised from or while handling; None for a plain failure.

    An interrupt is an exception that is not an ``Exception`` (``Abandoned``, ``KeyboardInterrupt``,
    ``SystemExit``); ``asyncio.CancelledError`` is one too, but it is handled where it is expected.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if not isinstance(current, Exception):
            return current
        current = current.__cause__ or current.__context__
    return None


def reraise_interrupt(exc: BaseException) -> None:
    """Raise the interrupt behind ``exc`` if there is one (see ``interrupt_behind``); else return."""
    interrupt = interrupt_behind(exc)
    if interrupt is not None:
        raise interrupt from None
