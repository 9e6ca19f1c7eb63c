"""Hugging Face checkpoints in and out: GPT-2, BERT, ViT, T5, Llama and Mixtral.

    model = zoo.hf.from_hf("path/to/hf-folder")        # config.json + weights -> a zoo model
    zoo.hf.to_hf(model, "path/to/out")                 # -> config.json + model.safetensors in HF's layout
    zoo.hf.export_checkpoint("runs/gpt", "path/to/out")  # + tokenizer and generation config: pipeline-ready

A folder's ``config.json`` becomes a zoo recipe (``model.recipe``) and its weights are renamed and
reshaped into the zoo model through the family's table (``zoo/hf/<family>.py``). Nothing here needs
``transformers``: configs are read with ``json`` and weights with ``safetensors`` or
``torch.load(weights_only=True)``. Config options zoo cannot reproduce, and missing, unexpected or
mis-shaped weights, are refused with one ``HFImportError`` that names them all. The tokenizer and
generation files that go with a checkpoint are in ``zoo/hf/tokenizer.py``.

``zoo.hf`` is a built-in plugin, above the builder and ``zoo.load``: its families join zoo through the
``register_hf_families`` hook, as a plugin's do, and ``zoo.load_recipe`` and ``zoo.load`` read a Hugging Face
folder through two hooks it implements (``zoo.plugins.hf_folder_recipe``, ``zoo.plugins.load_hf_folder``).
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from zoo.errors import HFExportError, HFImportError
from zoo.files import CONFIG_FILE, check_weights, destination, read_json
from zoo.hookspecs import hookimpl
from zoo.hub import resolve
from zoo.lora import lora_modules
from zoo.plugins import hf_families

from ._peft import ADAPTER_DIR, peft_files, take_adapters, write_adapter
from .bert import BERT
from .checks import config_problems
from .gpt2 import GPT2
from .io import read_config, read_names, read_weights, write_checkpoint
from .llama import LLAMA
from .mapping import (
    Family,
    compare,
    expected_shapes,
    flatten,
    links,
    nest,
    to_hf_state,
    to_zoo_state,
    unsupported,
    zoo_tensors,
)
from .mixtral import MIXTRAL
from .remote import REMOTE_CODE, closest_families, remote_checkpoint, write_remote
from .t5 import T5
from .tokenizer import (
    CARRIED_DIR,
    GENERATION_CONFIG_FILE,
    carry_in,
    companions,
    copy_out,
    generation_config,
    write_files,
)
from .vit import VIT

__all__ = [
    "FAMILIES",
    "Conversion",
    "Family",
    "HFExportError",
    "HFImportError",
    "export_checkpoint",
    "families",
    "family_of",
    "family_table",
    "from_hf",
    "hf_recipe",
    "import_checkpoint",
    "load_hf_weights",
    "to_hf",
]

FAMILY_INFRASTRUCTURE = frozenset({"io", "mapping", "tokenizer"})
"""Modules of ``zoo.hf`` that define no family."""


def _families() -> dict[str, Family]:
    """Every ``Family`` defined at the top level of a module of this package: a new family is one file,
    ``zoo/hf/<family>.py``, with its table. The six first families come first, the others by module name, each
    derived family after its parent."""
    found: dict[str, Family] = {f.model_type: f for f in (GPT2, BERT, VIT, T5, LLAMA, MIXTRAL)}

    def add(family: Family) -> None:  # a derived family after its parent
        if family.parent is not None:
            add(family.parent)
        found.setdefault(family.model_type, family)

    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name in FAMILY_INFRASTRUCTURE or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, Family):
                add(value)
    return found


FAMILIES: dict[str, Family] = _families()
"""HF ``model_type`` -> the built-in family that imports it (plugins add theirs: :func:`families`)."""


@hookimpl
def register_hf_families() -> list[Family]:
    """The built-in families: ``zoo.hf`` is a built-in plugin, and joins them to zoo as any plugin joins its own."""
    return list(FAMILIES.values())


@hookimpl(specname="hf_folder_recipe")
def _folder_recipe(path: Path) -> dict[str, Any]:
    """What ``zoo.load_recipe`` reads in a Hugging Face folder: its recipe (``hf_recipe``)."""
    return hf_recipe(path)


@hookimpl(specname="load_hf_folder")
def _load_folder(path: Path, device: str | torch.device | None) -> nn.Module:
    """What ``zoo.load`` reads in a Hugging Face folder: the model with its weights (``from_hf``), on ``device``."""
    model = from_hf(path)
    return model.to(device) if device is not None else model


def families() -> dict[str, Family]:
    """HF ``model_type`` -> the family that imports it: the built-in ``FAMILIES``, then those installed plugins
    register through the ``register_hf_families`` hook (read when first asked, after plugins load)."""
    return hf_families()


@dataclass(frozen=True)
class Conversion:
    """What an import or export wrote, for the CLI to show."""

    family: str
    hf_class: str
    parameters: int
    directory: Path
    notes: tuple[str, ...] = ()
    """What else was read or written (the checkpoint of a run, the tokenizer files), in words."""


@dataclass(frozen=True)
class _Source:
    """A checkpoint folder's config, read and checked: its family, HF class and options with defaults."""

    path: Path
    family: Family
    hf_class: str
    config: dict[str, Any]

    @classmethod
    def read(cls, path: str | Path) -> _Source:
        path = Path(path)
        config = read_config(path)
        model_type = config.get("model_type")
        known = families()
        if not isinstance(model_type, str) or model_type not in known:
            raise HFImportError(
                f"model_type {model_type!r} is not supported; zoo imports {', '.join(known)}", source=str(path)
            )
        family = known[model_type]
        architectures = config.get("architectures") or [family.classes[0]]
        if not isinstance(architectures, list) or not all(isinstance(a, str) for a in architectures):
            raise HFImportError(f"architectures={architectures!r} must be a list of class names", source=str(path))
        if architectures[0] not in family.classes:
            raise HFImportError(
                f"architectures={architectures!r} is not supported: zoo imports {family.name} checkpoints of "
                f"{', '.join(family.classes)}",
                source=str(path),
            )
        config = flatten(config, family.nested)
        problems = config_problems(config, family.defaults)
        if problems:
            raise HFImportError(problems, source=str(path))
        merged = {**family.defaults, **config}
        problems = unsupported(merged, family.options)
        if problems:
            raise HFImportError(problems, source=str(path))
        return cls(path, family, architectures[0], merged)

    def weights(self) -> dict[str, torch.Tensor]:
        """The checkpoint's tensors under the full names of the family's table."""
        state = read_weights(self.path)
        if self.family.layout is not None:
            state = self.family.layout(state)
        return {self.family.full_name(n): t for n, t in state.items()}

    def recipe(self, names: frozenset[str] | None) -> dict[str, Any]:
        """The zoo recipe; ``names`` are the checkpoint's full tensor names (None: config only)."""
        try:
            recipe = self.family.recipe(self.config, self.hf_class, names)
        except HFImportError as exc:
            raise HFImportError(exc.problems, source=str(self.path)) from None
        name = self.path.resolve().name or self.family.name
        description = f"Imported from the Hugging Face {self.hf_class} checkpoint {self.path}."
        return {"name": name, "description": description, **recipe}


