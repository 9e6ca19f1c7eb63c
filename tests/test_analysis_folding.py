"""``zoo.analysis.folding``: the per-layer rows ``zoo summary`` prints, runs of identical blocks folded."""

from __future__ import annotations

from zoo.analysis import LayerRow, fold_layer_rows, layer_of
from zoo.analysis.folding import block_index

BLOCK = 7_087_872  # one GPT-2 small block
GPT2_ANALYTIC = {
    "embedding": 38_597_376,
    "positional": 786_432,
    **{f"blocks.{i}": BLOCK for i in range(12)},
    "final_norm": 1_536,
    "head": 0,
}
GPT2_COUNTED = {  # the built model's order differs: the formulas' order wins
    "positional": 786_432,
    **{f"blocks.{i}": BLOCK for i in range(12)},
    "final_norm": 1_536,
    "embedding": 38_597_376,
    "head": 0,
}


def test_gpt2_small_folds_its_twelve_blocks():
    rows = fold_layer_rows(GPT2_COUNTED, GPT2_ANALYTIC)
    assert rows == [
        LayerRow("embedding", "embedding", 1, 38_597_376, 38_597_376),
        LayerRow("positional", "positional", 1, 786_432, 786_432),
        LayerRow("blocks.0", "blocks.11", 12, BLOCK, BLOCK),
        LayerRow("final_norm", "final_norm", 1, 1_536, 1_536),
        LayerRow("head", "head", 1, 0, 0),
    ]
    assert [r.label for r in rows] == ["embedding", "positional", "blocks.0-11 ×12", "final_norm", "head"]
    assert rows[2].counted_total == rows[2].analytic_total == 12 * BLOCK
    assert sum(r.counted_total for r in rows) == 124_439_808
    assert all(r.agrees for r in rows)


def test_each_stack_folds_on_its_own():
    counts = {
        "embedding": 5,
        **{f"encoder.blocks.{i}": 3 for i in range(6)},
        **{f"decoder.blocks.{i}": 3 for i in range(6)},
    }
    labels = [r.label for r in fold_layer_rows(counts, counts)]
    assert labels == ["embedding", "encoder.blocks.0-5 ×6", "decoder.blocks.0-5 ×6"]


def test_a_block_that_differs_breaks_the_run():
    counted = {"blocks.0": 4, "blocks.1": 4, "blocks.2": 5, "blocks.3": 4}
    analytic = {**counted, "blocks.1": 9}  # blocks.1's formula disagrees: it stays a row of its own
    rows = fold_layer_rows(counted, analytic)
    assert [(r.label, r.counted, r.analytic, r.agrees) for r in rows] == [
        ("blocks.0", 4, 4, True),
        ("blocks.1", 4, 9, False),
        ("blocks.2", 5, 5, True),
        ("blocks.3", 4, 4, True),
    ]


def test_rows_only_counted_come_last_and_missing_figures_are_zero():
    rows = fold_layer_rows({"a": 1, "extra": 2}, {"a": 1, "b": 3})
    assert [(r.first, r.counted, r.analytic) for r in rows] == [("a", 1, 1), ("b", 0, 3), ("extra", 2, 0)]


def test_only_whole_consecutive_blocks_fold():
    counts = {"blocks.0": 1, "blocks.2": 1, "blocks.3.attention": 1, "blocks.4.attention": 1}
    assert [r.repeat for r in fold_layer_rows(counts, counts)] == [1, 1, 1, 1]


def test_layer_of_and_block_index():
    assert layer_of("decoder.blocks.3.attention.q") == "decoder.blocks.3"
    assert layer_of("embedding.token") == "embedding.token"
    assert block_index("decoder.blocks.3") == ("decoder.blocks", 3)
    assert block_index("blocks.11") == ("blocks", 11)
    assert block_index("blocks.3.attention") is None and block_index("final_norm") is None
