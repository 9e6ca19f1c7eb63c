"""How a family's weight table is written and applied, in both directions.

A family's table is a tuple of :class:`Rule` rows: Hugging Face name patterns, zoo name patterns, and the
:class:`Transform` between them. ``{i}`` stands for a layer index and ``{e}`` for an expert index::

    Rule("transformer.h.{i}.ln_1.weight", "blocks.{i}.attention_norm.weight")
    Rule("transformer.h.{i}.attn.c_attn.weight", QKV_WEIGHTS, CONV1D_QKV)   # one fused tensor -> three

A row is in force for a model when all its zoo names exist in that model (and its ``when`` holds for the
recipe), so optional rows (biases, an untied LM head, the head of each task) sit in the same table.
Every transform is exact (transposes, splits, concatenations, reshapes), so zoo -> HF -> zoo gives
bit-identical weights.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import torch
from torch import nn

from zoo.errors import HFImportError

Tensors = Sequence[torch.Tensor]

MISSING = object()


@dataclass(frozen=True)
class Transform:
    """An exact conversion between the Hugging Face tensors of a row and its zoo tensors."""

    name: str
    to_zoo: Callable[[Tensors], list[torch.Tensor]]
    to_hf: Callable[[Tensors], list[torch.Tensor]]


SAME = Transform("same", lambda t: [t[0]], lambda t: [t[0]])

TRANSPOSE = Transform("transpose", lambda t: [t[0].t()], lambda t: [t[0].t()])
"""GPT-2's Conv1D stores weights as (in, out); ``nn.Linear`` as (out, in)."""

SPLIT_QKV = Transform("split q|k|v", lambda t: list(t[0].chunk(3, dim=0)), lambda t: [torch.cat(list(t), dim=0)])
"""A fused qkv bias (3E,) into the q, k and v biases (E,) each."""

CONV1D_QKV = Transform(
    "transpose, split q|k|v",
    lambda t: list(t[0].t().chunk(3, dim=0)),
    lambda t: [torch.cat(list(t), dim=0).t()],
)
"""GPT-2's fused Conv1D ``c_attn`` weight (E, 3E) into the q, k and v weights (E, E) each."""

UNSQUEEZE = Transform("drop batch dim", lambda t: [t[0][0]], lambda t: [t[0].unsqueeze(0)])
"""ViT keeps its position table as (1, P, E); zoo's learned table is (P, E)."""


@dataclass(frozen=True)
class Rule:
    """One row of a family's table: HF names <-> zoo names through ``transform``.

    ``when``, if given, must hold for the recipe (it tells apart rows that share zoo names, such as T5's
    plain ``wi`` and gated ``wi_1``, which are both zoo's ``up_proj``). ``transform`` may also be a function
    of the recipe that returns the transform, for layouts that depend on the head counts (a fused qkv of
    unequal parts, or interleaved per head).
    """

    hf: str | tuple[str, ...]
    zoo: str | tuple[str, ...]
    transform: Transform | Callable[[Any], Transform] = SAME
    when: Callable[[Any], bool] | None = field(default=None, compare=False)
    bind: Callable[[Any, dict[str, str]], dict[str, str]] | None = field(default=None, compare=False)
    """The HF name's fields from the zoo name's and the recipe, where they differ: ALBERT's layer group ``{g}``
    of zoo's layer ``{i}``."""

    @property
    def hf_names(self) -> tuple[str, ...]:
        return (self.hf,) if isinstance(self.hf, str) else self.hf

    @property
    def zoo_names(self) -> tuple[str, ...]:
        return (self.zoo,) if isinstance(self.zoo, str) else self.zoo


@dataclass(frozen=True)
class Link:
    """A rule at concrete names: these HF tensors are those zoo tensors."""

    hf: tuple[str, ...]
    zoo: tuple[str, ...]
    transform: Transform


@cache
def pattern_regex(pattern: str) -> re.Pattern[str]:
    """``"h.{i}.attn"`` -> a regex matching ``h.3.attn`` with group ``i`` = ``"3"``."""
    parts = re.split(r"\{(\w+)\}", pattern)
    out = []
    for n, part in enumerate(parts):
        out.append(f"(?P<{part}>\\d+)" if n % 2 else re.escape(part))
    return re.compile("".join(out) + r"\Z")