def hf_recipe(path: str | Path) -> dict[str, Any]:
    """The zoo recipe (a dict) of the Hugging Face checkpoint folder ``path``; weights are not read, and a
    folder with ``config.json`` alone will do.

    Raises:
        HFImportError: the model type, class or a config option is not supported (all options named).
    """
    source = _Source.read(path)
    names = read_names(source.path)
    return source.recipe(None if names is None else frozenset(source.family.full_name(n) for n in names))


def load_hf_weights(model: nn.Module, family: Family, state: dict[str, torch.Tensor], *, source: str = "") -> None:
    """Copy HF-named ``state`` (full names, table layout) into a zoo model of ``family``'s shape.

    Raises:
        HFImportError: the missing, unexpected and mis-shaped weights, all by name, in one error.
    """
    zoo = zoo_tensors(model)
    found, uncovered = links(family.rules, zoo, model.recipe)
    if uncovered:
        raise HFImportError(f"the {family.name} table has no row for zoo weights {', '.join(uncovered)}", source=source)
    provided = {n: tuple(t.shape) for n, t in state.items()}
    problems = compare(expected_shapes(found, zoo), provided, family.ignored)
    if problems:
        raise HFImportError(problems, source=source)
    with torch.no_grad():
        for name, tensor in to_zoo_state(found, state).items():
            zoo[name].copy_(tensor)


