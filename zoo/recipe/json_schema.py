"""The JSON Schema of recipe files, built from the registry as the plugins left it (for editor completion)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, Field, create_model

from zoo.config import spec_fields
from zoo.plugins import get_registry

from .block import BlockConfig, NormPosition
from .schema import COMPONENT_FIELDS, LAYER_FIELDS, LayerOverride, Recipe

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
        block=(BlockConfig | None, Field(None, description="How each block meets the residual stream.")),
        norm_position=(NormPosition | None, Field(None, description="Short for block.norm_position.")),
        vision=(dict[str, Any] | None, Field(None, description=Recipe.model_fields["vision"].description)),
        encoder_embedding=(
            union("embedding") | None,
            Field(None, description=Recipe.model_fields["encoder_embedding"].description),
        ),
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
    point(schema["properties"], "encoder_embedding", "embedding", nullable=True)
    for kind in LAYER_FIELDS:
        point(defs["LayerOverride"]["properties"], kind, kind, nullable=True)
    for members in configs.values():
        for config in members:
            for field, kind in spec_fields(config).items():
                point(defs[def_key(config)]["properties"], field, kind, config.model_fields[field].default is None)
    # A tower is a recipe of its own: the whole schema again.
    tower = schema["properties"]["vision"]
    schema["properties"]["vision"] = {"description": tower["description"], "anyOf": [{"$ref": "#"}, {"type": "null"}]}
    # With `extends`, the parent recipe gives whatever the child leaves out.
    schema["anyOf"] = [{"required": ["extends"]}, {"required": schema.pop("required", [])}]
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema, "title": "zoo recipe"}
