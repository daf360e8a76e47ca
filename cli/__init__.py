"""The ``evalledger`` command and the watch daemon: argument parsing and printing, no domain logic."""
