"""The ``zoo`` command: a thin shell over the library that renders what it returns.

Commands live in modules by group (``build``: build, validate; ``inspect``: summary; ``registry``: list,
recipes, schema, plugins). To add a group, write ``zoo/cli/<group>.py`` with a ``register(app)`` function
that adds its commands, and name the module in ``COMMAND_MODULES``::

    # zoo/cli/train.py
    from typing import Annotated

    import typer

    def train(recipe: Annotated[str, typer.Argument(help="Recipe file or name.")]) -> None:
        \"\"\"Train a model.\"\"\"
        from zoo.train import fit       # heavy imports (torch) inside the command: `zoo --help` stays fast
        ...

    def register(app: typer.Typer) -> None:
        app.command()(train)

Command modules import nothing heavy at module level and raise errors rather than print them: zoo's own
errors (``ZooError``: bad recipe, unknown component, plugin failure) and OS errors (missing file) are
rendered here, in ``render_error``, as one message without a traceback, with exit status 2; ``--debug``
adds the traceback. Any other exception is a bug and propagates with its traceback.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
import traceback
import warnings
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from zoo.errors import ZooError, ZooWarning

__all__ = ["COMMAND_MODULES", "EXIT_ERROR", "app", "format_error", "main", "render_error"]

COMMAND_MODULES: tuple[str, ...] = (
    "zoo.cli.build",
    "zoo.cli.inspect",
    "zoo.cli.diff",
    "zoo.cli.registry",
    "zoo.cli.hf",
    "zoo.cli.train",
    "zoo.cli.generate",
    "zoo.cli.draw",
    "zoo.cli.predict",
    "zoo.cli.plan",
    "zoo.cli.bench",
)
EXIT_ERROR = 2
RENDERED: tuple[type[BaseException], ...] = (ZooError, OSError)


def format_error(exc: BaseException) -> str:
    """The one-message form of an error: its text (for OS errors, the cause and the file)."""
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.strerror or exc}: {exc.filename}"
    return str(exc)


def render_error(exc: BaseException, *, debug: bool = False) -> None:
    """Print ``exc`` to stderr as ``error: <message>``, after its traceback when ``debug``."""
    from rich.console import Console
    from rich.markup import escape

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    if debug:
        console.print("".join(traceback.format_exception(exc)).rstrip(), markup=False)
    console.print(f"[bold red]error:[/bold red] {escape(format_error(exc))}")


def render_warning(message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> None:
    """``warnings.showwarning`` for commands: zoo's warnings as ``warning: <message>`` on stderr, others as
    Python prints them."""
    if not issubclass(category, ZooWarning):
        _python_showwarning(message, category, *args, **kwargs)
        return
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True, highlight=False, soft_wrap=True).print(f"[yellow]warning:[/yellow] {escape(str(message))}")


_python_showwarning = warnings.showwarning


def plugin_culprit(exc: BaseException) -> str | None:
    """Which installed plugin's code raised ``exc``: ``plugin 'zoo-x' (component attention 'y', z/file.py:12 in
    forward)`` from the innermost frame of a plugin's package, or None when no plugin's code is on the stack."""
    from zoo.plugins import get_registry, plugins

    builtin = {p.name for p in plugins() if p.builtin}
    owners: dict[str, list[Any]] = {}
    for component in get_registry():
        module = getattr(component.factory, "__module__", None) or "zoo."
        if component.plugin not in builtin and not module.startswith(("zoo.", "functools")):
            owners.setdefault(module.split(".")[0], []).append(component)
    frames = traceback.extract_tb(exc.__traceback__)
    tb = exc.__traceback__
    modules = []
    while tb is not None:
        modules.append(tb.tb_frame.f_globals.get("__name__", ""))
        tb = tb.tb_next
    for frame, module in reversed(list(zip(frames, modules, strict=True))):
        found = owners.get(module.split(".")[0])
        if found:
            names = sorted({f"{c.kind} '{c.name}'" for c in found if getattr(c.factory, "__module__", None) == module})
            what = f"component {', '.join(names)}, " if names else ""
            return (
                f"plugin '{found[0].plugin}' ({what}{frame.filename.rsplit('/', 1)[-1]}:{frame.lineno} in {frame.name})"
            )
    return None


class ZooGroup(TyperGroup):
    """The command group that turns zoo's errors into one rendered message and exit status 2, and prints zoo's
    warnings as one line each."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """``--debug`` is zoo's option, accepted anywhere before a ``--``: ``zoo train X --debug`` too."""
        end = args.index("--") if "--" in args else len(args)
        if "--debug" in args[:end]:
            args = ["--debug", *(a for i, a in enumerate(args) if not (a == "--debug" and i < end))]
        return super().parse_args(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        try:
            with warnings.catch_warnings():
                warnings.showwarning = render_warning
                return super().invoke(ctx)
        except RENDERED as exc:
            render_error(exc, debug=bool(ctx.params.get("debug")))
            raise typer.Exit(EXIT_ERROR) from None
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a plugin's code failing at run time is named
            if type(exc).__module__.startswith(("click", "typer")):  # the command's own exits
                raise
            where = plugin_culprit(exc)
            if where is None:
                raise
            resume = (
                " (a run keeps its last complete checkpoint: --resume continues it)"
                if ctx.invoked_subcommand == "train"
                else ""
            )
            failed = ZooError(f"{where} failed: {type(exc).__name__}: {exc}{resume}")
            failed.__traceback__ = exc.__traceback__
            render_error(failed, debug=bool(ctx.params.get("debug")))
            raise typer.Exit(EXIT_ERROR) from None


app = typer.Typer(
    name="zoo",
    cls=ZooGroup,
    help="Build, inspect and list Transformer models assembled from registered components by recipes.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish, PowerShell
    # Plain help: typer's rich help imports markdown rendering, which would double `zoo --help`'s start-up.
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from zoo import __version__

        print(f"zoo {__version__}")
        raise typer.Exit()


@app.callback()
def options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print zoo's version and exit."),
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show the traceback of errors.")] = False,
    disable_plugins: Annotated[
        str | None,
        typer.Option(
            "--disable-plugins",
            metavar="NAMES",
            help="Comma-separated installed plugins to skip (sets ZOO_DISABLE_PLUGINS).",
        ),
    ] = None,
) -> None:
    """Build, inspect and list Transformer models assembled from registered components by recipes."""
    if disable_plugins is not None:
        os.environ["ZOO_DISABLE_PLUGINS"] = disable_plugins
        loaded = sys.modules.get("zoo.plugins")
        if loaded is not None:
            loaded.reset()  # plugins loaded earlier in this process load again, without those named


for _module in COMMAND_MODULES:
    importlib.import_module(_module).register(app)


def main() -> None:
    """Entry point of the ``zoo`` console script."""
    try:
        app(prog_name="zoo")
    finally:
        # At exit the interpreter garbage-collects every object left, and torch leaves hundreds of thousands:
        # half a second of a CLI's run. Frozen objects are skipped; atexit handlers and flushing still run.
        gc.freeze()
