"""Attention rows a config states with keys of its own (``zoo/hf/table.py``): block-sparse attention chosen by a
key (BigBird's ``attention_type``), and one key for the query, key and value biases beside a biased output."""

from typing import Any

from zoo.errors import HFImportError

from .rows import BIAS_FIELDS
from .table import Computed, Refused, Row


def block_sparse(
    kind: str = "attention_type",
    block: str = "block_size",
    random: str = "num_random_blocks",
    *,
    full: str = "original_full",
    sparse: str = "block_sparse",
    family: str = "BigBird",
    sizes: tuple[int, int] = (64, 3),
) -> tuple[Row, ...]:
    """Full attention (``kind``: ``full``) or zoo's block-sparse attention (``sparse``) of ``block``-token blocks
    and ``random`` random blocks per query block (``attention.sparse_block_size``, ``random_blocks``); the random
    blocks are zoo's fixed choice (``attention.random_seed``), which no key says; ``sizes``: the two keys' defaults."""

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        if config[kind] != sparse:
            return {}
        size, count = config[block], config[random]
        if not isinstance(size, int) or size < 1 or not isinstance(count, int) or count < 0:
            raise HFImportError(f"{block}={size!r}, {random}={count!r}: need integers >= 1 and >= 0")
        return {"attention.sparse_block_size": size, "attention.random_blocks": count}

    def write(recipe: Any, weights: Any) -> dict[str, Any]:
        attention = recipe.attention
        if attention.sparse_block_size is None:
            return {kind: full, block: sizes[0], random: sizes[1]}
        return {kind: sparse, block: attention.sparse_block_size, random: attention.random_blocks}

    why = f"{family} attends fully ({full}) or block-sparse ({sparse})"
    return (
        Computed(
            "block sparse",
            keys={kind: sparse, block: sizes[0], random: sizes[1]},
            paths=("attention.sparse_block_size", "attention.random_blocks", "attention.random_seed"),
            read=read,
            write=write,
        ),
        Refused(kind, lambda v: v in (full, sparse), why),
    )


def qkv_biases(key: str, default: bool = True) -> Computed:
    """``key``: the query, key and value projections' biases alike; the output projection is always biased."""

    def check(recipe: Any) -> str | None:
        on = recipe.attention.biases()
        if not (on["q"] == on["k"] == on["v"]) or not on["o"]:
            return f"attention biases q/k/v/o are {'/'.join(str(on[p]) for p in 'qkvo')}, needs q/k/v alike and o"
        return None

    return Computed(
        "biases",
        keys={key: default},
        paths=BIAS_FIELDS,
        read=lambda config, recipe: {"attention.bias": bool(config[key]), "attention.o_bias": True},
        write=lambda recipe, weights: {key: recipe.attention.biases()["q"]},
        requires={"attention.biases": check},
    )
