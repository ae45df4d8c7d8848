"""The exceptions whose message is shown to the user as it is: bad command-line input, a model that
does not load."""


class UsageError(Exception):
    """Bad input: printed as `error: ...` on stderr with exit code 2."""


class ModelLoadError(Exception):
    """A model could not be loaded, in one clear, user-facing line; the CLI prints it and exits 2."""
