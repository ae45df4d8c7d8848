"""The one exception type for bad command-line input, shared by every subcommand."""


class UsageError(Exception):
    """Bad input: printed as `error: ...` on stderr with exit code 2."""
