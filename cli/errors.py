"""Errors the command line turns into exit codes."""


class UsageError(Exception):
    """A command was called in a way that cannot work; exits 2 with the message."""
