"""``zoo draw``: the block diagram of every named recipe holds its facts, as text, with nothing colliding."""

from __future__ import annotations

import itertools
import struct
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from clean_errors import assert_clean_error, cli

from zoo.draw import RC, Canvas, draw, layout
from zoo.errors import ArgumentError, ZooError
from zoo.recipe import load_recipe, named_recipes

matplotlib = pytest.importorskip("matplotlib")  # the zoo[plot] extra

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
NAMED = sorted(named_recipes())
LAYOUTS = {
    "sandwich": ("gpt-tiny", {"block.norm_position": "sandwich"}),
    "output": ("gpt-tiny", {"block.norm_position": "output"}),
    "parallel": ("gpt-tiny", {"block.parallel": True}),
    "parallel-shared-encoder-decoder": ("t5-tiny", {"block.parallel": True, "block.shared_norm": True}),
    "post-encoder-decoder": ("t5-tiny", {"block.norm_position": "post", "positional": {"type": "sinusoidal"}}),
}


def variant(name: str):
    """A recipe of ``LAYOUTS``: a named recipe with its fields replaced (not merged: no options carried over)."""
    base, fields = LAYOUTS[name]
    data = load_recipe(base).to_dict()
    for key, value in fields.items():
        *parents, last = key.split(".")
        node = data
        for parent in parents:
            node = node.setdefault(parent, {})
        node[last] = value
    return load_recipe(data)


def svg_texts(path: Path) -> list[str]:
    """Every text element of an SVG, in order (matplotlib writes text as text with svg.fonttype none)."""
    return [t.text or "" for t in ET.parse(path).getroot().iter("{http://www.w3.org/2000/svg}text")]


def drawn(tmp_path: Path, recipe) -> list[str]:
    return svg_texts(draw(recipe, tmp_path / "model.svg"))


@pytest.mark.parametrize("name", NAMED)
def test_every_named_recipe_draws_its_blocks_as_text(tmp_path, name):
    recipe = load_recipe(name)
    texts = drawn(tmp_path, name)
    assert texts[-1] == name  # the title, drawn last
    assert any(t.endswith(f"· {recipe.attention.type}") for t in texts), texts  # the attention, by its name
    second = recipe.vision.num_layers if recipe.vision else recipe.num_decoder_layers or recipe.num_layers
    stacks = 2 if recipe.architecture in ("encoder-decoder", "dual-encoder") else 1
    counts = [t for t in texts if t.startswith("× ")]
    if not recipe.layers:  # one kind of block per stack: its repeat is the stack's depth
        expected = [recipe.num_layers] + ([second] if stacks == 2 else [])
        stages = getattr(recipe.attention, "depths", None)  # a hierarchical model's stages (zoo-swin)
        expected = list(stages) if stages else expected
        assert sorted(counts) == sorted(f"× {n}" for n in expected)
    assert sum(t.startswith("Feed-forward") or t.startswith("Mixture of experts") for t in texts) >= stacks


def test_gpt2_small_shows_widths_heads_positions_and_the_tied_head(tmp_path):
    texts = drawn(tmp_path, "gpt2-small")
    for fact in (
        "× 12",
        "Causal self-attention · mha",
        "12 heads, head_dim 64",
        "Feed-forward · mlp",
        "768 → 3072 → 768, gelu_tanh",
        "Token embedding",
        "50257 × 768",
        "learned positions",
        "1024 × 768",
        "pre-norm",
        "LayerNorm (final)",
        "LM head · lm",
        "linear 768 → 50257",
        "tied to the token embedding",
        "next-token logits",
        "decoder · d_model 768 · 124.4M parameters",
    ):
        assert fact in texts, (fact, texts)
    assert texts.count("LayerNorm") == 2  # one before each sub-layer


def test_mixtral_shows_experts_top_k_gqa_and_rope(tmp_path):
    texts = drawn(tmp_path, "mixtral-8x7b")
    for fact in (
        "× 32",
        "Mixture of experts · moe",
        "router: top-2 of 8 experts",
        "expert: swiglu 4096 → 14336 → 4096",
        "Causal self-attention · gqa",
        "32 heads, 8 KV heads, head_dim 128",
        "RoPE θ=1000000",
        "untied",
    ):
        assert fact in texts, (fact, texts)
    assert "learned positions" not in texts  # rotary positions act in the attention, not added to the input