def matches(pattern: str, name: str) -> bool:
    return pattern_regex(pattern).match(name) is not None


def links(rules: Iterable[Rule], zoo_names: Iterable[str], recipe: Any) -> tuple[list[Link], list[str]]:
    """The rows of ``rules`` in force for a model with parameters ``zoo_names``, at concrete names.

    Returns the links and the zoo names that no row covers (a table that does not fit the model).

    Raises:
        ValueError: two rows claim the same zoo parameter (a table bug).
    """
    names = list(zoo_names)
    present = set(names)
    covered: dict[str, Rule] = {}
    out: list[Link] = []
    for rule in rules:
        if rule.when is not None and not rule.when(recipe):
            continue
        first = pattern_regex(rule.zoo_names[0])
        for name in names:
            m = first.match(name)
            if m is None:
                continue
            bindings = m.groupdict()
            zoo = tuple(p.format(**bindings) for p in rule.zoo_names)
            if not all(z in present for z in zoo):
                continue
            for z in zoo:
                if z in covered:
                    raise ValueError(f"two rows map zoo parameter {z}: {covered[z]} and {rule}")
                covered[z] = rule
            transform = rule.transform if isinstance(rule.transform, Transform) else rule.transform(recipe)
            hf = rule.bind(recipe, bindings) if rule.bind is not None else bindings
            out.append(Link(tuple(p.format(**hf) for p in rule.hf_names), zoo, transform))
    return out, [n for n in names if n not in covered]


def zoo_tensors(model: nn.Module) -> dict[str, torch.Tensor]:
    """The model's weights, each stored tensor once: a tied head is its embedding, so it is left out.

    Stacked experts (``GroupedExperts``) appear expert by expert (``ffn.experts.3.up_proj.weight``, views of
    the stacked tensors), as the tables name them: checkpoints hold one tensor per expert and projection."""
    from zoo.components.moe import GroupedExperts

    state = dict(model.named_parameters())
    persistent = set(model.state_dict(keep_vars=True))
    state.update((n, b) for n, b in model.named_buffers() if n in persistent)
    for path, module in model.named_modules():
        if isinstance(module, GroupedExperts):
            for name, _ in module.named_parameters():
                del state[f"{path}.{name}"]
            state.update((f"{path}.{name}", view) for name, view in module.per_expert().items())
    return state


