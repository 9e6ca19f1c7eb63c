"""Recipes: YAML/JSON files that name components and sizes, validated before any tensor exists.

Loading order: read the file (safe YAML) -> resolve ``extends`` (deep merge) -> apply overrides ->
validate every component spec against the config its component registered -> validate the recipe ->
check the rules that span components. Every problem found is collected into one ``RecipeError``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, ValidationError, create_model

from .config import BuildContext, ComponentConfig, spec_fields
from .errors import RecipeError, UnknownComponentError
from .plugins import explain_unknown, get_registry, recipe_paths
from .registry import Registry, did_you_mean
from .train.config import TrainConfig

COMPONENT_FIELDS: tuple[str, ...] = ("embedding", "positional", "attention", "norm", "ffn", "head")
LAYER_FIELDS: tuple[str, ...] = ("attention", "norm", "ffn")

Component = SerializeAsAny[ComponentConfig]


class Expect(BaseModel):
    """Facts the built model must match; a mismatch fails the build with both numbers."""

    model_config = ConfigDict(extra="forbid")
    parameters: int | None = Field(None, ge=0, description="Exact parameter count (tied weights counted once).")


class LayerOverride(BaseModel):
    """Components that replace the recipe's defaults in the selected layers."""

    model_config = ConfigDict(extra="forbid")
    select: str | int | list[int] = Field(
        description="Layers to change: an index (3), a list ([0, 5]), or a Python slice ('1::2', ':4')."
    )
    stack: Literal["encoder", "decoder", "all"] = Field("all", description="For encoder-decoder models.")
    attention: Component | None = None
    norm: Component | None = None
    ffn: Component | None = None


