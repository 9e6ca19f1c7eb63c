"""SigLIP (``siglip`` head on a dual-encoder): the sigmoid loss and its logit bias, the text read at the final
position (padding included, as Hugging Face reads it), the image pooled by attention as ``nn.MultiheadAttention``
does, the recipe checks, and what the ``siglip`` family refuses by name. (Parity with transformers on every case
of tests/hf_cases/siglip.py: tests/test_hf.py.)"""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F
from hf_cases import siglip as cases

import zoo
from zoo.components.heads.siglip import SiglipHead
from zoo.errors import HFImportError, RecipeError
from zoo.hf import from_hf, hf_recipe
from zoo.recipe import load_recipe

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return zoo.build("siglip-tiny").eval()


def pairs(n: int = 4, length: int = 9):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(4, 200, (n, length), generator=g)
    return ids, torch.randn(n, 1, 8, 8, generator=g)


def test_logits_are_biased_scaled_cosine_similarities(model):
    ids, images = pairs()
    with torch.no_grad():
        model.head.logit_bias.fill_(-3.5)
        out = model(ids, images)
        text, image = model(input_ids=ids).logits, model(images=images).logits
    cosine = F.normalize(image, dim=-1) @ F.normalize(text, dim=-1).T
    torch.testing.assert_close(out.logits, cosine * model.head.logit_scale.exp() - 3.5)
    assert out.logits.shape == (4, 4) and text.shape == image.shape == (4, 24)


def test_the_sigmoid_loss_sums_each_images_pairs_and_averages_the_images():
    logits = torch.tensor([[2.0, -1.0, 0.5], [-3.0, 1.5, 0.0], [0.25, -2.0, 4.0]])
    signs = 2 * torch.eye(3) - 1  # +1 on the diagonal, -1 elsewhere
    expected = -sum(math.log(torch.sigmoid(signs[i, j] * logits[i, j])) for i in range(3) for j in range(3)) / 3
    assert SiglipHead.loss(logits) == pytest.approx(expected, rel=1e-6)
    same = torch.tensor([[1.0, 1, -1], [1, 1, -1], [-1, -1, 1]])  # pairs 0 and 1 of one class: all four match
    expected = -sum(math.log(torch.sigmoid(same[i, j] * logits[i, j])) for i in range(3) for j in range(3)) / 3
    assert SiglipHead.loss(logits, torch.tensor([7, 7, 2])) == pytest.approx(expected, rel=1e-6)
    with pytest.raises(ValueError, match=r"the sigmoid loss needs as many texts as images \(pairs\), got \(2, 3\)"):
        SiglipHead.loss(logits[:2])


def test_the_loss_and_its_logit_bias_equal_transformers(tmp_path):
    case = cases.CASES["siglip-projection-size"]
    torch.manual_seed(0)
    hf = transformers.SiglipModel(transformers.SiglipConfig(**case["config"])).eval()
    with torch.no_grad():
        hf.logit_bias.fill_(-2.0)
        hf.logit_scale.fill_(1.2)
    hf.save_pretrained(tmp_path)
    ours = from_hf(tmp_path).eval()
    ids = torch.randint(2, 98, (3, 11), generator=torch.Generator().manual_seed(3))
    images = torch.randn(3, 3, 16, 16, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        expected = hf(input_ids=ids, pixel_values=images, return_loss=True)
        actual = ours(ids, images, return_loss=True)
    assert ours.head.logit_bias.item() == -2.0
    torch.testing.assert_close(actual.logits, expected.logits_per_image, atol=1e-5, rtol=0)
    torch.testing.assert_close(actual.loss, expected.loss, atol=1e-5, rtol=0)


def test_the_final_position_is_read_even_when_it_is_padding_and_last_reads_the_last_real_token(model):
    ids, _ = pairs(length=6)
    padded = torch.cat([ids, torch.zeros(4, 3, dtype=torch.long)], dim=1)
    mask = torch.ones_like(padded, dtype=torch.bool)
    mask[:, 6:] = False
    with torch.no_grad():
        alone = model(input_ids=ids).logits
        final = model(input_ids=padded, attention_mask=mask).logits
        h = model.text.run(
            model.text.embedding(padded),
            positions=torch.arange(9),
            mask=zoo.architectures.build_mask(9, mask, causal=False, device=None),
        )
        model.head.text_pool = "last"
        last = model(input_ids=padded, attention_mask=mask).logits
        model.head.text_pool = "final"
    torch.testing.assert_close(final, model.head.text_head(h[:, -1]))  # a pad token that attended to the text
    assert not torch.allclose(final, alone, atol=1e-3)
    torch.testing.assert_close(last, alone, atol=1e-5, rtol=0)


def test_the_image_vector_is_attention_pooling_as_torch_multihead_attention(model):
    pool = model.head.image_pool
    reference = torch.nn.MultiheadAttention(24, 4, batch_first=True)
    reference.load_state_dict(
        {
            "in_proj_weight": pool.in_proj_weight,
            "in_proj_bias": pool.in_proj_bias,
            "out_proj.weight": pool.out_proj.weight,
            "out_proj.bias": pool.out_proj.bias,
        }
    )
    h = torch.randn(3, 16, 24, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        x = reference(pool.probe.expand(3, 1, 24), h, h)[0]
        expected = (x + pool.down_proj(pool.act(pool.up_proj(pool.layernorm(x)))))[:, 0]
        torch.testing.assert_close(pool(h), expected, atol=1e-6, rtol=0)


def test_the_head_takes_its_pooling_from_the_image_tower():
    head = load_recipe("siglip-base-patch16-224").head
    assert (head.vision_width, head.pool_heads, head.pool_hidden, head.pool_activation) == (768, 12, 3072, "gelu_tanh")
    assert head.pool_eps == 1e-6


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"head": {"type": "siglip", "pool_heads": 3}},
            "head.pool_heads: must equal vision.attention.num_heads \\(4\\)",
        ),
        ({"head": {"type": "siglip", "pool_eps": 1e-5}}, "head.pool_eps: must equal vision.norm.eps \\(1e-06\\)"),
        ({"head": {"pool_activation": "gelu"}}, "head.pool_activation: must equal vision.ffn.activation .'gelu_tanh'."),
        ({"head": {"type": "lm"}}, "heads that join towers: contrastive \\(CLIP\\), siglip"),
    ],
)
def test_a_head_that_differs_from_its_image_tower_is_refused_by_path(overrides, message):
    with pytest.raises(RecipeError, match=message):
        load_recipe("siglip-tiny", **overrides)