def from_hf(
    path: str | Path, *, device: str | torch.device | None = None, dtype: str | torch.dtype | None = None
) -> nn.Module:
    """A zoo model with the weights of the Hugging Face checkpoint folder ``path``.

    ``dtype`` defaults to the checkpoint's own, so weights arrive bit for bit.

    Raises:
        HFImportError: an unsupported family, class or config option, or weights that do not fit the model.
    """
    from zoo.builder import build

    source = _Source.read(path)  # refuses unsupported options before any weight is read
    state = source.weights()
    check_weights(state, str(source.path), HFImportError)
    recipe = source.recipe(frozenset(state))
    if dtype is None:
        dtype = next((t.dtype for t in state.values() if t.is_floating_point()), None)
    model = build(recipe, device=device, dtype=dtype)
    load_hf_weights(model, source.family, state, source=str(source.path))
    return model


def family_table() -> str:
    """The README's table of families (Markdown), made from ``FAMILIES``: the checkpoint classes that import and
    export, and the named recipes of published checkpoints."""
    rows = ["| family (`model_type`) | imports and exports | named recipes |", "|---|---|---|"]
    for family in FAMILIES.values():
        classes = dict.fromkeys([*family.classes, *([family.base_class] if family.base_class else [])])
        recipes = ", ".join(f"`{name}`" for name in family.recipes) or "-"
        rows.append(f"| {family.name} (`{family.model_type}`) | {', '.join(f'`{c}`' for c in classes)} | {recipes} |")
    return "\n".join(rows)


def family_of(recipe: Any) -> Family:
    """The family whose HF model a recipe describes exactly: the one its ``hf_family`` names, else the first
    that fits (some networks are two families': Phi-3's is Mistral's).

    Raises:
        HFExportError: it fits none (or not the one it names); the message says what does not fit.
    """
    known = families()
    named = getattr(recipe, "hf_family", None)
    if named is not None:
        if named not in known:
            raise HFExportError(f"recipe '{recipe.name}': hf_family {named!r} is not one of {', '.join(known)}")
        problems = known[named].misfits(recipe)
        if problems:
            raise HFExportError(
                f"recipe '{recipe.name}' names hf_family {named!r} but does not fit it: {'; '.join(problems)} "
                "(remove hf_family to export as the first family it fits)"
            )
        return known[named]
    reasons = {}
    for family in known.values():
        problems = family.misfits(recipe)
        if not problems:
            return family
        reasons[family.name] = problems
    lines = [f"  {name}: {'; '.join(problems)}" for name, problems in reasons.items()]
    raise HFExportError("\n".join([f"recipe '{recipe.name}' fits no Hugging Face family:", *lines]))


def to_hf(model_or_dir: nn.Module | str | Path, out: str | Path) -> Path:
    """Write a zoo model (or a folder written by ``zoo.save``) as a Hugging Face checkpoint folder.

    ``out`` receives ``config.json`` and ``model.safetensors`` in the layout of the family's HF class,
    loadable with ``from_pretrained``; ``export_checkpoint`` adds the tokenizer and generation config.

    Raises:
        HFExportError: the model's recipe fits no supported family.
    """
    from zoo.checkpoint import load

    model = load(model_or_dir) if isinstance(model_or_dir, (str, Path)) else model_or_dir
    config, state = _hf_checkpoint(model)
    return write_checkpoint(out, config, state)


