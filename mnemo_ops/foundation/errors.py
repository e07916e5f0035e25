"""Expected failures: each carries a one-line message and the exit code the CLI should use."""

from mnemo_ops.foundation import exit_codes


class MnemoOpsError(Exception):
    """An expected failure with a one-line message for the user (no traceback is shown)."""

    exit_code = exit_codes.FAILED

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        self.message = message
        if exit_code is not None:
            self.exit_code = exit_code


class ConfigError(MnemoOpsError):
    """The configuration file, an environment variable or a flag is invalid."""

    exit_code = exit_codes.USAGE


class DatabaseError(MnemoOpsError):
    """The memory database is missing, unreadable, not SQLite, or not a Mnemosyne database."""

    exit_code = exit_codes.USAGE


class UsageError(MnemoOpsError):
    """The command was called wrongly (unknown job, job not implemented yet, bad argument)."""

    exit_code = exit_codes.USAGE


class LockHeldError(MnemoOpsError):
    """Another mnemo-ops writer holds the writer lock for this database."""

    exit_code = exit_codes.TEMPFAIL

    def __init__(self, message: str, holder: dict | None = None):
        super().__init__(message)
        self.holder = holder or {}


class JobTimeout(MnemoOpsError):
    """The job ran past the timeout of its manifest (raised inside the job by the runner's alarm)."""