def test_t5_small_shows_both_stacks_and_the_cross_attention(tmp_path):
    texts = drawn(tmp_path, "t5-small")
    for fact in (
        "encoder blocks",
        "decoder blocks",
        "Self-attention · mha",
        "Causal self-attention · mha",
        "Cross-attention · mha",
        "keys, values: encoder output",
        "encoder output",
        "T5 relative bias: 32 buckets, max distance 128",
        "source token ids",
        "target token ids (shifted right)",
        "input scaled by 1/√d_model",
    ):
        assert fact in texts, (fact, texts)
    assert texts.count("× 6") == 2
    assert texts.count("Cross-attention · mha") == 1  # in the decoder only
    assert texts.count("shared by encoder and decoder") == 2


def test_vit_b16_shows_the_patches_and_the_classifier(tmp_path):
    texts = drawn(tmp_path, "vit-b16")
    for fact in (
        "image 3 × 224 × 224",
        "Patch embedding",
        "16 × 16 patches → 768",
        "196 patches + [CLS]",
        "197 × 768",
        "Self-attention · mha",
        "Classification head",
        "linear 768 → 1000",
        "1000 class logits",
    ):
        assert fact in texts, (fact, texts)


def test_bert_base_is_post_norm_with_an_embedding_norm_and_segments(tmp_path):
    texts = drawn(tmp_path, "bert-base")
    for fact in ("post-norm", "LayerNorm (embeddings)", "+ segment embedding 2 × 768", "Pooler · pooler"):
        assert fact in texts, (fact, texts)
    assert "LayerNorm (final)" not in texts


def test_layers_that_differ_are_drawn_as_kinds_with_their_order(tmp_path):
    data = load_recipe("moe-tiny").to_dict()
    data["layers"][0]["select"] = "1:3"  # A, B, B, A: no unit repeats
    texts = drawn(tmp_path, data)
    for fact in (
        "decoder block A",
        "layers 0, 3",
        "decoder block B",
        "layers 1–2",
        "block order, first to last: A, B × 2, A",
        "Feed-forward · swiglu",
        "Mixture of experts · moe",
        "router: top-2 of 4 experts",
    ):
        assert fact in texts, (fact, texts)
    assert texts.count("× 2") == 2


def test_alternating_kinds_are_drawn_as_their_repeating_unit(tmp_path):
    texts = drawn(tmp_path, "moe-tiny")  # dense and MoE blocks alternating: A, B, A, B
    for fact in (
        "× 2 [A, B]",  # beside the frame of the unit
        "decoder block A, 2 in all",
        "layers 0, 2",
        "decoder block B, 2 in all",
        "layers 1, 3",
        "block order, first to last: × 2 [A, B]",
    ):
        assert fact in texts, (fact, texts)
    assert texts.count("× 1") == 2  # each kind once in a unit
    gemma = drawn(tmp_path, "gemma-3-1b")  # five local layers to one global, four times, then two local
    assert {
        "× 4 [A × 5, B], then A × 2",
        "× 5",
        "decoder block A, 22 in all",
        "× 1",
        "decoder block B, 4 in all",
    } <= set(gemma)


def test_plugin_components_show_their_name_options_and_plugin(tmp_path):
    retnet = drawn(tmp_path, "retnet-tiny")
    assert {"Multi-scale retention · retention", "4 heads, q/k 16, values 32", "plugin: zoo-retnet"} <= set(retnet)
    assert "decays 0.9688 to 0.9961" in retnet  # 1 - 2^(-5-h) for its 4 heads
    mistral = drawn(tmp_path, "mistral-tiny")
    assert "Causal self-attention · sliding_window" in mistral
    assert any("window=16" in t for t in mistral) and "plugin: zoo-sliding-window" in mistral


def test_a_head_names_what_comes_out_of_it_in_its_label(tmp_path, monkeypatch):
    from zoo.components.heads import LMHeadConfig
    from zoo.label import Label

    def label(self, kind, ctx, module, *, note=None):
        return Label("head", "My head", ["one line"], output="my words")

    monkeypatch.setattr(LMHeadConfig, "label", label)
    texts = drawn(tmp_path, "gpt-tiny")
    assert texts.index("My head") < texts.index("one line") < texts.index("my words")
    assert "next-token logits" not in texts
    data = load_recipe("bert-tiny").to_dict()
    data.update(head={"type": "token_classification"}, num_classes=5)
    texts = drawn(tmp_path, load_recipe(data))  # the default label: a box, and no words under it
    assert "Head · token_classification" in texts and not any("logits" in t for t in texts)


