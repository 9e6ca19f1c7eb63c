"""The files next to a Hugging Face checkpoint that make it usable: tokenizer and generation settings.

``zoo export --to hf`` writes, besides config.json and the weights:

- for a model trained by ``zoo train`` (its checkpoint holds zoo's ``tokenizer.json``), the same tokenizer
  in the format of the ``tokenizers`` library (``tokenizer.json`` + ``tokenizer_config.json``), which
  ``AutoTokenizer`` and ``transformers.pipeline`` load and which gives exactly zoo's ids;
- ``generation_config.json`` (decoders and encoder-decoders) with the bos / eos / pad ids of that tokenizer.

zoo's byte tokenizer becomes a byte-level BPE without merges: its vocabulary is the 256 bytes, each at its
own id (GPT-2's printable stand-in characters), except that the six specials (never UTF-8 bytes, or NUL)
are named ``<pad>``, ``<mask>``, ... at theirs. A NUL byte, which zoo drops, has no symbol and is dropped
too. Text that spells a special (``"<eos>"``) stays bytes, as in zoo (``split_special_tokens``), except in
masked LM exports, where ``fill-mask`` needs ``<mask>`` in the text to be the mask. zoo's trained BPE *is*
a ``tokenizers`` tokenizer and is written as it is. A text classifier's tokenizer puts ``<cls>`` first, as
the training did.

``zoo import`` carries an imported checkpoint's own tokenizer and generation files (``CARRIED_FILES``)
into the zoo folder's ``hf/`` subfolder, and ``zoo export`` writes them back out unchanged.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zoo.errors import HFExportError, HFImportError
from zoo.files import atomic_write, folder_file
from zoo.locate import ModelFolder
from zoo.train.tokenizer import SPECIALS, BPETokenizer, ByteTokenizer, HFTokenizer, Tokenizer

TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
GENERATION_CONFIG_FILE = "generation_config.json"
CARRIED_DIR = "hf"
"""The subfolder of a zoo model folder that holds the Hugging Face files an import carried along."""
CARRIED_FILES = (
    TOKENIZER_FILE,
    TOKENIZER_CONFIG_FILE,
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
    "spiece.model",
    "tokenizer.model",
    "sentencepiece.bpe.model",
    "chat_template.jinja",
    "chat_template.json",
    GENERATION_CONFIG_FILE,
    "preprocessor_config.json",
)
"""Files of a Hugging Face checkpoint folder that describe its tokenizer, generation or image processing."""
TOKEN_ID_KEYS = ("bos_token_id", "eos_token_id", "pad_token_id")


def byte_symbols() -> dict[int, str]:
    """GPT-2's printable character for each byte (the alphabet of ``tokenizers``' ByteLevel)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    table = {b: chr(b) for b in printable}
    table.update({b: chr(256 + n) for n, b in enumerate(others)})
    return table


def special_tokens(tokenizer: Tokenizer) -> dict[str, int]:
    """``{"<pad>": 0, "<mask>": ..., ...}``: the name and id of each of zoo's special tokens."""
    return {f"<{name}>": getattr(tokenizer, f"{name}_id") for name in SPECIALS}


def token_ids(tokenizer: Tokenizer) -> dict[str, int]:
    """The ``bos_token_id``, ``eos_token_id`` and ``pad_token_id`` of zoo's tokenizer."""
    return {"bos_token_id": tokenizer.bos_id, "eos_token_id": tokenizer.eos_id, "pad_token_id": tokenizer.pad_id}