def to_hf_state(found: list[Link], zoo: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """HF-named tensors from zoo-named ones, through each link's transform."""
    out: dict[str, torch.Tensor] = {}
    for link in found:
        out.update(zip(link.hf, link.transform.to_hf([zoo[n] for n in link.zoo]), strict=True))
    return out


def to_zoo_state(found: list[Link], hf: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Zoo-named tensors from HF-named ones, through each link's transform."""
    out: dict[str, torch.Tensor] = {}
    for link in found:
        out.update(zip(link.zoo, link.transform.to_zoo([hf[n] for n in link.hf]), strict=True))
    return out


def expected_shapes(found: list[Link], zoo: Mapping[str, torch.Tensor]) -> dict[str, tuple[int, ...]]:
    """The HF name and shape of every tensor a checkpoint of this model holds (computed on meta tensors)."""
    meta = {n: torch.empty(t.shape, dtype=t.dtype, device="meta") for n, t in zoo.items()}
    return {n: tuple(t.shape) for n, t in to_hf_state(found, meta).items()}


def compare(
    expected: Mapping[str, tuple[int, ...]],
    provided: Mapping[str, tuple[int, ...]],
    ignored: Iterable[str],
    *,
    limit: int = 20,
) -> list[str]:
    """Missing, unexpected and mis-shaped weights by name (``ignored`` patterns are not unexpected)."""
    patterns = list(ignored)
    missing = sorted(n for n in expected if n not in provided)
    unexpected = sorted(n for n in provided if n not in expected and not any(matches(p, n) for p in patterns))
    misshaped = sorted(
        f"{n}: checkpoint {list(provided[n])}, expected {list(expected[n])}"
        for n in expected
        if n in provided and tuple(provided[n]) != tuple(expected[n])
    )
    problems = []
    for label, items in (("missing", missing), ("unexpected", unexpected), ("mis-shaped", misshaped)):
        if items:
            shown = ", ".join(items[:limit]) + (f", ... and {len(items) - limit} more" if len(items) > limit else "")
            problems.append(f"{len(items)} {label} weight{'s' if len(items) > 1 else ''}: {shown}")
    return problems


# ---------------------------------------------------------------------------------------------- configs


def flatten(config: Mapping[str, Any], nested: Iterable[str]) -> dict[str, Any]:
    """``config`` with each of its ``nested`` configs spread into dotted keys: ``{"text_config": {"a": 1}}`` ->
    ``{"text_config.a": 1}``; a nested config left out or null is empty (its defaults apply).

    Raises:
        HFImportError: a nested config that is not an object.
    """
    nested = tuple(nested)
    out = {k: v for k, v in config.items() if k not in nested}
    for key in nested:
        sub = config.get(key) or {}
        if not isinstance(sub, Mapping):
            raise HFImportError(f"{key}={sub!r} must be an object (the config of a part of the model)")
        out.update({f"{key}.{k}": v for k, v in sub.items()})
    return out


def nest(config: Mapping[str, Any], nested: Iterable[str]) -> dict[str, Any]:
    """The inverse of :func:`flatten`: dotted keys of the ``nested`` configs gathered back into their objects."""
    nested = tuple(nested)
    out: dict[str, Any] = {key: {} for key in nested}
    for k, v in config.items():
        parent, _, leaf = k.partition(".")
        if parent in nested and leaf:
            out[parent][leaf] = v
        else:
            out[k] = v
    return out


def lookup(data: Mapping[str, Any], dotted: str, default: Any = MISSING) -> Any:
    """``data["a"]["b"]`` for ``"a.b"`` (``data["a.b"]`` where a flattened config has it: ``flatten``); ``default``
    where a key is absent or a parent is not a mapping."""
    if dotted in data:
        return data[dotted]
    node: Any = data
    for key in dotted.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return default
        node = node[key]
    return node


@dataclass(frozen=True)
class Option:
    """A Hugging Face config option (dotted key) of which zoo reproduces only some values, and why."""

    key: str
    supported: Callable[[Any], bool]
    why: str
    export: Any = MISSING
    """The value a family table writes for the key on export (``MISSING``: none)."""


def unsupported(config: Mapping[str, Any], options: Iterable[Option]) -> list[str]:
    """One message per option whose value the import cannot reproduce."""
    problems = []
    for option in options:
        value = lookup(config, option.key, None)
        if not option.supported(value):
            problems.append(f"{option.key}={value!r} is not supported: {option.why}")
    return problems


Requirement = Any
"""What a recipe field must be for a family: a value, a tuple of allowed values, or
``callable(recipe) -> message | None`` for rules that span fields."""


def misfits(recipe: Any, requirements: Mapping[str, Requirement]) -> list[str]:
    """Why ``recipe`` is not a model of a family: one message per requirement it breaks, or []."""
    data = recipe.model_dump(mode="json")
    problems: list[str] = []
    failed: list[str] = []  # "ffn" once ffn.type is wrong: its other fields would only add noise
    for path, required in requirements.items():
        if any(path.startswith(f + ".") for f in failed):
            continue
        if callable(required):
            try:
                message = required(recipe)
            except AttributeError as exc:  # a rule of this family's components meets a plugin's (a mixer)
                message = f"{path}: {exc}"
            if message:
                problems.append(message)
            continue
        allowed = required if isinstance(required, tuple) else (required,)
        value = lookup(data, path)
        if value is MISSING or value not in allowed:
            shown = "absent" if value is MISSING else repr(value)
            wanted = " or ".join(repr(a) for a in allowed)
            problems.append(f"{path} is {shown}, needs {wanted}")
            if path == "architecture":
                return problems  # another architecture: the rest would only repeat that
            if path.endswith(".type"):
                failed.append(path.removesuffix(".type"))
    return problems


@dataclass(frozen=True)
class Family:
    """Everything zoo knows about one Hugging Face model family, most of it data.

    Checkpoint names are matched in their full form (``transformer.h.0.ln_1.weight``): the names of a
    checkpoint saved from the bare base model (``GPT2Model``: ``h.0.ln_1.weight``) get ``base_prefix``
    prepended unless they start with one of ``head_prefixes``.
    """

    name: str
    model_type: str
    classes: tuple[str, ...]
    """The HF classes whose checkpoints import; the first is assumed when config.json names none."""
    base_prefix: str
    head_prefixes: tuple[str, ...]
    defaults: Mapping[str, Any]
    """HF config defaults of the keys the translation reads (config.json files may leave them out)."""
    options: tuple[Option, ...]
    rules: tuple[Rule, ...]
    ignored: tuple[str, ...]
    """Checkpoint names that hold no weights of their own (buffers, tied copies, heads HF drops too)."""
    requirements: Mapping[str, Requirement]
    recipe: Callable[[dict[str, Any], str, frozenset[str] | None], dict[str, Any]]
    """(config with defaults, HF class, checkpoint names or None when unknown) -> recipe dict."""
    config: Callable[[Any, Mapping[str, torch.Tensor]], dict[str, Any]]
    """(recipe, zoo weights) -> HF config dict (without model_type and architectures)."""
    hf_class: Callable[[Any], str]
    """The HF class a fitting recipe exports as."""
    base_class: str | None = None
    """The bare base model class, whose checkpoints carry no ``base_prefix``; exported that way."""
    layout: Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]] | None = None
    """Rewrites other on-disk layouts of the family (e.g. fused experts) into the table's."""
    hf_layout: Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]] | None = None
    """On export, rewrites the table's layout into the one the HF class loads where they differ (gpt-oss's
    experts, fused across experts on disk, which a table's rows name one expert at a time); see ``layout``."""
    recipes: tuple[str, ...] = ()
    """Named recipes of this family's published checkpoints (the README's family table lists them)."""
    unread: Mapping[str, str] = field(default_factory=dict)
    """Config keys the translation does not read, each with why that leaves the network as zoo builds it (on
    top of ``COMMON_UNREAD``). Every key of the family's config is read (``defaults``), checked (``options``)
    or named here: a test walks them all, so a new option of a new transformers cannot pass unnoticed."""
    table: Any = None
    """The ``zoo.hf.table.Table`` this family's translation is generated from (None: written by hand)."""
    nested: tuple[str, ...] = ()
    """Config keys holding a config of their own (CLIP's ``text_config``, ``vision_config``): read flattened, their
    keys dotted (``text_config.hidden_size``), and written back nested (``flatten``, ``nest``)."""
    parent: Family | None = field(default=None, repr=False, compare=False)
    """The family this one is derived from (``derive``): it is registered first, so that a recipe both export
    exactly exports as the parent unless it names its ``hf_family``."""

    @property
    def unread_keys(self) -> dict[str, str]:
        nested = {f"{config}.{key}": why for config in self.nested for key, why in COMMON_UNREAD.items()}
        return {**COMMON_UNREAD, **nested, **self.unread}

    def full_name(self, name: str) -> str:
        if not self.base_prefix or name.startswith(self.base_prefix) or name.startswith(self.head_prefixes):
            return name
        return self.base_prefix + name

    def misfits(self, recipe: Any) -> list[str]:
        return misfits(recipe, self.requirements)

    def derive(
        self,
        name: str,
        *,
        classes: tuple[str, ...],
        rows: tuple[Any, ...] = (),
        drop: tuple[str, ...] = (),
        defaults: Mapping[str, Any] | None = None,
        **changes: Any,
    ) -> Family:
        """A family written as its difference from this one (which must be a table): ``rows`` replace this
        table's rows of the same key, path or name (or are added), the rows of the keys in ``drop`` go, and
        ``defaults`` changes the defaults of inherited keys. The weight table, ignored names, prefixes and layout
        are this family's unless ``changes`` says otherwise."""
        if self.table is None:
            raise ValueError(f"{self.name} is not written as a table; derive from one that is")
        inherited = {
            "rules": self.rules,
            "ignored": self.ignored,
            "base_prefix": self.base_prefix,
            "head_prefixes": self.head_prefixes,
            "layout": self.layout,
            "hf_layout": self.hf_layout,
        }
        table = self.table.derive(rows, drop, defaults or {})
        return table.family(name, classes=classes, parent=self, **{**inherited, **changes})


