"""Budget caps of one run: at most N model calls, at most X USD (``run --max-calls/--max-cost``).

Every port of a run (each profile's judge, the answering models) shares one ``Budget``. The port
asks ``admit`` before it calls a model (a reused or replayed answer is free and never asks) and
reports each recorded attempt's cost with ``spend``. Once a cap is reached, ``admit`` raises
``BudgetExhausted``: the dispatcher leaves that case pending (no ``stage.failed``) and starts no
new case, so a later run with a larger budget finishes the work. Calls already admitted finish,
so a run may go past ``max_cost`` by the calls in flight when it was reached (at most the
judge's concurrency).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


class BudgetExhausted(Exception):
    """A call was refused because the run's budget is spent (the case stays pending)."""


@dataclass
class Budget:
    """Calls made and USD spent by one run, against its caps (None: no cap)."""

    max_calls: int | None = None
    max_cost: float | None = None
    calls: int = 0
    cost: float = 0.0
    unpriced: int = 0                           # attempts billed by a model the price table lacks
    stopped: str | None = None                  # why the budget refused, once it has
    refused_cases: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def admit(self, case_id: str) -> None:
        """Count one model call for ``case_id``, or raise BudgetExhausted when a cap is reached."""
        with self._lock:
            reason = self._reached()
            if reason is not None:
                self.stopped = self.stopped or reason
                self.refused_cases.add(case_id)
                raise BudgetExhausted(reason)
            self.calls += 1

    def withdraw(self) -> None:
        """Take back one admitted call that sent nothing (the breaker refused it, or it was cancelled)."""
        with self._lock:
            self.calls -= 1

    @property
    def capped(self) -> bool:
        """True when a cap is set (without one the budget only counts)."""
        return self.max_calls is not None or self.max_cost is not None

    def spend(self, cost: float | None, unpriced: bool = False) -> None:
        """Add the cost of one recorded attempt; ``unpriced``: it was billed, at a price nobody knows."""
        with self._lock:
            self.cost += cost or 0.0
            self.unpriced += bool(unpriced)

    def cost_usd(self) -> float | None:
        """What the run's calls cost in USD (6 decimals), or None when one was unpriced."""
        return None if self.unpriced else round(self.cost, 6)

    def refused(self, case_id: str) -> bool:
        """True when a call of ``case_id`` was refused: its outputs are incomplete, it stays pending."""
        return case_id in self.refused_cases

    def _reached(self) -> str | None:
        if self.max_calls is not None and self.calls >= self.max_calls:
            return f"the call budget is spent (--max-calls {self.max_calls}: {self.calls} call(s) made)"
        if self.max_cost is not None and self.cost >= self.max_cost:
            return (f"the cost budget is spent (--max-cost {self.max_cost:g} USD: "
                    f"{self.cost:.6f} USD spent)")
        return None
