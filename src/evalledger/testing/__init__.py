"""Kits for tests of evalledger and of code built on it: a stand-in judge server, synthetic events."""