def _hf_checkpoint(model: nn.Module) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """(config.json, HF-named weights) of a zoo model."""
    recipe = getattr(model, "recipe", None)
    if recipe is None:
        raise HFExportError("this model was not built by zoo.build (it has no .recipe); cannot tell its family")
    if lora_modules(model):
        raise HFExportError("the model has LoRA adapters: fold them in first (zoo.lora.merge_lora, --merge-lora)")
    family = family_of(recipe)
    zoo = zoo_tensors(model)
    found, uncovered = links(family.rules, zoo, recipe)
    if uncovered:
        raise HFExportError(f"the {family.name} table has no row for zoo weights {', '.join(uncovered)}")
    state = to_hf_state(found, zoo)
    if family.hf_layout is not None:
        state = family.hf_layout(state)
    hf_class = family.hf_class(recipe)
    if hf_class == family.base_class:
        state = {n.removeprefix(family.base_prefix): t for n, t in state.items()}
    config = {"model_type": family.model_type, "architectures": [hf_class], **family.config(recipe, zoo)}
    return nest(config, family.nested), state


def import_checkpoint(
    hf_dir: str | Path, out: str | Path, *, dtype: str | torch.dtype | None = None, force: bool = False
) -> Conversion:
    """``zoo import``: read a HF checkpoint folder and save it as a zoo folder (recipe.yaml + weights), its
    tokenizer and generation files carried along in ``out/hf`` (``zoo export`` writes them back out).

    ``out`` may not be ``hf_dir`` (nor inside it); a folder that holds anything but this same model is replaced
    whole with ``force``, and refused without (``zoo.files.destination``)."""
    from zoo.builder import count_parameters
    from zoo.checkpoint import holds_recipe, save

    hf_dir = resolve(hf_dir)  # a hub id: its snapshot in the local cache
    source = _Source.read(hf_dir)
    model = from_hf(hf_dir, dtype=dtype)
    with destination(out, what="the imported model", force=force, same=holds_recipe(model.recipe), reading=(hf_dir,)):
        directory = save(model, out)
        names = carry_in(hf_dir, directory)
    notes = (f"carried along into {Path(directory) / CARRIED_DIR}: {', '.join(names)}",) if names else ()
    return Conversion(source.family.name, source.hf_class, count_parameters(model), Path(directory), notes)


def _same_config(config: dict[str, Any]) -> Callable[[Path], bool]:
    """Whether a folder holds a Hugging Face checkpoint with this very config.json (written over in place)."""

    def same(folder: Path) -> bool:
        try:
            held = read_json(folder / CONFIG_FILE, error=HFExportError, folder=folder)
        except (OSError, HFExportError):
            return False
        return held == json.loads(json.dumps(config))

    return same


