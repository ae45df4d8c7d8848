"""The exceptions whose message is shown to the user as it is: bad command-line input, a model that
does not load, settings out of range, a file that is not a trace.

Each may carry a stable message `key` and its `params` besides its English text: `str(exc)` stays the
English sentence (the CLI prints it), and a reader in another language looks the key up in its own
catalog (the app: `app/i18n_errors.py`, catalogs `assets/i18n/<lang>/engine.yaml` as
`engine.<key>`). A parameter may itself be a keyed exception (a detail inside a wider message); it
is rendered in the same language. `decoding/` never imports the app: the key is plain data.
"""

from __future__ import annotations


class Keyed(Exception):
    """A user-facing exception with an English message and, optionally, a catalog key and its
    parameters (`Keyed("line 3: ...", "trace.line", number=3, detail=inner)`)."""

    def __init__(self, message: str = "", key: str | None = None, /, **params):
        super().__init__(message)
        self.key = key
        self.params = params


class UsageError(Keyed):
    """Bad input: printed as `error: ...` on stderr with exit code 2."""


class ModelLoadError(Keyed):
    """A model could not be loaded, in one clear, user-facing line; the CLI prints it and exits 2."""


class SettingsError(Keyed, ValueError):
    """A setting out of its range or of the wrong type (a ValueError, as callers catch)."""


def keyed(message: str, key: str, /, **params) -> SettingsError:
    """A ValueError with a key: for the checks that raise plain ValueErrors."""
    return SettingsError(message, key, **params)
