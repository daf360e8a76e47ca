"""Stages: everything that turns inputs into new events (formats, primitives, fuzzy matching, ports, handlers)."""
