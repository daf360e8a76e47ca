"""evalledger: an event-sourced ledger for LLM-as-judge evaluation.

The distribution installs this one top-level package. Its layers live in folders at the root of
the checkout and are mapped into the namespace by ``pyproject.toml``:

- ``evalledger.ledger``: the event store (hash chain, backends, verify);
- ``evalledger.stages``: intake, the judge and search ports, and the judgment stages;
- ``evalledger.projections``: read models and reports folded from the events;
- ``evalledger.cli``: the ``evalledger`` command;
- ``evalledger.testing``: kits for tests (a stand-in judge server, synthetic events).
"""

__version__ = "0.2.0"