def test_blocks_it_does_not_recognise_are_drawn_as_their_components_in_order(tmp_path, monkeypatch):
    from zoo import draw as module

    real = module.describe

    class Renamed:  # a plugin architecture that keeps its blocks under another name
        def __init__(self, model):
            self.model = model
            self.zoo_components = {p.replace("blocks.", "layers."): m for p, m in model.zoo_components.items()}

        def get_submodule(self, path):
            return self.model.get_submodule(path.replace("layers.", "blocks."))

        def parameters(self):
            return self.model.parameters()

    monkeypatch.setattr(module, "describe", lambda model: real(Renamed(model)))
    texts = drawn(tmp_path, "gpt-tiny")
    assert "the blocks of this architecture were not recognised: its components are shown in module order" in texts
    assert texts.count("Causal self-attention · mha") == 2 and texts.count("Feed-forward · mlp") == 2
    assert "components in order" in texts and not any(t.startswith("× ") for t in texts)  # no repeat claimed


@pytest.mark.parametrize("layout_name", sorted(LAYOUTS))
def test_block_layouts_are_named_and_drawn(tmp_path, layout_name):
    texts = drawn(tmp_path, variant(layout_name))
    words = {"sandwich": "sandwich norm", "output": "norm on each output", "post-encoder-decoder": "post-norm"}.get(
        layout_name, "parallel attention + FFN"
    )
    assert words in texts
    if layout_name in ("sandwich", "output"):
        assert texts.count("LayerNorm (output)") == 2  # on the attention's and the FFN's outputs
    if layout_name == "post-encoder-decoder":
        assert texts.count("sinusoidal positions") == 2 and "RMSNorm (final)" not in texts


def _collisions(canvas: Canvas) -> list[tuple[str, str, str]]:
    """Text over text, boxes over boxes, text across a box edge, lines through boxes or text."""
    e = 0.01  # inches: touching is fine, crossing is not

    def overlap(a, b) -> bool:
        return a[0] < b[2] - e and b[0] < a[2] - e and a[1] < b[3] - e and b[1] < a[3] - e

    def crosses(segment, r) -> bool:
        xa, ya, xb, yb = segment
        return max(xa, xb) > r[0] + e and min(xa, xb) < r[2] - e and max(ya, yb) > r[1] + e and min(ya, yb) < r[3] - e

    texts = [(r, s) for kind, r, s in canvas.shapes if kind == "text"]
    boxes = [(r, s) for kind, r, s in canvas.shapes if kind == "box"]
    segments = [r for kind, r, _ in canvas.shapes if kind == "segment"]
    found = [("text/text", s, u) for (a, s), (b, u) in itertools.combinations(texts, 2) if overlap(a, b)]
    found += [("box/box", s, u) for (a, s), (b, u) in itertools.combinations(boxes, 2) if overlap(a, b)]
    found += [
        ("text/box edge", s, u)
        for (a, s), (b, u) in itertools.product(texts, boxes)
        if overlap(a, b) and not (b[0] <= a[0] and a[2] <= b[2] and b[1] <= a[1] and a[3] <= b[3])
    ]
    found += [("line/" + what, str(seg), s) for seg in segments for what, shapes in (("box", boxes), ("text", texts))
              for r, s in shapes if crosses(seg, r)]  # fmt: skip
    return found


@pytest.mark.parametrize("name", NAMED + sorted(LAYOUTS))
def test_nothing_collides(name):
    with matplotlib.rc_context(RC):
        canvas = layout(variant(name) if name in LAYOUTS else name)
    assert _collisions(canvas) == []
    assert sum(kind == "box" for kind, _, _ in canvas.shapes) >= 5


def test_the_collision_check_sees_collisions():
    with matplotlib.rc_context(RC):
        canvas = layout("gpt-tiny")
    (x0, y0, x1, y1), title = next((r, s) for kind, r, s in canvas.shapes if kind == "box")
    canvas.line([(x0 - 1, (y0 + y1) / 2), (x1 + 1, (y0 + y1) / 2)])
    canvas.text((x0 + x1) / 2, y1, "over the edge", 9)
    found = _collisions(canvas)
    assert any(kind == "line/box" and box == title for kind, _, box in found)
    assert any(kind == "text/box edge" and text == "over the edge" for kind, text, _ in found)


def test_png_is_a_png_scaled_by_dpi(tmp_path):
    sizes = []
    for dpi in (150, 75):
        out = draw("gpt2-small", tmp_path / f"gpt2-{dpi}.png", dpi=dpi)
        data = out.read_bytes()
        assert data[:8] == PNG_MAGIC
        sizes.append(struct.unpack(">II", data[16:24]))  # the IHDR chunk: width, height
    (w, h), (w2, h2) = sizes
    assert 500 <= w <= 2500 and 800 <= h <= 3000 and h > w  # a tall column, readable at 150 dpi
    assert abs(w2 - w / 2) <= 1 and abs(h2 - h / 2) <= 1