def test_a_siglip_head_outside_a_dual_encoder_is_refused():
    with pytest.raises(RecipeError, match="head: a siglip head joins the two towers of an architecture: dual-encoder"):
        load_recipe("gpt-tiny", head={"type": "siglip", "vision_width": 8, "pool_heads": 2})


def test_a_siglip_image_tower_needs_no_cls_token():
    recipe = load_recipe("siglip-tiny")
    assert recipe.vision.embedding.cls_token is False and recipe.vision.max_len == 16


def config(**changes) -> dict:
    base = json.loads(json.dumps(cases.CASES["siglip-projection-size"]["config"]))
    for key, value in changes.items():
        part, name = key.split(".")
        base[part][name] = value
    return {"model_type": "siglip", "architectures": ["SiglipModel"], **base}


@pytest.mark.parametrize(
    ("written", "refused"),
    [
        (config(**{"vision_config.vision_use_head": False}), "vision_use_head=False is not supported: SiglipModel"),
        (config(**{"text_config.projection_size": 32}), "projection_size=32 is not the image width 24"),
        ({**config(), "architectures": ["SiglipForImageClassification"]}, "SiglipForImageClassification"),
        ({**config(), "architectures": ["SiglipTextModel"]}, "zoo imports siglip checkpoints of SiglipModel"),
        ({**config(), "model_type": "siglip2"}, "model_type 'siglip2' is not supported"),
        (config(**{"vision_config.hidden_act": "silu_fast"}), "hidden_act='silu_fast'"),
    ],
)
def test_what_zoo_cannot_reproduce_is_refused_by_name(written, refused, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(written))
    with pytest.raises(HFImportError, match=refused):
        hf_recipe(tmp_path)


def test_zero_shot_prediction_ranks_a_siglip_models_captions(tmp_path):
    image = pytest.importorskip("PIL.Image")
    from zoo.predict import predict

    torch.manual_seed(0)
    zoo.save(zoo.build("siglip-tiny"), tmp_path / "model")
    (tmp_path / "images").mkdir()
    for i in range(2):
        pixels = torch.randint(0, 256, (8, 8), generator=torch.Generator().manual_seed(i), dtype=torch.uint8)
        image.fromarray(pixels.numpy(), mode="L").save(tmp_path / "images" / f"image-{i}.png")
    labels = ["cat", "dog", "horse"]  # captions of two lengths: each padded to max_len, as SigLIP's processor pads
    result = predict(tmp_path / "model", [tmp_path / "images"], labels=labels)
    assert result.task == "zero-shot-image-classification" and len(result.predictions) == 2
    assert "each label's probability is its caption's own sigmoid (SigLIP): they need not sum to 1" in result.notes
    model = zoo.load(tmp_path / "model").eval()
    captions = torch.zeros(3, 64, dtype=torch.long)  # pad 0 up to max_len 64
    for row, label in enumerate(labels):
        ids = [0xFE, *f"a photo of a {label}".encode(), 0xFF]
        captions[row, : len(ids)] = torch.tensor(ids)
    mask = captions != 0
    images = torch.stack(
        [torch.tensor(list(image.open(tmp_path / "images" / f"image-{i}.png").getdata())) for i in range(2)]
    )
    with torch.no_grad():
        probs = model(captions, images.view(2, 1, 8, 8) / 255.0, attention_mask=mask).logits.sigmoid()
    for row, prediction in zip(probs, result.predictions, strict=True):
        got = {c.label: c.probability for c in prediction.candidates}
        assert got == pytest.approx(dict(zip(labels, row.tolist(), strict=True)), abs=1e-6)
