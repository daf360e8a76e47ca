"""Intake's size limits, in a module that imports nothing (the CLI shows them in --help)."""

DEFAULT_MAX_BYTES = 50 * 2**20
# Per response, in characters. Deep judgment sends the response in several judge requests and
# each is recorded, so one huge response multiplies into the ledger (two 1 MB responses made a
# 171 MB home); 200,000 characters is far beyond a usual answer. The formats allow 1,000,000.
DEFAULT_MAX_RESPONSE_CHARS = 200_000
MAX_RESPONSE_CHARS_LIMIT = 1_000_000
