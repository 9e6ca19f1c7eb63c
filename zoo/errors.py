"""Every error zoo raises on purpose, in one place.

The CLI renders these as one clean message; anything else is a bug and shows a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping


class ZooError(Exception):
    """Base class of zoo's own errors."""


class ZooWarning(UserWarning):
    """Base class of zoo's warnings: something worked, but not quite as written. The CLI prints them as
    ``warning: <message>``."""


class RecipeWarning(ZooWarning):
    """A recipe or override was applied with a change the user should know of (options dropped, ...)."""


class RecipeError(ZooError, ValueError):
    """A recipe that cannot be built: names the file, the field path, the cause and a fix.

    ``errors`` holds every problem found, as ``(path, message)`` pairs, so a user fixes them in one go.
    ``origins`` maps the dotted paths that overrides set (``train.lr``) to the override (``--set train.lr=abc``):
    an error at or under one names it as its source instead of ``source`` (the file); an error above one (a rule
    that read it) names both.
    """

    def __init__(
        self,
        errors: list[tuple[str, str]] | str,
        *,
        source: str | None = None,
        origins: Mapping[str, str] | None = None,
    ) -> None:
        if isinstance(errors, str):
            errors = [("", errors)]
        self.errors = list(errors)
        self.source = source
        self.origins = dict(origins or {})
        super().__init__(self._render())

    def source_of(self, path: str) -> str | None:
        """Where the value at ``path`` came from: the override that set it, else ``source``."""
        own = [key for key in self.origins if path == key or path.startswith(f"{key}.")]
        if own:
            return self.origins[max(own, key=len)]
        read = sorted(key for key in self.origins if path and key.startswith(f"{path}."))
        if read:
            flags = ", ".join(self.origins[key] for key in read)
            return f"{self.source} with {flags}" if self.source else flags
        return self.source

    def _render(self) -> str:
        sources = [self.source_of(path) for path, _ in self.errors]
        if len(self.errors) == 1:
            path, msg = self.errors[0]
            where = f"{sources[0]}: " if sources[0] else ""
            return f"{where}{path + ': ' if path else ''}{msg}"
        common = sources[0] if len(set(sources)) == 1 else self.source if self.source in sources else None
        lines = [f"{common + ': ' if common else ''}{len(self.errors)} errors in recipe"]
        for (path, msg), own in zip(self.errors, sources, strict=True):
            lines.append(f"  {own + ': ' if own and own != common else ''}{path or '<recipe>'}: {msg}")
        return "\n".join(lines)


class UnknownComponentError(ZooError, KeyError):
    """A component kind or name that nothing registered."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain
        return str(self.args[0]) if self.args else ""


class PluginError(ZooError):
    """A plugin that could not be loaded or that registered something invalid."""


class HFImportError(ZooError, ValueError):
    """A Hugging Face checkpoint that zoo cannot import faithfully: every problem found, in one message.

    ``problems`` lists unsupported config options, or the missing, unexpected and mis-shaped weights by name.
    """

    def __init__(self, problems: list[str] | str, *, source: str | None = None) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        self.source = source
        where = f"{source}: " if source else ""
        if len(self.problems) == 1:
            message = f"{where}{self.problems[0]}"
        else:
            message = "\n".join([f"{where}cannot import this checkpoint:", *(f"  {p}" for p in self.problems)])
        super().__init__(message)


class HFExportError(ZooError, ValueError):
    """A zoo model that fits no Hugging Face family (the message says what does not fit each)."""


class TrainError(ZooError):
    """Training or generation that cannot go on: bad data, a mismatched checkpoint, a NaN loss, ...

    The message says what was found, where (file, step), and what to do about it.
    """


class CheckpointError(ZooError, ValueError):
    """A saved file that cannot be loaded as it is: truncated, empty, of another format, not matching its
    checksum, or weights that do not fit their recipe. The message names the file and what is wrong."""


class ArgumentError(ZooError, ValueError):
    """A number (or other argument) outside the range a function accepts: names it, its range and the value."""


class PredictError(ZooError, ValueError):
    """``zoo predict`` cannot label these inputs with this model: a model that generates instead, an input
    without a mask, an unreadable image, no tokenizer. The message names the input or folder and the fix."""


class PlanError(ZooError, ValueError):
    """``zoo plan`` cannot answer: an unknown accelerator (the known ones are listed), zero devices, a batch
    that does not split over them, or a model whose training step does not fit even at micro-batch 1 (with
    what the memory went to and what would make it fit)."""
