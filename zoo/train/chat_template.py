"""Chat templates: the Jinja template a checkpoint's tokenizer_config.json (or chat_template.jinja) ships, rendered
as transformers renders it (a sandboxed environment with ``trim_blocks`` and ``lstrip_blocks``, loop controls, and
its ``raise_exception``, ``strftime_now`` and ``tojson``), so a conversation becomes the same text, and so the same
token ids, as ``tokenizer.apply_chat_template`` gives.
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import cache
from typing import Any

from zoo.errors import TrainError

ROLES = ("system", "user", "assistant", "tool")


def check_messages(messages: Any, where: str) -> list[dict[str, Any]]:
    """``messages`` as a list of ``{"role": ..., "content": str}`` dicts, or a TrainError that says what is wrong."""
    if not isinstance(messages, list) or not messages:
        raise TrainError(f"{where}: messages must be a non-empty list of {{'role': ..., 'content': ...}}")
    for n, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            raise TrainError(f"{where}: message {n} must be a dict with a text 'content'")
        if message.get("role") not in ROLES:
            raise TrainError(f"{where}: message {n} has role {message.get('role')!r}; expected one of {ROLES}")
    return messages


@cache
def _compiled(template: str) -> Any:
    try:
        import jinja2
        import jinja2.ext
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        raise TrainError("chat templates need jinja2: pip install jinja2") from None

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None, sort_keys=False) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    try:
        return env.from_string(template)
    except jinja2.exceptions.TemplateError as exc:
        raise TrainError(f"the tokenizer's chat template does not compile: {exc}") from None


def render(template: str, messages: list[dict[str, Any]], *, add_generation_prompt: bool, **tokens: Any) -> str:
    """The conversation as the template writes it; ``tokens``: the special tokens it may name (``bos_token``...)."""
    import jinja2

    try:
        return _compiled(template).render(messages=messages, add_generation_prompt=add_generation_prompt, **tokens)
    except jinja2.exceptions.TemplateError as exc:
        raise TrainError(f"the tokenizer's chat template refused the conversation: {exc}") from None
