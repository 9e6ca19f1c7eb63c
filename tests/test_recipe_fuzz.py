"""Fuzzing recipes: whatever a recipe holds, loading it gives a ``Recipe`` or a ``RecipeError`` (never anything
else, never slowly), and every recipe that validates builds and, when small, runs forward and backward.

The recipes are the shipped ones and the architectures' tiny ones, mutated by a seeded generator: wrong types,
huge / negative / zero / non-finite numbers, missing and unknown keys, component types and options drawn from
the registry (plugins' included), per-layer overrides with random selectors and stacks, deep nesting and bad
``extends``. A failure prints the seed of its case; ``fuzz(1, write_bad_files(folder), first=seed)`` runs it
again.
"""

from __future__ import annotations

import copy
import math
import random
import time
import tracemalloc
import types
import typing
from pathlib import Path
from typing import Any

import pytest
import torch

import zoo
from zoo.builder import check_buildable, count_parameters
from zoo.config import spec_fields
from zoo.plugins import get_registry
from zoo.recipe import named_recipes

SEED = 20240601
CASES = 3000
MAX_SECONDS = 10.0
MAX_PEAK_BYTES = 1 << 30
FORWARD_PARAMETERS = 3_000_000
"""Valid recipes up to this many parameters (after shrinking) run forward and backward on the CPU."""
N, L = 2, 8

KINDS = ("embedding", "positional", "attention", "norm", "ffn", "head")
LAYER_KINDS = ("attention", "norm", "ffn")
TOP_KEYS = [
    "name",
    "description",
    "architecture",
    "d_model",
    "num_layers",
    "num_decoder_layers",
    "max_len",
    "vocab_size",
    "type_vocab_size",
    "pad_token_id",
    "image_size",
    "patch_size",
    "num_channels",
    "num_classes",
    "embed_norm",
    "final_norm",
    "dropout",
    "init_std",
    "norm_position",
    "block",
    "layers",
    "expect",
    "train",
    "nonsense",
    *KINDS,
]
WILD = [
    None,
    True,
    False,
    0,
    1,
    2,
    3,
    -1,
    -7,
    2**31,
    10**9,
    10**30,
    0.0,
    0.5,
    1e-9,
    -0.5,
    2.5,
    1e308,
    math.inf,
    -math.inf,
    math.nan,
    "",
    "x",
    "8",
    "1:04",
    "1::2",
    "all",
    "mha",
    "rope",
    "moe",
    [],
    [1, 2],
    [True],
    {},
    {"type": "mha"},
    {"x": 1},
]
SIZES = {
    "d_model": [8, 16, 24, 32, 48, 64],
    "num_layers": [1, 2, 3],
    "num_decoder_layers": [1, 2],
    "max_len": [4, 8, 16, 33],
    "vocab_size": [2, 17, 61, 256],
    "type_vocab_size": [0, 2],
    "pad_token_id": [0, 1, 60],
    "image_size": [4, 8, 12],
    "patch_size": [2, 4],
    "num_channels": [1, 3],
    "num_classes": [2, 5],
    "dropout": [0.0, 0.1],
    "init_std": [0.02, 1.0],
    "embed_norm": [True, False],
    "final_norm": [True, False],
    "norm_position": ["pre", "post", "sandwich"],
}
SELECTORS = [
    0,
    1,
    -1,
    2,
    5,
    -9,
    [0],
    [0, 1],
    [1, -1],
    [],
    "1::2",
    ":1",
    "0:2",
    "::-1",
    "all",
    "5:",
    " 1 ",
    "x",
    None,
    True,
]
STACKS = ["all", "encoder", "decoder", "middle"]


# ---------------------------------------------------------------------------------------------- values