def backend(tokenizer: Tokenizer) -> Any:
    """The ``tokenizers.Tokenizer`` that encodes and decodes text exactly as zoo's ``tokenizer``.

    Raises:
        HFExportError: the ``tokenizers`` package is missing, or the tokenizer is of another kind.
    """
    try:
        import tokenizers
    except ImportError:
        raise HFExportError("writing the tokenizer needs the `tokenizers` package: pip install 'zoo[hf]'") from None
    if isinstance(tokenizer, BPETokenizer):
        return tokenizers.Tokenizer.from_str(json.dumps(tokenizer.to_json()["tokenizer"]))
    if not isinstance(tokenizer, ByteTokenizer):
        raise HFExportError(f"cannot write a {type(tokenizer).__name__} as a Hugging Face tokenizer")
    names = {i: name for name, i in special_tokens(tokenizer).items()}
    vocab = {names.get(b, symbol): b for b, symbol in byte_symbols().items()}
    tok = tokenizers.Tokenizer(tokenizers.models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    tok.add_special_tokens([tokenizers.AddedToken(name, special=True, normalized=False) for name in names.values()])
    return tok


def tokenizer_files(
    tokenizer: Tokenizer, *, classification: bool = False, masked_lm: bool = False, max_len: int | None = None
) -> dict[str, str]:
    """``tokenizer.json`` and ``tokenizer_config.json`` (name -> text) of zoo's ``tokenizer`` for Hugging Face.

    ``classification`` puts ``<cls>`` before each text (as zoo's classification training does);
    ``masked_lm`` reads ``<mask>`` in a text as the mask token; ``max_len`` is the most positions the model has.
    """
    import tokenizers

    tok = backend(tokenizer)
    if classification:
        tok.post_processor = tokenizers.processors.TemplateProcessing(
            single="<cls> $A", special_tokens=[("<cls>", tokenizer.cls_id)]
        )
    config: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **{f"{name}_token": f"<{name}>" for name in SPECIALS},
        "clean_up_tokenization_spaces": False,
        # zoo's byte tokenizer never reads a special out of text; its BPE (a tokenizers tokenizer) does.
        "split_special_tokens": isinstance(tokenizer, ByteTokenizer) and not masked_lm,
    }
    if max_len is not None:
        config["model_max_length"] = max_len
    return {
        TOKENIZER_FILE: tok.to_str(pretty=True) + "\n",
        TOKENIZER_CONFIG_FILE: json.dumps(config, indent=2, sort_keys=True) + "\n",
    }


