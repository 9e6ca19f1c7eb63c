"""``zoo diff``: what differs between two architectures, field by field and in what it costs.

Either side is anything ``load_recipe`` reads: a recipe file, a named recipe, or a model, run, checkpoint or
Hugging Face folder. The recipes are compared after validation, with every default filled in, so a field left
out on one side and written at its default on the other is no difference. A field that differs from layer to
layer (Gemma 3's windows, SmolLM3's NoPE layers) is compared as its per-layer pattern. Two run folders are
also compared as runs: how each was started (recipe and ``--set`` overrides) and their last metrics.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SKIPPED = ("name", "description", "expect", "layers")
"""Recipe fields that are not part of the architecture (or, ``layers``, compared as per-layer patterns)."""

SECTIONS = ("block", "embedding", "positional", "attention", "norm", "ffn", "head", "train")
"""Recipe sections shown under their own name; the top-level fields are the ``model`` section."""

LAYER_FIELDS = ("attention", "norm", "ffn")
RUN_METRICS = ("step", "loss", "perplexity", "accuracy", "tokens_per_s", "elapsed_s")


@dataclass(frozen=True)
class Difference:
    """One field whose value differs: ``section`` (``model``, ``attention``, ``layers``, ...) and the dotted
    ``field`` within it; ``a`` and ``b`` are the values as shown (``-``: the side has no such field)."""

    section: str
    field: str
    a: str
    b: str
    a_value: Any = None
    """The value itself, as JSON data (a config as its fields; per-layer, a list; absent: None)."""
    b_value: Any = None


@dataclass(frozen=True)
class Cost:
    """One figure of both models: ``a``, ``b`` and what it is measured in (``count``, ``FLOP``, ``bytes``)."""

    name: str
    a: int | None
    b: int | None
    unit: str

    @property
    def delta(self) -> int | None:
        return None if self.a is None or self.b is None else self.b - self.a


@dataclass
class RecipeDiff:
    """What ``zoo diff A B`` answers."""

    a: str
    b: str
    differences: list[Difference]
    costs: list[Cost]
    batch: int
    seq_len: int
    seq_why: str
    runs: list[Difference] = field(default_factory=list)
    """How two runs were started (recipe named, ``--set`` overrides, data) and their last metrics."""

    @property
    def same(self) -> bool:
        return not self.differences

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "same": self.same,
            "differences": [asdict(d) for d in self.differences],
            "costs": [{**asdict(c), "delta": c.delta} for c in self.costs],
            "batch": self.batch,
            "seq_len": self.seq_len,
            "seq_why": self.seq_why,
            "runs": [asdict(d) for d in self.runs],
        }


def shown(value: Any) -> str:
    """A recipe value as ``zoo diff`` prints it: ``none``, ``1,000,000``, ``1e-05``, ``true``, compact JSON."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) < 1e15):
        return f"{int(value):,}"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(", ", ": "))


def brief(value: Any) -> str:
    """A value as one cell: a component config as its type and the fields it sets away from their defaults
    (``rope(theta=1,000,000)``), anything else as ``shown`` gives it."""
    from pydantic import BaseModel

    if not isinstance(value, BaseModel):
        return shown(value)
    kind = getattr(value, "type", type(value).__name__)
    set_ = [
        f"{name}={brief(getattr(value, name))}"
        for name, info in type(value).model_fields.items()
        if name != "type" and getattr(value, name) != info.get_default(call_default_factory=True)
    ]
    return f"{kind}({', '.join(set_)})" if set_ else str(kind)


def pairs(a: Any, b: Any, prefix: str = "") -> list[str]:
    """The dotted paths at which two recipe values differ: into component configs field by field (the union of
    both configs' fields where their types differ), and whole where one side is not a config."""
    from pydantic import BaseModel

    if isinstance(a, BaseModel) and isinstance(b, BaseModel):
        names = [*type(a).model_fields, *(n for n in type(b).model_fields if n not in type(a).model_fields)]
        out: list[str] = []
        for name in names:
            if prefix == "" and name in SKIPPED:
                continue
            out += pairs(getattr(a, name, _ABSENT), getattr(b, name, _ABSENT), f"{prefix}{name}.")
        return out
    return [] if _same(a, b) else [prefix.rstrip(".")]


def _same(a: Any, b: Any) -> bool:
    if a is _ABSENT or b is _ABSENT:
        return a is b
    return a == b


def value_at(root: Any, path: str) -> Any:
    """The value at a dotted ``path`` of a recipe or config (``_ABSENT`` where a field does not exist)."""
    node = root
    for name in path.split("."):
        node = getattr(node, name, _ABSENT)
        if node is _ABSENT:
            return _ABSENT
    return node


