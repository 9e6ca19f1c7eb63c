"""Write a named recipe from a published Hugging Face config: ``tests/hf_cases/<file>.py``'s ``PUBLISHED`` entry.

    python tools/recipe_from_hf.py helium-1-2b "Helium 1 2B (model card: 2B) - ..."

The config is imported as ``zoo import`` reads it (no weights), its parameters counted on the meta device, and
``recipes/<name>.yaml`` written with the recipe's fields in the usual order and ``expect.parameters``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
ORDER = (
    "name",
    "description",
    "architecture",
    "vocab_size",
    "d_model",
    "num_layers",
    "num_decoder_layers",
    "max_len",
    "pad_token_id",
    "decoder_start_token_id",
    "block",
    "embed_norm",
    "final_norm",
    "embedding",
    "attention",
    "positional",
    "norm",
    "ffn",
    "head",
    "layers",
)


def type_first(value: object) -> object:
    """A component spec with its ``type`` first, as recipes are written (nested specs too)."""
    if isinstance(value, dict):
        value = {k: type_first(v) for k, v in value.items()}
        return {k: value[k] for k in ("type",) if k in value} | value
    if isinstance(value, list):
        return [type_first(v) for v in value]
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="a PUBLISHED entry of tests/hf_cases, and the recipe's name")
    parser.add_argument("description", help="one line: what it is, and the model card's own parameter figure")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    import hf_cases

    import zoo
    from zoo.hf import hf_recipe

    published = {n: spec for m in hf_cases.modules() for n, spec in getattr(m, "PUBLISHED", {}).items()}
    config = published[args.name][1]
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "config.json").write_text(json.dumps(config))
        recipe = hf_recipe(folder)
    recipe = {**recipe, "name": args.name, "description": args.description}
    recipe = {k: recipe[k] for k in ORDER if k in recipe} | {k: v for k, v in recipe.items() if k not in ORDER}
    recipe = {k: type_first(v) for k, v in recipe.items()}
    parameters = zoo.count_parameters(zoo.build(recipe, device="meta"))
    recipe["expect"] = {"parameters": parameters}
    out = ROOT / "recipes" / f"{args.name}.yaml"
    out.write_text(yaml.safe_dump(recipe, sort_keys=False, default_flow_style=None, width=120), encoding="utf-8")
    print(f"wrote {out} ({parameters:,} parameters)")


if __name__ == "__main__":
    main()