# ---------------------------------------------------------------------------------------------- shared facts

COMMON_UNREAD: dict[str, str] = {
    "bos_token_id": "a generation setting (generation_config.json), not part of the network",
    "eos_token_id": "a generation setting (generation_config.json), not part of the network",
    "initializer_range": "the std of a fresh initialisation; imported weights replace it",
    "initializer_factor": "the scale of a fresh initialisation; imported weights replace it",
    "use_cache": "whether forward returns a cache; zoo's generate always decodes with one",
    "output_router_logits": "what forward returns for a training loss, not the network",
}
"""Config keys no family reads, and why none needs to."""

ACTIVATIONS: dict[str, str] = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "quick_gelu": "quick_gelu",
    "relu": "relu",
    "relu2": "relu2",
    "silu": "silu",
    "swish": "silu",
    "xielu": "xielu",
}
"""HF activation name -> zoo activation name, for the ones that compute the same function."""

HF_ACTIVATIONS: dict[str, str] = {
    "gelu": "gelu",
    "gelu_tanh": "gelu_new",
    "quick_gelu": "quick_gelu",
    "relu": "relu",
    "relu2": "relu2",
    "silu": "silu",
    "xielu": "xielu",
}
"""zoo activation name -> the HF name written on export."""

GATED_FFNS: dict[str, str] = {"silu": "swiglu", "gelu": "geglu", "relu": "reglu"}
"""HF activation of a gated FFN (Llama's hidden_act, T5's gated-*) -> the zoo gated FFN of that activation."""


