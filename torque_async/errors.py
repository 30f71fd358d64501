"""The error every checker raises for bad input (a leaf module: it imports nothing of ours)."""


class UsageError(Exception):
    """Bad input: one line for stderr, exit code 2."""