def export_checkpoint(
    zoo_dir: str | Path, out: str | Path, *, force: bool = False, remote_code: bool = False, merge_lora: bool = False
) -> Conversion:
    """``zoo export --to hf``: write a model as a HF checkpoint folder that ``transformers.pipeline`` loads.

    A model that fits a family (``family_of``) is written as that family's HF class; one that fits none (or any,
    with ``remote_code``) as a remote-code export (``zoo.hf.remote``: a generated ``modeling_zoo.py`` and the
    ``torch.export`` programs that compute it, loaded with ``trust_remote_code=True``), with a note naming the
    families that came closest. A recipe that names its ``hf_family`` is held to it.

    ``zoo_dir`` is any folder ``zoo.locate`` knows: a model folder, a training checkpoint, a run (its latest
    complete checkpoint) or a Hugging Face folder. Besides config.json and the weights, ``out`` receives the
    tokenizer and ``generation_config.json`` (see ``zoo.hf.tokenizer.companions``), their bos / eos / pad ids
    in config.json too, and a classifier's class names (``id2label``) from the run that trained it.

    A model trained with LoRA (``train.lora``) exports its base weights, and its adapters as a PEFT folder in
    ``out/adapter`` (``zoo.hf._peft``); ``merge_lora`` folds them into the weights instead.

    Raises:
        NotAModelFolder: ``zoo_dir`` is none of those folders. HFExportError: the model fits no family and a
            component of it cannot be exported as remote code (named), or it does not fit its ``hf_family``;
            adapters PEFT cannot express (without ``merge_lora``).
        DestinationError: ``out`` is ``zoo_dir``, or holds something else than this export (without ``force``,
            which replaces it whole).
    """
    from zoo.builder import count_parameters
    from zoo.checkpoint import load
    from zoo.locate import locate

    folder = locate(zoo_dir)
    model = load(zoo_dir)
    adapters, merged = take_adapters(model, merge=merge_lora, where=str(zoo_dir))  # model: plain from here on
    recipe = model.recipe
    family, closest = _export_family(recipe, remote_code)
    remote = remote_checkpoint(model) if family is None else None
    config, state = _hf_checkpoint(model) if remote is None else (remote.config, remote.state)
    peft = None
    if adapters is not None and remote is not None:
        raise HFExportError(
            f"{zoo_dir}: LoRA adapters of a remote-code export have no PEFT names; fold them in with --merge-lora"
        )
    if adapters is not None:
        peft = peft_files(adapters, model, family, config["architectures"][0], set(state))
    extra = companions(folder, recipe)
    ids, kept = dict(extra.token_ids), None
    model_pad = config.get("pad_token_id")
    if model_pad is not None and ids.get("pad_token_id") not in (None, model_pad):
        # The network reads its pad id (RoBERTa's and M2M-100's positions, BART's padding rows): it stays.
        kept = (
            f"config.json keeps the model's pad_token_id {model_pad} (its positions or embeddings depend on it); "
            f"the tokenizer pads with id {ids['pad_token_id']}"
        )
        ids["pad_token_id"] = model_pad
    config.update(ids)
    if extra.labels is not None and len(extra.labels) == len(config.get("id2label", ())):
        config["id2label"] = {str(i): label for i, label in enumerate(extra.labels)}
        config["label2id"] = {label: i for i, label in enumerate(extra.labels)}
    written = dict(extra.written)
    generates = recipe.architecture in ("decoder", "encoder-decoder")
    if generates and extra.token_ids and not any(p.name == GENERATION_CONFIG_FILE for p in extra.copied):
        written[GENERATION_CONFIG_FILE] = generation_config(ids, config)
    with destination(out, what="the export", force=force, same=_same_config(config), reading=(zoo_dir,)):
        directory = (
            write_checkpoint(out, config, state)
            if remote is None
            else write_remote(out, replace(remote, config=config))
        )
        write_files(directory, written)
        copy_out(extra.copied, directory)
        if peft is not None:
            adapter = write_adapter(Path(directory) / ADAPTER_DIR, *peft)
            merged = f"LoRA adapters as a PEFT folder: {adapter} (peft.PeftModel.from_pretrained(model, '{adapter}'))"
    notes = tuple(n for n in (folder.note, closest, extra.note, kept, merged) if n)
    if remote is None:
        return Conversion(family.name, family.hf_class(recipe), count_parameters(model), Path(directory), notes)
    loads = f"load it with trust_remote_code=True (outputs checked against zoo's: max |diff| {remote.max_diff:.1e})"
    return Conversion(REMOTE_CODE, remote.hf_class, count_parameters(model), Path(directory), (*notes, loads))


def _export_family(recipe: Any, remote_code: bool) -> tuple[Family | None, str | None]:
    """The family an export writes (None: remote code) and, when none fits, the closest ones in one line."""
    if remote_code:
        return None, None
    if getattr(recipe, "hf_family", None) is not None:
        return family_of(recipe), None
    misfits = {}
    for family in families().values():
        problems = family.misfits(recipe)
        if not problems:
            return family, None
        misfits[family.name] = problems
    return None, closest_families(recipe.name, misfits)