def activation_option(key: str, family: str) -> Option:
    return Option(
        key,
        lambda v: v in ACTIVATIONS,
        f"{family} imports only activations zoo computes identically ({', '.join(ACTIVATIONS)})",
    )


def default_head_dim(recipe: Any) -> str | None:
    """A requirement: heads of d_model // num_heads features (families whose config has no head_dim)."""
    head_dim = recipe.attention.head_dim
    if head_dim is not None and head_dim * recipe.attention.num_heads != recipe.d_model:
        return (
            f"attention.head_dim is {head_dim}, needs d_model / num_heads "
            f"({recipe.d_model} / {recipe.attention.num_heads})"
        )
    return None


def no_layer_overrides(recipe: Any) -> str | None:
    """A requirement: every block alike (HF families have no per-layer component choice)."""
    return "layers: per-layer overrides are not expressible in this family's config" if recipe.layers else None


def num_labels(config: Mapping[str, Any]) -> int:
    """Classes of a classification checkpoint: its id2label table, else num_labels (HF's default 2)."""
    if isinstance(config.get("id2label"), Mapping):
        return len(config["id2label"])
    return int(config.get("num_labels", 2))


def dtype_name(tensors: Mapping[str, torch.Tensor]) -> str:
    """The dtype of the floating-point weights as HF's config names it (``float32``, ``bfloat16``)."""
    for t in tensors.values():
        if t.is_floating_point():
            return str(t.dtype).removeprefix("torch.")
    return "float32"


CLASSIC_BLOCK: dict[str, Any] = {
    "positional.type": "learned",
    "positional.offset": 0,  # OPT reads its table two rows on
    "attention.type": "mha",
    "attention.bias": True,
    "attention.scale": None,
    "attention.window": None,
    "attention.sparse_block_size": None,  # BigBird's block-sparse attention
    "attention.head_dim": default_head_dim,
    "norm.type": "layernorm",
    "norm.bias": True,
    "norm.affine": True,
    "ffn.type": "mlp",
    "ffn.bias": True,
    "ffn.activation": tuple(HF_ACTIVATIONS),
}
"""What GPT-2, BERT and ViT share: learned positions, biased MHA, LayerNorm, a two-layer MLP."""