class Recipe(BaseModel):
    """A validated recipe. Component fields hold the validated configs of their registered components."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Recipe name, e.g. gpt2-small.")
    description: str = ""
    architecture: str = Field(description="encoder | decoder | encoder-decoder | vit, or a plugin's.")
    d_model: int = Field(ge=1, description="Width of the residual stream (E).")
    num_layers: int = Field(ge=1, description="Blocks in the stack (the encoder's, for encoder-decoder).")
    num_decoder_layers: int | None = Field(None, ge=1, description="Decoder blocks (default num_layers).")
    max_len: int | None = Field(None, ge=1, description="Longest sequence (positional table size).")
    vocab_size: int | None = Field(None, ge=1, description="Token vocabulary (text models).")
    type_vocab_size: int = Field(0, ge=0, description="Segment (token type) vocabulary; 0 = none (BERT: 2).")
    pad_token_id: int | None = Field(None, ge=0, description="Padding token id.")
    image_size: int | None = Field(None, ge=1, description="Input image side in pixels (vit).")
    patch_size: int | None = Field(None, ge=1, description="Patch side in pixels (vit).")
    num_channels: int = Field(3, ge=1, description="Image channels (vit).")
    num_classes: int | None = Field(None, ge=1, description="Classes of a classification head.")
    norm_position: Literal["pre", "post"] = Field("pre", description="Norm before (pre) or after (post) sublayers.")
    embed_norm: bool | None = Field(None, description="Norm after the embeddings (default: post-norm models).")
    final_norm: bool | None = Field(None, description="Norm after the last block (default: pre-norm models).")
    dropout: float = Field(0.0, ge=0, lt=1, description="Residual and embedding dropout.")
    init_std: float = Field(0.02, gt=0, description="Std of the normal init of weights.")
    embedding: Component
    positional: Component
    attention: Component
    norm: Component
    ffn: Component
    head: Component
    layers: list[LayerOverride] = Field(default_factory=list, description="Per-layer component overrides.")
    expect: Expect | None = None
    train: TrainConfig = Field(default_factory=TrainConfig, description="How `zoo train` trains the model.")

    def to_dict(self) -> dict[str, Any]:
        """Plain data that loads back into the same recipe (no ``extends``, nothing implicit)."""
        return self.model_dump(mode="json", exclude_none=True)

    def layer_components(self, stack: str, index: int) -> dict[str, ComponentConfig]:
        """The attention / norm / ffn configs of block ``index`` of ``stack`` after overrides."""
        parts: dict[str, ComponentConfig] = {k: getattr(self, k) for k in LAYER_FIELDS}
        n = self.stack_layers(stack)
        for override in self.layers:
            if override.stack in ("all", stack) and index in select_layers(override.select, n):
                parts.update({k: getattr(override, k) for k in LAYER_FIELDS if getattr(override, k) is not None})
        return parts

    def stack_layers(self, stack: str) -> int:
        if stack == "decoder" and self.architecture == "encoder-decoder":
            return self.num_decoder_layers or self.num_layers
        return self.num_layers

    def context(self, *, layer_idx: int = 0, causal: bool = False, cross: bool = False, stack: str = "encoder"):
        """The ``BuildContext`` of one place in the model (heads from that layer's attention)."""
        attention = self.layer_components(stack, layer_idx)["attention"] if self.num_layers else self.attention
        num_heads = getattr(attention, "num_heads", 1)
        head_dim = attention.head_dim_for(self.d_model) if hasattr(attention, "head_dim_for") else 0
        return BuildContext(
            d_model=self.d_model,
            max_len=self.max_len or 0,
            causal=causal,
            cross=cross,
            layer_idx=layer_idx,
            num_layers=self.stack_layers(stack),
            num_heads=num_heads,
            head_dim=head_dim,
            vocab_size=self.vocab_size or 0,
            num_classes=self.num_classes or 0,
            type_vocab_size=self.type_vocab_size,
            image_size=self.image_size or 0,
            patch_size=self.patch_size or 0,
            num_channels=self.num_channels,
            pad_token_id=self.pad_token_id,
        )


def select_layers(select: str | int | list[int], n: int) -> list[int]:
    """Indices of ``n`` layers chosen by an index, a list of indices, or a slice string like '1::2'."""
    if isinstance(select, int):
        return [select % n] if -n <= select < n else []
    if isinstance(select, list):
        return sorted({i % n for i in select if -n <= i < n})
    if select.strip() == "all":
        return list(range(n))
    parts = select.split(":")
    if len(parts) == 1:
        return select_layers(int(parts[0]), n)
    bounds = [int(p) if p.strip() else None for p in parts]
    return list(range(n))[slice(*bounds)]


def _check_select(select: Any) -> str | None:
    try:
        select_layers(select, 1)
    except (ValueError, TypeError):
        return f"layer selector {select!r} is not an index, a list or a slice like '1::2'"
    return None


# ---------------------------------------------------------------------------------------------- reading


def read_recipe_file(path: Path) -> dict[str, Any]:
    """Parse one YAML or JSON file into a dict; syntax errors name the file, line and column."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RecipeError(f"cannot read recipe: {exc.strerror or exc}", source=str(path)) from None
    try:
        if path.suffix == ".json":
            data = json.loads(text)
        else:
            data = yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise RecipeError(f"line {exc.lineno}, column {exc.colno}: {exc.msg}", source=str(path)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise RecipeError(f"{where}invalid YAML: {problem}", source=str(path)) from None
    if data is None:
        raise RecipeError("the recipe file is empty", source=str(path))
    if not isinstance(data, dict):
        raise RecipeError(
            f"a recipe must be a mapping of keys to values, not a {type(data).__name__}", source=str(path)
        )
    return data


def named_recipes() -> dict[str, Path]:
    """Recipe name -> file, from every recipe directory that plugins ship (the built-in one included)."""
    found: dict[str, Path] = {}
    for base in recipe_paths():
        files = [base] if base.is_file() else sorted(base.glob("*.y*ml")) + sorted(base.glob("*.json"))
        for f in files:
            found.setdefault(f.stem, f)
    return found


def find_recipe(ref: str, relative_to: Path | None = None) -> Path:
    """A recipe file from a path (relative to ``relative_to`` first) or a recipe name."""
    candidates = [Path(ref)]
    if relative_to is not None:
        candidates.insert(0, relative_to / ref)
    for c in candidates:
        if c.is_file():
            return c
    named = named_recipes()
    if ref in named:
        return named[ref]
    hint = did_you_mean(ref, sorted(named))
    raise RecipeError(
        f"no recipe file or named recipe {ref!r}{hint}; named recipes: {', '.join(sorted(named)) or 'none'}"
    )


def deep_merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """``top`` over ``base``: mappings merge key by key, anything else is replaced.

    A component spec whose ``type`` changes is replaced whole: the old type's options would not fit.
    """
    out = copy.deepcopy(base)
    for key, value in top.items():
        old = out.get(key)
        if (
            isinstance(old, dict)
            and isinstance(value, Mapping)
            and old.get("type", value.get("type")) == value.get("type", old.get("type"))
        ):
            out[key] = deep_merge(old, value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _resolve_extends(data: dict[str, Any], path: Path | None, seen: tuple[str, ...] = ()) -> dict[str, Any]:
    parent_ref = data.pop("extends", None)
    if parent_ref is None:
        return data
    if not isinstance(parent_ref, str):
        raise RecipeError(f"extends: must be a recipe name or path, not {parent_ref!r}", source=str(path or ""))
    parent_path = find_recipe(parent_ref, path.parent if path else None)
    key = str(parent_path.resolve())
    if key in seen:
        raise RecipeError(f"extends: cycle through {parent_ref!r}", source=str(path or parent_path))
    parent = _resolve_extends(read_recipe_file(parent_path), parent_path, (*seen, key))
    parent.pop("expect", None)  # a parent's expected size is a fact about the parent, not the child
    return deep_merge(parent, data)


def parse_override(assignment: str) -> tuple[str, Any]:
    """``'attention.num_heads=8'`` -> ``('attention.num_heads', 8)``; the value is read as YAML."""
    key, sep, raw = assignment.partition("=")
    if not sep or not key.strip():
        raise RecipeError(f"--set {assignment!r}: expected KEY.PATH=VALUE, e.g. attention.num_heads=8")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.strip(), value


def overrides_to_tree(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted (or ``__``-separated) keys into a nested dict ready for ``deep_merge``."""
    tree: dict[str, Any] = {}
    for dotted, value in overrides.items():
        keys = dotted.replace("__", ".").split(".")
        node = tree
        for k in keys[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise RecipeError(f"override {dotted!r} conflicts with another override of {k!r}")
        node[keys[-1]] = value
    return tree


# ---------------------------------------------------------------------------------------------- validation


def _pydantic_errors(exc: ValidationError, prefix: str, model: type[BaseModel] | None = None) -> list[tuple[str, str]]:
    out = []
    for err in exc.errors(include_url=False):
        loc = [str(p) for p in err["loc"]]
        path = ".".join([prefix, *loc] if prefix else loc)
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            allowed = sorted(model.model_fields) if model is not None and len(loc) == 1 else []
            msg = f"unknown key{did_you_mean(loc[-1], allowed)}" + (
                f"; allowed: {', '.join(allowed)}" if allowed else ""
            )
        elif err["type"] == "missing":
            msg = "required key is missing"
        elif "input" in err and not isinstance(err["input"], (dict, list)):
            msg = f"{msg} (got {err['input']!r})"
        out.append((path, msg.removeprefix("Value error, ")))
    return out


def validate_spec(
    registry: Registry, kind: str, spec: Any, path: str, errors: list[tuple[str, str]]
) -> ComponentConfig | None:
    """Validate one ``{type: NAME, ...}`` spec against the config NAME registered; collect errors."""
    if isinstance(spec, str):
        spec = {"type": spec}
    if isinstance(spec, ComponentConfig):
        return spec
    if not isinstance(spec, Mapping):
        errors.append((path, f"a {kind} spec must be a mapping like {{type: NAME, ...}}, not {spec!r}"))
        return None
    name = spec.get("type")
    if not isinstance(name, str):
        choices = ", ".join(registry.names(kind))
        errors.append((f"{path}.type", f"required: the {kind} type to use; registered: {choices}"))
        return None
    try:
        component = registry.get(kind, name)
    except UnknownComponentError as exc:
        errors.append((f"{path}.type", explain_unknown(kind, name, str(exc))))
        return None
    try:
        config = component.config.model_validate(dict(spec))
    except ValidationError as exc:
        errors.extend(_pydantic_errors(exc, path, component.config))
        return None
    for field, nested_kind in spec_fields(component.config).items():
        nested = getattr(config, field)
        if nested is not None:
            validate_spec(registry, nested_kind, nested, f"{path}.{field}", errors)
    return config


def validate_recipe(data: Mapping[str, Any], *, source: str | None = None) -> Recipe:
    """A ``Recipe`` from plain data (``extends`` already resolved), or ``RecipeError`` with every problem."""
    registry = get_registry()
    errors: list[tuple[str, str]] = []
    data = dict(data)
    failed: set[str] = set()  # paths already reported, whose follow-on errors would be noise

    arch_name = data.get("architecture")
    arch = None
    if isinstance(arch_name, str):
        try:
            arch = registry.get("architecture", arch_name)
        except UnknownComponentError as exc:
            errors.append(("architecture", explain_unknown("architecture", arch_name, str(exc))))
            # What the architecture would have filled in is not missing: it is unknown. Say it once.
            failed.update(k for k in ("embedding", "head", "positional") if k not in data)
    # The architecture supplies defaults, e.g. vit embeds patches and heads with a classifier.
    if arch is not None:
        arch_config = arch.config()
        for key, value in arch_config.defaults.items():
            data.setdefault(key, copy.deepcopy(value))
        arch_config.derive(data)

    def check(kind: str, container: dict[str, Any], path: str) -> None:
        if kind not in container or container[kind] is None:
            return
        config = validate_spec(registry, kind, container[kind], path, errors)
        if config is None:
            failed.add(path)
            container[kind] = None
        else:
            container[kind] = config

    for kind in COMPONENT_FIELDS:
        check(kind, data, kind)
    if isinstance(data.get("layers"), list):
        data["layers"] = [dict(o) if isinstance(o, Mapping) else o for o in data["layers"]]
        for i, override in enumerate(data["layers"]):
            if isinstance(override, dict):
                for kind in LAYER_FIELDS:
                    check(kind, override, f"layers.{i}.{kind}")
                problem = _check_select(override.get("select"))
                if problem:
                    errors.append((f"layers.{i}.select", problem))

    recipe = None
    try:
        recipe = Recipe.model_validate({k: v for k, v in data.items() if k not in failed})
    except ValidationError as exc:
        errors.extend(e for e in _pydantic_errors(exc, "", Recipe) if e[0] not in failed)
    if recipe is not None and arch is not None and not errors:
        errors.extend(check_rules(recipe, registry))
    if errors:
        raise RecipeError(_dedupe(errors), source=source)
    assert recipe is not None
    return recipe


def _dedupe(errors: list[tuple[str, str]]) -> list[tuple[str, str]]:
    seen, out = set(), []
    for e in errors:
        if e not in seen:
            seen.add(e)
            out.append(e)
    return out


def check_rules(recipe: Recipe, registry: Registry) -> list[tuple[str, str]]:
    """Rules that span components: each component's ``check(ctx)`` where it sits, causality, lengths."""
    errors: list[tuple[str, str]] = []
    arch = registry.get("architecture", recipe.architecture).config()
    errors.extend(arch.check_recipe(recipe))
    if errors:
        return errors
    for stack, causal in arch.stacks:
        ctx = recipe.context(causal=causal, stack=stack)
        errors.extend(("positional", m) for m in recipe.positional.check(ctx))
        if recipe.positional.requires_causal and not causal:
            errors.append(("positional", f"{recipe.positional.type} needs a causal stack; the {stack} is not causal"))
        for i in range(recipe.stack_layers(stack)):
            ctx_i = recipe.context(layer_idx=i, causal=causal, stack=stack)
            for kind, config in recipe.layer_components(stack, i).items():
                path = _layer_path(recipe, stack, i, kind)
                errors.extend((path, m) for m in config.check(ctx_i))
                if config.requires_causal and not causal:
                    errors.append(
                        (
                            path,
                            f"{kind} '{config.type}' needs a causal (decoder) stack; the {stack} is not causal",
                        )
                    )
    seq_len = recipe.train.seq_len
    bounded = arch.token_input and recipe.positional.bounded_by_max_len
    if seq_len is not None and bounded and seq_len > (recipe.max_len or 0):
        errors.append(
            (
                "train.seq_len",
                f"{seq_len} positions do not fit the {recipe.positional.type} position table of max_len "
                f"{recipe.max_len}: lower train.seq_len or raise max_len",
            )
        )
    head_ctx = recipe.context()
    errors.extend(("embedding", m) for m in recipe.embedding.check(head_ctx))
    errors.extend(("head", m) for m in recipe.head.check(head_ctx))
    return _dedupe(errors)


def _layer_path(recipe: Recipe, stack: str, index: int, kind: str) -> str:
    for j in range(len(recipe.layers) - 1, -1, -1):
        o = recipe.layers[j]
        if getattr(o, kind) is not None and o.stack in ("all", stack):
            if index in select_layers(o.select, recipe.stack_layers(stack)):
                return f"layers.{j}.{kind}"
    return kind


def load_recipe(source: str | Path | Mapping[str, Any] | Recipe, **overrides: Any) -> Recipe:
    """A validated ``Recipe`` from a file path, a recipe name, a dict, or a ``Recipe`` (copied).

    ``overrides`` apply last, with dotted or double-underscore keys: ``load_recipe("gpt2-small",
    num_layers=2, **{"attention.num_heads": 4})`` or ``attention__num_heads=4``.
    """
    path: Path | None = None
    if isinstance(source, Recipe):
        data = source.to_dict()
    elif isinstance(source, Mapping):
        data = copy.deepcopy(dict(source))
    elif isinstance(source, (str, Path)):
        path = find_recipe(str(source))
        data = read_recipe_file(path)
    else:
        raise RecipeError(f"cannot load a recipe from a {type(source).__name__}; give a path, a name or a dict")
    label = str(path) if path else None
    try:
        data = _resolve_extends(data, path)
    except RecipeError as exc:
        exc.source = exc.source or label
        raise
    if overrides:
        tree = overrides_to_tree(overrides)
        if "expect" not in tree:
            data.pop("expect", None)  # the expected size was of the recipe as written, not as overridden
        data = deep_merge(data, tree)
    return validate_recipe(data, source=label)


# ---------------------------------------------------------------------------------------------- JSON Schema


ARCHITECTURE_DEFAULTS = ("embedding", "positional", "head")
"""Component fields that an architecture may fill in (decoders: token embedding, LM head; vit: positional)."""


def recipe_json_schema() -> dict[str, Any]:
    """The JSON Schema of recipe files (for editor completion), built from the registry as plugins left it.

    Each component field is the union of the configs registered for its kind, discriminated on ``type``, or
    the bare name of a component that needs no options (``norm: rmsnorm``); nested specs (an MoE's
    ``expert``) refer to their kind's union. With ``extends`` no key is required.
    """
    registry = get_registry()
    configs = {kind: [c.config for c in registry if c.kind == kind] for kind in COMPONENT_FIELDS}

    def union(kind: str) -> Any:
        members = tuple(configs[kind])
        return Annotated[Union[members], Field(discriminator="type")] if len(members) > 1 else members[0]  # noqa: UP007

    layer = create_model("LayerOverride", __base__=LayerOverride, **{k: (union(k) | None, None) for k in LAYER_FIELDS})
    variant = create_model(
        "Recipe",
        __base__=Recipe,
        extends=(str | None, Field(None, description="A recipe name or path to deep-merge under this one.")),
        architecture=(Literal[tuple(registry.names("architecture"))], Field(description="The model family.")),
        layers=(list[layer], Field(default_factory=list, description="Per-layer component overrides.")),
        **{k: (union(k) | None, None) if k in ARCHITECTURE_DEFAULTS else (union(k), ...) for k in COMPONENT_FIELDS},
    )
    schema = variant.model_json_schema()
    defs = schema["$defs"]

    def def_key(config: type[BaseModel]) -> str:
        name = config.model_fields["type"].default
        return next(
            k
            for k, d in defs.items()
            if d.get("title") == config.__name__ and d.get("properties", {}).get("type", {}).get("const") == name
        )

    for kind, members in configs.items():
        mapping = {c.model_fields["type"].default: f"#/$defs/{def_key(c)}" for c in members}
        needs_nothing = [not any(f.is_required() for f in c.model_fields.values()) for c in members]
        bare = [name for name, ok in zip(mapping, needs_nothing, strict=True) if ok]
        spec = {"oneOf": [{"$ref": r} for r in mapping.values()]}
        spec["discriminator"] = {"propertyName": "type", "mapping": mapping}
        defs[f"{kind}_spec"] = {"anyOf": [spec, {"enum": bare}]} if bare else spec

    def point(properties: dict[str, Any], field: str, kind: str, nullable: bool) -> None:
        keep = {k: v for k, v in properties[field].items() if k in ("description", "title")}
        ref = {"$ref": f"#/$defs/{kind}_spec"}
        properties[field] = {**keep, **({"anyOf": [ref, {"type": "null"}]} if nullable else ref)}

    for kind in COMPONENT_FIELDS:
        point(schema["properties"], kind, kind, nullable=kind in ARCHITECTURE_DEFAULTS)
    for kind in LAYER_FIELDS:
        point(defs["LayerOverride"]["properties"], kind, kind, nullable=True)
    for members in configs.values():
        for config in members:
            for field, kind in spec_fields(config).items():
                point(defs[def_key(config)]["properties"], field, kind, config.model_fields[field].default is None)
    # With `extends`, the parent recipe gives whatever the child leaves out.
    schema["anyOf"] = [{"required": ["extends"]}, {"required": schema.pop("required", [])}]
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema, "title": "zoo recipe"}