def test_svg_is_the_same_file_every_time_and_replaced_whole(tmp_path):
    out = tmp_path / "t5.svg"
    first = draw("t5-tiny", out).read_bytes()
    assert draw(load_recipe("t5-tiny"), out).read_bytes() == first  # no date, fixed ids; a Recipe draws the same
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t5.svg"]  # no temporary file left
    assert b"DejaVuSans-" not in first and len(first) < 100_000  # text as text: no glyph outlines embedded


@pytest.mark.parametrize(
    ("name", "what"), [("model.jpg", "a '.jpg' file"), ("model", "a file without a suffix"), ("m.pdf", "a '.pdf' file")]
)
def test_other_suffixes_are_refused_before_anything_is_built(tmp_path, name, what):
    out = tmp_path / name
    with pytest.raises(ArgumentError) as caught:
        draw("no-such-recipe", out)  # the suffix is checked first: the recipe is never looked up
    assert str(caught.value) == f"{out}: cannot draw to {what}; the accepted suffixes are .svg and .png"
    assert not out.exists()


def test_uppercase_suffix_and_bad_dpi(tmp_path):
    assert draw("gpt-tiny", tmp_path / "M.PNG").read_bytes()[:8] == PNG_MAGIC
    with pytest.raises(ArgumentError, match="dpi must be an integer from 10 to 1200, not 0"):
        draw("gpt-tiny", tmp_path / "m.png", dpi=0)


def test_missing_matplotlib_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ZooError, match=r"zoo draw needs matplotlib: pip install 'zoo\[plot\]'"):
        draw("gpt-tiny", tmp_path / "m.svg")
    assert not (tmp_path / "m.svg").exists()


def test_cli_draws_with_overrides(tmp_path):
    out = tmp_path / "pics" / "gpt.svg"
    result = cli("draw", "gpt-tiny", "-o", str(out), "--set", "num_layers=3", "--set", "ffn.hidden=96")
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"wrote {out}"
    texts = svg_texts(out)
    assert "× 3" in texts and "64 → 96 → 64, gelu_tanh" in texts
    result = cli("draw", "vit-tiny", "--out", str(tmp_path / "vit.png"), "--dpi", "60")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "vit.png").read_bytes()[:8] == PNG_MAGIC


def test_cli_errors_are_clean(tmp_path):
    out = tmp_path / "m.svg"
    assert_clean_error(cli("draw", "no-such-recipe", "-o", str(out)), "no recipe file or named recipe 'no-such-recipe'")
    assert_clean_error(
        cli("draw", "gpt-tiny", "-o", str(tmp_path / "m.gif")), "the accepted suffixes are .svg and .png"
    )
    assert_clean_error(cli("draw", "gpt-tiny", "-o", str(out), "--set", "num_layers=0"), "num_layers")
    assert not out.exists()
    result = cli("draw", "gpt-tiny")
    assert result.exit_code == 2 and "--out" in result.output  # the picture's path is required


def test_clip_shows_both_towers_and_the_text_vectors_joining_the_head(tmp_path):
    texts = drawn(tmp_path, "clip-vit-base-patch32")
    for fact in (
        "text blocks",
        "vision blocks",
        "Causal self-attention · mha",
        "Self-attention · mha",
        "token ids",
        "image 3 × 224 × 224",
        "49408 × 512",
        "49 patches + [CLS]",
        "LayerNorm (embeddings)",
        "Contrastive head",
        "text vectors",
        "image-text logits",
    ):
        assert fact in texts, (fact, texts)
    assert texts.count("× 12") == 2 and "encoder output" not in texts and "source token ids" not in texts


def test_swin_tiny_draws_its_stages_in_sequence_joined_by_patch_merging(tmp_path):
    pytest.importorskip("zoo_swin")
    texts = drawn(tmp_path, "swin-tiny")
    assert texts.count("Patch embedding · swin_patch") == 1 and texts.count("image 3 × 224 × 224") == 1
    assert texts.count("Patch merging · swin_merge") == 3  # between the four stages
    assert sorted(t for t in texts if t.startswith("× ")) == ["× 2", "× 2", "× 2", "× 6"]
    assert texts.count("LayerNorm (final)") == 1 and "text vectors" not in texts
    assert not [t for t in texts if t.startswith("also built") or "shared by" in t]
