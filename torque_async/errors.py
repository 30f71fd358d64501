"""The error every checker raises for bad input, and the stop signal's unwinding (a leaf
module: it imports nothing of ours)."""

import signal


class UsageError(Exception):
    """Bad input: one line for stderr, exit code 2."""


class Interrupted(BaseException):
    """A stop signal outside the event loop (plan check, set-up, report): unwinds with
    clean-up."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
