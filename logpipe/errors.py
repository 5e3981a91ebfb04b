"""One error hierarchy for the whole package.

Every error logpipe raises on purpose is a :class:`LogpipeError`.  It carries what went
wrong, where (a file and, when known, a line) and a hint saying what to do about it.  The
CLI has a single handler that prints ``Error: <what> (<file>:<line>)`` and the hint, and
exits with code 2; ``--debug`` re-raises instead.
"""

from __future__ import annotations

from pathlib import Path


class LogpipeError(Exception):
    """Base class: a message, an optional location and an optional hint."""

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        self.hint = hint

    def where(self) -> str:
        """``file:line``, ``file`` or an empty string."""
        if self.path is None:
            return ""
        return f"{self.path}:{self.line}" if self.line is not None else self.path

    def __str__(self) -> str:
        where = self.where()
        return f"{self.message} ({where})" if where else self.message


class InputError(LogpipeError):
    """A path given by the user cannot be read or is not something logpipe understands."""


class DatabaseError(LogpipeError):
    """The database cannot be opened, migrated or queried."""


class QueryError(DatabaseError):
    """A user's SQL failed or tried to write to a read-only database."""


class RunNotFoundError(LogpipeError):
    """A ``--run`` value matches no run, or more than one."""