def generation_config(ids: dict[str, int | None], config: dict[str, Any]) -> str:
    """``generation_config.json`` with the token ids, and the decoder start token of an encoder-decoder."""
    data = {k: v for k, v in ids.items() if v is not None}
    if config.get("decoder_start_token_id") is not None:
        data["decoder_start_token_id"] = config["decoder_start_token_id"]
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def write_files(directory: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        atomic_write(directory / name, lambda tmp, text=text: tmp.write_text(text, encoding="utf-8"))


def present(folder: str | Path, names: tuple[str, ...]) -> list[Path]:
    """The files of ``folder`` among ``names``, each a regular file inside it (``zoo.files.folder_file``: a link
    out of the folder, to /etc/passwd say, is refused rather than copied into an import or export)."""
    folder = Path(folder)
    named = [name for name in names if os.path.lexists(folder / name)]  # a dangling link too
    return [folder_file(folder, name, error=HFImportError) for name in named]


def carry_in(hf_dir: str | Path, zoo_dir: str | Path) -> list[str]:
    """Copy the tokenizer and generation files of a HF checkpoint folder into ``zoo_dir/hf``; their names."""
    found = present(hf_dir, CARRIED_FILES)
    target = Path(zoo_dir) / CARRIED_DIR
    if found:
        target.mkdir(parents=True, exist_ok=True)
    for path in found:
        atomic_write(target / path.name, lambda tmp, path=path: shutil.copyfile(path, tmp))
    return [path.name for path in found]


def carried(zoo_dir: str | Path) -> list[Path]:
    """The Hugging Face files an import carried into a zoo model folder (none for other folders)."""
    folder = Path(zoo_dir) / CARRIED_DIR
    return present(folder, CARRIED_FILES)


def carried_token_ids(files: list[Path]) -> dict[str, int | None]:
    """The bos / eos / pad ids of a carried ``generation_config.json`` (those it sets), else {}."""
    from zoo.files import read_json

    for path in files:
        if path.name == GENERATION_CONFIG_FILE:
            data = read_json(path, error=HFExportError)
            return {k: data[k] for k in TOKEN_ID_KEYS if k in data}
    return {}


def copy_out(files: list[Path], out: Path) -> None:
    for path in files:
        atomic_write(out / path.name, lambda tmp, path=path: shutil.copyfile(path, tmp))


@dataclass(frozen=True)
class Companions:
    """What an export writes next to config.json and the weights, and the ids and labels it puts in config.json."""

    written: dict[str, str] = field(default_factory=dict)
    """File name -> text of the files made here (zoo's tokenizer in Hugging Face's format)."""
    copied: list[Path] = field(default_factory=list)
    """Files copied as they are (what an import carried along)."""
    token_ids: dict[str, int | None] = field(default_factory=dict)
    labels: list[str] | None = None
    """The class names of a classifier, from the run that trained it."""
    note: str = ""
    """Which tokenizer was written, or why none was, in words."""


def companions(folder: ModelFolder, recipe: Any) -> Companions:
    """The tokenizer and generation files of an export of ``folder``, whose model has ``recipe``.

    A training checkpoint (or run) gives zoo's tokenizer and the run's labels; a model folder, the files its
    import carried along; a Hugging Face folder, its own. A model folder with neither gets zoo's byte-level
    tokenizer when its vocabulary is the 256 bytes (``vocab_size`` 256 and ``train.tokenizer: byte``), else
    no tokenizer, said in ``note``. An image model needs none.
    """
    from zoo.recipe import position_limit
    from zoo.train.checkpoint import read_info, read_tokenizer

    labels = None
    if folder.kind in ("checkpoint", "run"):
        recorded = read_info(folder.path).get("labels")
        labels = [str(x) for x in recorded] if isinstance(recorded, list) else None
        tokenizer = read_tokenizer(folder.path)
        if tokenizer is None:
            return Companions(labels=labels)
        where = f"of {folder.path}"
    elif folder.kind == "hf":
        found = present(folder.path, CARRIED_FILES)
        return Companions(copied=found, token_ids=carried_token_ids(found), note=_copied_note(found, "its own"))
    else:
        found = carried(folder.path)
        if found:
            return Companions(copied=found, token_ids=carried_token_ids(found), note=_copied_note(found, "imported"))
        if recipe.architecture == "vit":
            return Companions()
        if recipe.vocab_size != 256 or recipe.train.tokenizer != "byte":
            return Companions(
                note=f"{folder.given} holds no tokenizer (a model folder from zoo build --out or zoo.save has none), "
                "so the export has no tokenizer files: export the run folder of zoo train to include its tokenizer"
            )
        tokenizer = ByteTokenizer()
        where = (
            f"since {folder.given} holds no tokenizer but its vocabulary is the 256 bytes (vocab_size 256, "
            "train.tokenizer byte); export the run folder instead if the model was trained on other ids"
        )
    if isinstance(tokenizer, HFTokenizer):  # a fine-tune of an imported checkpoint: its own tokenizer, as it was
        eos = list(tokenizer.stop_ids) if len(tokenizer.stop_ids) > 1 else tokenizer.eos_id
        ids = {"bos_token_id": tokenizer.bos_id, "eos_token_id": eos, "pad_token_id": tokenizer.token_pad_id}
        note = f"{' + '.join(tokenizer.files())}: the checkpoint's own tokenizer, {where}"
        return Companions(written=tokenizer.files(), token_ids=ids, labels=labels, note=note)
    if importlib.util.find_spec("tokenizers") is None:
        return Companions(
            token_ids=token_ids(tokenizer),
            labels=labels,
            note="no tokenizer files written: writing zoo's tokenizer in Hugging Face's format needs the `tokenizers` "
            "package (pip install 'zoo[hf]', which transformers needs anyway); config.json and "
            "generation_config.json carry its token ids",
        )
    encoder = recipe.architecture == "encoder"
    written = tokenizer_files(
        tokenizer,
        classification=encoder and recipe.head.type == "classification",
        masked_lm=encoder and recipe.head.type == "mlm",
        max_len=position_limit(recipe),
    )
    kind = "byte-level" if isinstance(tokenizer, ByteTokenizer) else "BPE"
    return Companions(
        written=written,
        token_ids=token_ids(tokenizer),
        labels=labels,
        note=f"{' + '.join(written)}: zoo's {kind} tokenizer, {where}",
    )


def _copied_note(found: list[Path], whose: str) -> str:
    if not found:
        return "the Hugging Face folder has no tokenizer files: the export has none either"
    return f"carried along the {whose} checkpoint's files: {', '.join(p.name for p in found)}"
