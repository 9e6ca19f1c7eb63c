"""Every error zoo raises on purpose, in one place.

The CLI renders these as one clean message; anything else is a bug and shows a traceback.
"""

from __future__ import annotations


class ZooError(Exception):
    """Base class of zoo's own errors."""


class RecipeError(ZooError, ValueError):
    """A recipe that cannot be built: names the file, the field path, the cause and a fix.

    ``errors`` holds every problem found, as ``(path, message)`` pairs, so a user fixes them in one go.
    """

    def __init__(self, errors: list[tuple[str, str]] | str, *, source: str | None = None) -> None:
        if isinstance(errors, str):
            errors = [("", errors)]
        self.errors = list(errors)
        self.source = source
        super().__init__(self._render())

    def _render(self) -> str:
        where = f"{self.source}: " if self.source else ""
        if len(self.errors) == 1:
            path, msg = self.errors[0]
            return f"{where}{path + ': ' if path else ''}{msg}"
        noun = f"{len(self.errors)} errors"
        lines = [f"{where}{noun} in recipe"]
        lines += [f"  {path or '<recipe>'}: {msg}" for path, msg in self.errors]
        return "\n".join(lines)


class UnknownComponentError(ZooError, KeyError):
    """A component kind or name that nothing registered."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain
        return str(self.args[0]) if self.args else ""


class PluginError(ZooError):
    """A plugin that could not be loaded or that registered something invalid."""