def _members(annotation: Any) -> list[Any]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _members(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is types.UnionType:
        return [m for a in typing.get_args(annotation) for m in _members(a)]
    return [annotation]


def _value_for(rng: random.Random, annotation: Any) -> Any:
    """A value of a field's type, in range more often than not; sometimes a wild one."""
    if rng.random() < 0.2:
        return rng.choice(WILD)
    member = rng.choice(_members(annotation))
    if member is bool:
        return rng.random() < 0.5
    if member is int:
        return rng.choice([1, 2, 3, 4, 8, 16, 0, -1, 4097, 10**7])
    if member is float:
        return rng.choice([1e-6, 0.01, 0.1, 0.5, 1.0, 4.0, 10000.0, 0.0, -1.0, 1e30])
    if member is str:
        return rng.choice(["", "x", "rmsnorm", "relu"])
    if typing.get_origin(member) is typing.Literal:
        return rng.choice([*typing.get_args(member), "nope"])
    if member is type(None):
        return None
    if typing.get_origin(member) in (tuple, list):
        return [rng.choice([0.5, 0.9, 1.0, True, "x"]) for _ in range(rng.randint(0, 3))]
    return rng.choice(WILD)


def _spec(rng: random.Random, kind: str, depth: int = 0) -> Any:
    """A component spec of ``kind``: a registered type with one of its examples, perhaps changed."""
    registry = get_registry()
    names = registry.names(kind)
    if rng.random() < 0.05:
        return rng.choice([*WILD, "nope"])
    name = rng.choice(names)
    config = registry.get(kind, name).config
    if rng.random() < 0.1:
        return name
    spec: dict[str, Any] = {"type": name, **copy.deepcopy(rng.choice(config.examples or ({},)))}
    for _ in range(rng.choice([0, 0, 1, 2])):
        field = rng.choice([*config.model_fields, "hiden"])
        if field == "type":
            continue
        nested = spec_fields(config).get(field)
        if nested is not None and depth < 2:
            spec[field] = _spec(rng, nested, depth + 1)
        elif field in config.model_fields:
            spec[field] = _value_for(rng, config.model_fields[field].annotation)
        else:
            spec[field] = rng.choice(WILD)
    return spec


def _nested(depth: int) -> Any:
    value: Any = 1
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


# ---------------------------------------------------------------------------------------------- mutations


def _set_top(rng, data, files):
    key = rng.choice(TOP_KEYS)
    if key in SIZES and rng.random() < 0.7:
        data[key] = rng.choice(SIZES[key])
    elif key in KINDS:
        data[key] = _spec(rng, key)
    else:
        data[key] = rng.choice(WILD)


def _delete(rng, data, files):
    if data:
        data.pop(rng.choice(sorted(data)))


def _option(rng, data, files):
    kind = rng.choice(KINDS)
    spec = data.get(kind)
    if isinstance(spec, str):
        spec = {"type": spec}
    if not isinstance(spec, dict) or not isinstance(spec.get("type"), str):
        data[kind] = _spec(rng, kind)
        return
    try:
        config = get_registry().get(kind, spec["type"]).config
    except zoo.UnknownComponentError:
        return
    field = rng.choice([*config.model_fields, "nonsense"])
    if field != "type":
        annotation = config.model_fields[field].annotation if field in config.model_fields else Any
        spec = {**spec, field: _value_for(rng, annotation)}
    data[kind] = spec


def _swap(rng, data, files):
    kind = rng.choice(KINDS)
    data[kind] = _spec(rng, kind)


def _override(rng, data, files):
    layers = data.get("layers")
    layers = list(layers) if isinstance(layers, list) else []
    entry: dict[str, Any] = {"select": rng.choice(SELECTORS)}
    if rng.random() < 0.4:
        entry["stack"] = rng.choice(STACKS)
    for kind in rng.sample(LAYER_KINDS, rng.randint(0, 2)):
        entry[kind] = _spec(rng, kind)
    if rng.random() < 0.05:
        entry = rng.choice([{}, {"select": 0, "x": 1}, 3, None])
    layers.append(entry)
    data["layers"] = layers


def _deep(rng, data, files):
    data[rng.choice(["description", "attention", "layers", "train", "expect"])] = _nested(
        rng.choice([5, 40, 500, 3000])
    )


def _extends(rng, data, files):
    data["extends"] = rng.choice(
        [*sorted(named_recipes())[:4], "nope", 3, None, "", "x" * 5000, "a\0b", *(str(f) for f in files)]
    )


def _block(rng, data, files):
    data["block"] = {
        k: rng.choice([True, False, "pre", "post", "sandwich", "side", 1])
        for k in rng.sample(["norm_position", "parallel", "shared_norm", "nonsense"], rng.randint(1, 3))
    }


def _train(rng, data, files):
    from zoo.recipe.training import TrainConfig

    field = rng.choice([*TrainConfig.model_fields, "nonsense"])
    annotation = TrainConfig.model_fields[field].annotation if field in TrainConfig.model_fields else Any
    data["train"] = {field: _value_for(rng, annotation)}


def _architecture(rng, data, files):
    data["architecture"] = rng.choice([*get_registry().names("architecture"), "decodr", 7])


def _resize(rng, data, files):
    for key in rng.sample(sorted(SIZES), rng.randint(1, 3)):
        data[key] = rng.choice(SIZES[key])


MUTATIONS = [
    (_set_top, 4),
    (_delete, 1),
    (_option, 6),
    (_swap, 6),
    (_override, 5),
    (_deep, 0.4),
    (_extends, 0.6),
    (_block, 1),
    (_train, 1),
    (_architecture, 1),
    (_resize, 3),
]


# ---------------------------------------------------------------------------------------------- cases


MAX_BASE_EXPERTS = 2_000
"""A named recipe whose layers hold more routed experts than this is fuzzed with its first 4 layers (and no
``expect``): DeepSeek-V3's 14,848 experts are 75,000 modules, tens of seconds to build on the meta device for
every valid case, where 4 layers keep all its kinds of layer (3 dense, 1 MoE)."""


def _base(name: str) -> dict[str, Any]:
    recipe = zoo.load_recipe(name)
    data = recipe.to_dict()
    if getattr(recipe.ffn, "num_experts", 0) * recipe.num_layers > MAX_BASE_EXPERTS:
        data = {k: v for k, v in data.items() if k != "expect"} | {"num_layers": 4}
    return data


def _bases() -> list[tuple[str, dict[str, Any]]]:
    bases = [(name, _base(name)) for name in sorted(named_recipes())]
    for component in get_registry():
        if component.kind == "architecture":
            for example in component.config.examples:
                bases.append((f"{component.name}-example", {"name": "example", **copy.deepcopy(example)}))
    return bases


def _case(seed: int, bases: list[tuple[str, dict[str, Any]]], files: list[Path]) -> tuple[str, Any]:
    rng = random.Random(seed)
    name, base = rng.choice(bases)
    data = copy.deepcopy(base)
    functions, weights = zip(*MUTATIONS, strict=True)
    for mutation in rng.choices(functions, weights, k=rng.randint(1, 4)):
        mutation(rng, data, files)
    return name, data


def _shrunk(data: dict[str, Any]) -> dict[str, Any] | None:
    """A cheap variant of a valid recipe: fewer, narrower layers and a small vocabulary; None if it is not valid.

    Widths shrink by a common factor (so that divisibility by the heads is kept) and counts are capped.
    """
    small = copy.deepcopy(data)
    small["num_layers"] = min(small.get("num_layers", 1), 2)
    if small.get("num_decoder_layers"):
        small["num_decoder_layers"] = min(small["num_decoder_layers"], 2)
    for key, cap in (("vocab_size", 97), ("max_len", 32), ("num_classes", 7), ("type_vocab_size", 2)):
        if isinstance(small.get(key), int):
            small[key] = min(small[key], cap)
    if isinstance(small.get("pad_token_id"), int):
        small["pad_token_id"] = min(small["pad_token_id"], 96)
    d_model = small.get("d_model", 64)
    factor = max(1, d_model // 64)
    while factor > 1 and d_model % factor:
        factor -= 1
    small["d_model"] = d_model // factor

    def narrow(spec: Any) -> Any:
        if not isinstance(spec, dict):
            return spec
        spec = dict(spec)
        for key in ("hidden", "head_dim"):
            if isinstance(spec.get(key), int):
                spec[key] = max(1, spec[key] // factor) if key == "head_dim" else min(spec[key], 64)
        for key in ("local_radius", "global_block_size", "window"):  # blocks sized by these, whatever the length
            if isinstance(spec.get(key), int):
                spec[key] = min(spec[key], 8)
        if isinstance(spec.get("num_experts"), int):
            spec["num_experts"] = min(spec["num_experts"], 4)
            if isinstance(spec.get("top_k"), int):
                spec["top_k"] = min(spec["top_k"], spec["num_experts"])
        for key in ("expert", "shared_expert", "qk_norm"):
            if key in spec:
                spec[key] = narrow(spec[key])
        return spec

    for kind in KINDS:
        small[kind] = narrow(small.get(kind))
        if small[kind] is None:
            small.pop(kind)
    small["layers"] = [{**o, **{k: narrow(o[k]) for k in LAYER_KINDS if k in o}} for o in small.get("layers", [])]
    small.pop("expect", None)
    audio = small.get("encoder_embedding")
    if isinstance(audio, dict) and audio.get("type") == "audio":  # an encoder that hears: a short window of frames
        small["encoder_embedding"] = {**audio, "num_mel_bins": 8, "frames": 8}
    if isinstance(small.get("decoder_max_len"), int):
        small["decoder_max_len"] = min(small["decoder_max_len"], 32)
    if small.get("architecture") == "vit":
        small.update(image_size=8, patch_size=4, num_channels=min(small.get("num_channels", 3), 3))
        small.pop("max_len", None)
    try:
        return zoo.load_recipe(small).to_dict()
    except zoo.RecipeError:
        return None


def _inputs(recipe: zoo.Recipe) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    if recipe.architecture == "vit":
        return {"images": torch.randn(N, recipe.num_channels, recipe.image_size, recipe.image_size, generator=g)}
    length = min(L, recipe.max_len or L)
    ids = torch.randint(0, recipe.vocab_size, (N, length), generator=g)
    audio = recipe.encoder_embedding
    if audio is not None and not getattr(type(audio), "token_input", True):  # log-mel frames into the encoder
        frames = torch.randn(N, audio.num_mel_bins, 2 * min(audio.frames, L), generator=g)
        return {"input_ids": frames, "decoder_input_ids": ids}
    if recipe.architecture == "encoder-decoder":
        return {"input_ids": ids, "decoder_input_ids": torch.randint(0, recipe.vocab_size, (N, length), generator=g)}
    return {"input_ids": ids}


def _forward_and_backward(recipe: zoo.Recipe) -> None:
    torch.manual_seed(0)
    model = zoo.build(recipe).train()
    out = model(**_inputs(recipe))
    loss = out.logits.float().square().mean() + (out.aux_loss if out.aux_loss is not None else 0.0)
    loss.backward()


def write_bad_files(d: Path) -> list[Path]:
    """Recipe files for ``extends`` to name: undecodable, an alias bomb, a cycle, a syntax error, deep nesting."""
    (d / "latin1.yaml").write_bytes(b"extends: gpt-tiny\nname: caf\xe9\n")
    (d / "bomb.yaml").write_text(
        "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
        + "".join(f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True))
    )
    (d / "cycle-a.yaml").write_text("extends: cycle-b.yaml\nname: a\n")
    (d / "cycle-b.yaml").write_text("extends: cycle-a.yaml\nname: b\n")
    (d / "good.yaml").write_text("extends: llama-tiny\nname: good\nnum_layers: 1\n")
    (d / "broken.yaml").write_text("name: [unclosed\n")
    (d / "deep.yaml").write_text("name: " + "[" * 200 + "]" * 200 + "\n")
    return sorted(d.iterdir())


def fuzz(cases: int, files: list[Path], first: int = SEED) -> tuple[list[str], dict[str, Any]]:
    """Run ``cases`` seeded cases from seed ``first``: the failures, and the figures (counts, time, memory)."""
    bases = _bases()
    started = time.perf_counter()
    failures: list[str] = []
    counts: dict[str, Any] = {"cases": 0, "valid": 0, "expect_refused": 0, "built": 0, "forward": 0}
    slowest, peak = (0.0, -1), 0
    for case in range(cases):
        seed = first + case
        name, data = _case(seed, bases, files)
        counts["cases"] += 1
        t0 = time.perf_counter()
        tracemalloc.start()
        try:
            recipe = zoo.load_recipe(data)
        except zoo.RecipeError:
            recipe = None
        except BaseException as exc:  # noqa: BLE001 - the property under test
            failures.append(f"seed {seed} ({name}): load_recipe raised {type(exc).__name__}: {exc}"[:400])
            recipe = None
        finally:
            peak = max(peak, tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
        if recipe is not None:
            counts["valid"] += 1
            try:
                try:
                    check_buildable(recipe)
                except zoo.RecipeError as exc:
                    if not all(path == "expect.parameters" for path, _ in exc.errors):
                        raise
                    # Only a build can count the parameters that ``expect`` states (a mutated size changes them).
                    counts["expect_refused"] += 1
                    recipe = zoo.load_recipe({k: v for k, v in recipe.to_dict().items() if k != "expect"})
                    check_buildable(recipe)
                counts["built"] += 1
                small = _shrunk(recipe.to_dict())
                if small is not None:
                    small_recipe = zoo.load_recipe(small)
                    if count_parameters(zoo.build(small_recipe, device="meta")) <= FORWARD_PARAMETERS:
                        _forward_and_backward(small_recipe)
                        counts["forward"] += 1
            except BaseException as exc:  # noqa: BLE001 - the property under test
                failures.append(f"seed {seed} ({name}): valid but {type(exc).__name__}: {exc}"[:600])
        elapsed = time.perf_counter() - t0
        slowest = max(slowest, (elapsed, seed))
    counts.update(slowest=slowest, peak=peak, seconds=time.perf_counter() - started)
    return failures, counts


@pytest.mark.slow
def test_every_mutated_recipe_loads_or_is_refused_and_every_valid_one_runs(tmp_path):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: one thread is fastest on a busy machine
    try:
        failures, figures = fuzz(CASES, write_bad_files(tmp_path))
    finally:
        torch.set_num_threads(threads)
    (seconds, seed), peak = figures["slowest"], figures["peak"]
    print(f"fuzz: {figures}, validation peak {peak / 2**20:.1f} MiB")
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:25])
    assert seconds < MAX_SECONDS, f"seed {seed} took {seconds:.1f}s"
    assert peak < MAX_PEAK_BYTES, f"validation peaked at {peak / 2**20:.0f} MiB"
    assert figures["valid"] >= CASES // 10 and figures["forward"] >= 200, figures