def pattern(values: list[str]) -> str:
    """A per-layer list of values in a few words: ``512 on all 26``, ``repeats every 6: 512 x5, none``, or
    runs with their layer ranges (``none at 0-2, 512 at 3-25``)."""
    n = len(values)
    if len(set(values)) == 1:
        return f"{values[0]} on all {n}"
    for period in range(2, n // 2 + 1):
        if all(values[i] == values[i - period] for i in range(period, n)):
            return f"repeats every {period}: " + ", ".join(_runs(values[:period], ranges=False))
    return ", ".join(_runs(values, ranges=True))


def _runs(values: list[str], *, ranges: bool) -> list[str]:
    out: list[str] = []
    start = 0
    for i in range(1, len(values) + 1):
        if i == len(values) or values[i] != values[start]:
            if ranges:
                out.append(f"{values[start]} at {start}" + (f"-{i - 1}" if i - 1 > start else ""))
            else:
                out.append(values[start] + (f" x{i - start}" if i - start > 1 else ""))
            start = i
    return out


def _stacks(recipe: Any) -> tuple[str, ...]:
    return ("encoder", "decoder") if recipe.architecture == "encoder-decoder" else ("decoder",)


def _layers(recipe: Any, stack: str) -> list[dict[str, Any]]:
    return [{k: placed[k][0] for k in LAYER_FIELDS} for placed in recipe.layer_plan(stack)]


def layer_patterns(recipe: Any) -> dict[str, str]:
    """``{"attention.window": "repeats every 6: 512 x5, none"}``: each per-layer field that differs from layer
    to layer in a stack of ``recipe`` (``encoder: ...``, ``decoder: ...`` for an encoder-decoder), as its
    pattern."""
    stacks = _stacks(recipe)
    out: dict[str, str] = {}
    for stack in stacks:
        layers = _layers(recipe, stack)
        varying = sorted(
            {f"{k}.{p}" for layer in layers[1:] for k in LAYER_FIELDS for p in pairs(layers[0][k], layer[k])}
        )
        for key in varying:
            kind, _, path = key.partition(".")
            out[f"{stack}: {key}" if len(stacks) > 1 else key] = pattern(
                [_side(value_at(layer[kind], path)) for layer in layers]
            )
    return out


def _at_layers(recipe: Any, key: str) -> list[Any]:
    """The value at ``key`` (``kind.path``, ``stack: kind.path`` in an encoder-decoder) in each layer of its stack."""
    stack, _, path = key.rpartition(": ")
    kind, _, rest = path.partition(".")
    return [value_at(layer[kind], rest) for layer in _layers(recipe, stack or _stacks(recipe)[-1])]


def _pattern_at(recipe: Any, key: str) -> str:
    """``recipe``'s layers at ``key`` as a pattern (where the other side's layers differ there)."""
    values = _at_layers(recipe, key)
    return pattern([_side(v) for v in values]) if values else "no layers"


def recipe_differences(a: Any, b: Any) -> list[Difference]:
    """Every field of two validated recipes whose value differs, section by section, then per-layer patterns."""
    out = []
    for key in pairs(a, b):
        head, _, rest = key.partition(".")
        section, name = (head, rest) if head in SECTIONS and rest else ("model", key)
        va, vb = value_at(a, key), value_at(b, key)
        out.append(Difference(section, name, _side(va), _side(vb), _raw(va), _raw(vb)))
    out.sort(key=lambda d: (_order(d.section), d.field))
    pa, pb = layer_patterns(a), layer_patterns(b)
    for key in sorted(set(pa) | set(pb)):
        sa, sb = pa.get(key) or _pattern_at(a, key), pb.get(key) or _pattern_at(b, key)
        if sa != sb:
            raw = ([_raw(v) for v in _at_layers(r, key)] for r in (a, b))
            out.append(Difference("layers", key, sa, sb, *raw))
    return out


def _raw(value: Any) -> Any:
    """A recipe value as JSON data."""
    from pydantic import BaseModel

    if value is _ABSENT:
        return None
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


_ABSENT = object()


def _side(value: Any) -> str:
    return "-" if value is _ABSENT else brief(value)


def _order(section: str) -> int:
    return -1 if section == "model" else (SECTIONS.index(section) if section in SECTIONS else len(SECTIONS))


def costs(a: Any, b: Any, *, batch: int, seq_len: int) -> list[Cost]:
    """Parameters (and active parameters, for a mixture of experts), FLOPs per token, KV cache per token and
    training memory (bf16 mixed-precision AdamW, 16 bytes per parameter, and the activations at ``batch`` x
    ``seq_len``) of both."""
    from .summary import summarize

    sa, sb = (summarize(r, batch=batch, seq_len=min(seq_len, r.max_len or seq_len), torchinfo=False) for r in (a, b))

    def training(s: Any) -> int:
        return s.memory.training["bf16_mixed"] + s.memory.activation_bytes

    routed = sa.analytic.active != sa.counted.total or sb.analytic.active != sb.counted.total
    return [
        Cost("parameters", sa.counted.total, sb.counted.total, "count"),
        *([Cost("active parameters per token", sa.analytic.active, sb.analytic.active, "count")] if routed else []),
        Cost("forward FLOPs per token", sa.flops.forward_per_token, sb.flops.forward_per_token, "FLOP"),
        Cost("KV cache per token (bf16)", sa.memory.kv_bytes_per_token, sb.memory.kv_bytes_per_token, "bytes"),
        Cost("training memory", training(sa), training(sb), "bytes"),
    ]


def run_differences(a: Path, b: Path) -> list[Difference]:
    """How two runs were started (``run.yaml``) and their last train and eval metrics (``metrics.jsonl``)."""
    from zoo.train.checkpoint import read_start

    starts = [read_start(p) or {} for p in (a, b)]
    out = []
    for key in ("recipe", "data", "init_from"):
        va, vb = (s.get(key) for s in starts)
        if va != vb:
            out.append(Difference("started", key, shown(va), shown(vb), va, vb))
    overrides = [s.get("overrides") or {} for s in starts]
    for key in sorted(set(overrides[0]) | set(overrides[1])):
        va, vb = (o.get(key, _ABSENT) for o in overrides)
        if va != vb:
            out.append(Difference("--set", key, _side(va), _side(vb), _raw(va), _raw(vb)))
    last = [_last_metrics(p) for p in (a, b)]
    for split in ("train", "eval"):
        for key in RUN_METRICS:
            va, vb = (m.get(split, {}).get(key, _ABSENT) for m in last)
            if va is not _ABSENT or vb is not _ABSENT:
                out.append(Difference(f"last {split}", key, _metric(va), _metric(vb), _raw(va), _raw(vb)))
    return out


def _last_metrics(run: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    path = run / "metrics.jsonl"
    if not path.is_file():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line cut short by a kill
        if isinstance(record, dict) and record.get("split") in ("train", "eval"):
            out[record["split"]] = record
    return out


def _metric(value: Any) -> str:
    if value is _ABSENT:
        return "-"
    if isinstance(value, float) and not value.is_integer():  # loss 4.794, tokens/s 56,948
        return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    return shown(value)


def diff(
    a: str | Path, b: str | Path, *, batch: int = 1, seq_len: int | None = None, with_costs: bool = True
) -> RecipeDiff:
    """Compare two architectures (and, for two run folders, two runs).

    ``seq_len`` (default: the shorter of the two sides' ``default_seq_len``) and ``batch`` set the activations of
    the training-memory figure; FLOPs per token are at that length too.

    Raises:
        RecipeError: either side is not a readable recipe, model, run, checkpoint or Hugging Face folder.
        ArgumentError: ``batch`` or ``seq_len`` is below 1.
    """
    from zoo.errors import ArgumentError
    from zoo.locate import NotAModelFolder, locate
    from zoo.recipe import load_recipe

    from .sequence import default_seq_len

    if batch < 1 or (seq_len is not None and seq_len < 1):
        raise ArgumentError(f"--batch and --seq must be at least 1 (got {batch} and {seq_len})")
    ra, rb = load_recipe(a), load_recipe(b)
    if seq_len is None:
        (la, wa), (lb, wb) = default_seq_len(ra), default_seq_len(rb)
        seq_len, why = (la, f"A's: {wa}") if la <= lb else (lb, f"B's: {wb}")
        if la == lb:
            why = wa if wa == wb else f"{la:,} on both sides"
    else:
        why = "--seq"
    runs: list[Difference] = []
    try:
        folders = [locate(p) for p in (a, b)]
    except NotAModelFolder:
        folders = []
    if folders and all(f.kind == "run" for f in folders):
        runs = run_differences(folders[0].given, folders[1].given)
    return RecipeDiff(
        a=str(a),
        b=str(b),
        differences=recipe_differences(ra, rb),
        costs=costs(ra, rb, batch=batch, seq_len=seq_len) if with_costs else [],
        batch=batch,
        seq_len=seq_len,
        seq_why=why,
        runs=runs,
    )
