"""The dual-encoder (CLIP): its two towers, the contrastive head and loss, its recipe's tower and errors, its costs
(summary, FLOPs at each tower's own length, plan) and training on captioned images."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import zoo
from zoo.analysis import analytic_parameters, compare_counts, flop_estimate, model_parts, parameter_breakdown
from zoo.analysis.steptrace import trace_step
from zoo.analysis.timeline import compose
from zoo.errors import RecipeError
from zoo.recipe import load_recipe


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return zoo.build("clip-tiny").eval()


def pairs(n: int = 4, length: int = 9):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(4, 200, (n, length), generator=g)
    ids[:, -1] = 255  # the end-of-text byte the head pools
    return ids, torch.randn(n, 1, 8, 8, generator=g)


def test_logits_are_scaled_cosine_similarities_of_the_two_towers(model):
    ids, images = pairs()
    with torch.no_grad():
        out = model(ids, images)
        text, image = model(input_ids=ids).logits, model(images=images).logits
    expected = F.normalize(image, dim=-1) @ F.normalize(text, dim=-1).T * model.head.logit_scale.exp()
    torch.testing.assert_close(out.logits, expected)
    torch.testing.assert_close(out.text_embeds, F.normalize(text, dim=-1))
    assert out.logits.shape == (4, 4) and text.shape == image.shape == (4, 16)


def test_the_text_vector_is_read_at_the_first_end_of_text_token_and_padding_after_it_is_invisible(model):
    ids, _ = pairs(length=6)
    padded = torch.cat([ids, torch.zeros(4, 3, dtype=torch.long)], dim=1)
    mask = torch.ones_like(padded, dtype=torch.bool)
    mask[:, 6:] = False
    with torch.no_grad():
        torch.testing.assert_close(model(input_ids=padded, attention_mask=mask).logits, model(input_ids=ids).logits)
        later = ids.clone()
        later[:, 3] = 255  # an earlier end-of-text: the vector is read there, and the text is causal
        torch.testing.assert_close(model(input_ids=later).logits, model(input_ids=later[:, :4]).logits)


def test_the_loss_is_symmetric_cross_entropy_and_same_class_pairs_all_match(model):
    ids, images = pairs()
    with torch.no_grad():
        out = model(ids, images, return_loss=True)
        target = torch.arange(4)
        expected = (F.cross_entropy(out.logits, target) + F.cross_entropy(out.logits.T, target)) / 2
        torch.testing.assert_close(out.loss, expected)
        torch.testing.assert_close(model(ids, images, labels=torch.arange(4)).loss, out.loss)  # all distinct
        order = torch.tensor([2, 0, 3, 1])  # the same pairs in another order
        torch.testing.assert_close(model(ids[order], images[order], return_loss=True).loss, out.loss)
        same = model(ids, images, labels=torch.tensor([0, 0, 1, 2])).loss
    soft = torch.tensor([[0.5, 0.5, 0, 0], [0.5, 0.5, 0, 0], [0, 0, 1.0, 0], [0, 0, 0, 1.0]])
    expected = (F.cross_entropy(out.logits, soft) + F.cross_entropy(out.logits.T, soft)) / 2
    torch.testing.assert_close(same, expected)
    with pytest.raises(ValueError, match=r"as many texts as images \(pairs\), got \(2, 4\)"):
        model.head.loss(out.logits[:2])
    with pytest.raises(ValueError, match="takes input_ids, images or both"):
        model()


def test_counts_are_exact_and_the_image_tower_costs_its_own_tokens(model):
    assert not compare_counts(parameter_breakdown(model), analytic_parameters(model))
    parts = model_parts(zoo.build("clip-vit-base-patch32", device="meta"))
    vision = [p for p in parts if p.path.startswith("vision.")]
    assert {p.tokens for p in vision} == {50} and all(p.tokens is None for p in parts if p not in vision)
    tower = load_recipe("clip-vit-base-patch32").vision  # the image tower alone, as the vit it is
    alone = flop_estimate(model_parts(zoo.build(tower, device="meta")), seq_len=50).forward_per_sequence
    assert flop_estimate(vision, seq_len=77).forward_per_sequence == alone
    short, long = (flop_estimate(parts, seq_len=n).forward_per_sequence for n in (16, 77))
    text = [p for p in parts if p not in vision and p.path != "head"]
    text_short, text_long = (flop_estimate(text, seq_len=n).forward_per_sequence for n in (16, 77))
    assert long - short == text_long - text_short


def test_plan_composes_one_block_of_each_tower_as_tracing_every_block():
    recipe = load_recipe("clip-tiny", num_layers=3, **{"vision.num_layers": 3})
    kwargs = dict(micro_batch=4, seq_len=16, precision="fp32")
    reduced, whole = trace_step(recipe, **kwargs), trace_step(recipe, whole=True, **kwargs)
    assert sorted(reduced.full_blocks) == ["text.", "vision."]
    for trace in (reduced, whole):
        trace.composed = trace.weights + trace.optimizer + int(compose(trace).total.max())
    assert whole.composed == whole.traced_peak == reduced.composed


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"architecture": "encoder", "head": {"type": "mlm"}}, "vision: an image tower belongs to a dual-encoder"),
        ({"vision": {"d_model": 0}}, "vision.d_model: "),
        ({"vision": {"architecture": "encoder"}}, "vision.embedding: embedding 'patch' cannot take the token ids"),
        ({"vision": {"embedding": {"type": "patch", "cls_token": False}}}, "reads the image tower's \\[CLS\\] token"),
        ({"head": {"type": "mlm"}}, "head: a dual-encoder joins its towers with a contrastive head, not mlm"),
        ({"head": {"text_pool": "eos", "eos_token_id": None}}, "set head.eos_token_id, or text_pool: last"),
        ({"head": {"vision_width": 7}}, "head.vision_width: must equal vision.d_model \\(24\\); leave it out"),
    ],
)
def test_bad_towers_and_heads_are_refused_by_path(overrides, message):
    with pytest.raises(RecipeError, match=message):
        load_recipe("clip-tiny", **overrides)


def test_a_contrastive_head_outside_a_dual_encoder_is_refused():
    with pytest.raises(RecipeError, match="head: a contrastive head joins the two towers of an architecture: dual-"):
        load_recipe("gpt-tiny", head={"type": "contrastive", "proj_dim": 8, "vision_width": 8, "eos_token_id": 1})


def test_the_objective_pairs_each_image_with_its_caption_and_every_weight_learns():
    from zoo.train.objectives import CAPTION, make_objective
    from zoo.train.tokenizer import ByteTokenizer

    torch.manual_seed(0)
    model = zoo.build("clip-tiny")
    objective = make_objective(model.recipe, model, ByteTokenizer(), None, 64)
    batch = objective.batch(torch.Generator().manual_seed(0), 16)
    assert batch["images"].shape == (16, 1, 8, 8)  # the embedded digits
    for ids, mask, label in zip(batch["input_ids"], batch["attention_mask"], batch["labels"], strict=True):
        caption = ids[mask].tolist()
        assert caption == [0xFE, *CAPTION.format(objective.labels[label]).encode(), 0xFF]  # [bos] caption [eos]
    loss = objective.loss(model, batch)
    out = model(**batch)
    torch.testing.assert_close(loss, model.head.loss(out.logits, batch["labels"]))
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    metrics = objective.metrics(model.eval(), batch)
    assert metrics["accuracy"][1] == 16 and 0 <= metrics["accuracy"][0] <= 16


def test_the_eos_token_the_head_pools_must_be_the_tokenizers():
    from zoo.errors import TrainError
    from zoo.train.objectives import make_objective
    from zoo.train.tokenizer import ByteTokenizer

    model = zoo.build("clip-tiny", **{"head.eos_token_id": 3}, device="meta")
    with pytest.raises(TrainError, match="ends a caption with 255: --set head.eos_token_id=255"):
        make_objective(model.recipe, model, ByteTokenizer(), None, 64)


def _images(folder, n: int, size: int, mode: str) -> None:
    from PIL import Image

    g = torch.Generator().manual_seed(2)
    channels = 1 if mode == "L" else 3
    folder.mkdir()
    for i in range(n):
        pixels = torch.randint(0, 256, (size, size, channels), generator=g, dtype=torch.uint8).squeeze(-1).numpy()
        Image.fromarray(pixels, mode=mode).save(folder / f"image-{i}.png")


def test_zero_shot_labels_a_folder_of_images_with_the_softmax_over_their_captions(tmp_path):
    pytest.importorskip("PIL")
    from zoo.predict import predict
    from zoo.train.objectives import CAPTION

    torch.manual_seed(0)
    model = zoo.build("clip-tiny")
    zoo.save(model, tmp_path / "model")
    _images(tmp_path / "images", 3, 8, "L")
    result = predict(tmp_path / "model", [tmp_path / "images"], labels=["cat", "dog", "cow"])
    assert result.task == "zero-shot-image-classification"
    assert [p.input for p in result.predictions] == [str(tmp_path / "images" / f"image-{i}.png") for i in range(3)]
    from PIL import Image

    pixels = torch.stack(
        [
            torch.tensor(list(Image.open(tmp_path / "images" / f"image-{i}.png").getdata())).view(1, 8, 8)
            for i in range(3)
        ]
    )
    captions = [[0xFE, *CAPTION.format(label).encode(), 0xFF] for label in ("cat", "dog", "cow")]
    with torch.no_grad():
        probs = model(torch.tensor(captions), pixels / 255.0).logits.softmax(-1)  # no statistics recorded: [0, 1]
    for row, prediction in zip(probs, result.predictions, strict=True):
        got = {c.label: c.probability for c in prediction.candidates}
        assert got == pytest.approx(dict(zip(("cat", "dog", "cow"), row.tolist(), strict=True)), abs=1e-6)


@pytest.mark.parametrize(
    ("labels", "template", "message"),
    [
        (None, None, "give the candidate labels, --labels cat,dog"),
        (["cat", "cat"], None, "--labels names a label twice: cat, cat"),
        (["cat"], "a {} and a {}", "must hold one {} where the label goes"),
    ],
)
def test_zero_shot_refuses_missing_labels_and_bad_templates(tmp_path, labels, template, message):
    pytest.importorskip("PIL")
    from zoo.errors import PredictError
    from zoo.predict import predict

    zoo.save(zoo.build("clip-tiny"), tmp_path / "model")
    _images(tmp_path / "images", 1, 8, "L")
    with pytest.raises(PredictError, match=message.replace("{", "\\{").replace("}", "\\}")):
        predict(tmp_path / "model", [tmp_path / "images"], labels=labels, template=template)


def test_labels_are_refused_for_a_model_that_has_its_own(tmp_path):
    from zoo.errors import PredictError
    from zoo.predict import predict

    zoo.save(zoo.build("bert-tiny"), tmp_path / "model")
    with pytest.raises(PredictError, match="--labels are for a dual-encoder"):
        predict(tmp_path / "model", ["a [MASK] day"], labels=["x"])


def test_zero_shot_on_an_imported_clip_equals_transformers(tmp_path):
    transformers = pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    pytest.importorskip("PIL")
    import json

    from zoo.predict import predict

    words = ["<pad>", "<|startoftext|>", "<|endoftext|>", "a", "photo", "of", "cat", "dog", "bird"]
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<pad>"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.post_processor = tokenizers.processors.TemplateProcessing(
        single="<|startoftext|> $A <|endoftext|>", special_tokens=[("<|startoftext|>", 1), ("<|endoftext|>", 2)]
    )
    config = transformers.CLIPConfig(
        text_config=dict(
            vocab_size=9,
            hidden_size=32,
            intermediate_size=37,
            num_hidden_layers=2,
            num_attention_heads=4,
            max_position_embeddings=16,
            eos_token_id=2,
            bos_token_id=1,
            pad_token_id=0,
        ),
        vision_config=dict(
            hidden_size=24,
            intermediate_size=30,
            num_hidden_layers=2,
            num_attention_heads=4,
            image_size=16,
            patch_size=4,
        ),
        projection_dim=12,
    )
    torch.manual_seed(0)
    hf = transformers.CLIPModel(config).eval()
    folder = tmp_path / "clip"
    hf.save_pretrained(folder)
    tok.save(str(folder / "tokenizer.json"))
    mean, std = [0.48, 0.46, 0.41], [0.27, 0.26, 0.28]
    (folder / "preprocessor_config.json").write_text(json.dumps({"image_mean": mean, "image_std": std}))
    _images(tmp_path / "images", 2, 16, "RGB")
    labels = ["cat", "dog", "bird"]
    result = predict(folder, [tmp_path / "images"], labels=labels)
    from PIL import Image

    pixels = (
        torch.stack(
            [
                torch.tensor(list(Image.open(tmp_path / "images" / f"image-{i}.png").getdata())).T.reshape(3, 16, 16)
                for i in range(2)
            ]
        )
        / 255.0
    )
    pixels = (pixels - torch.tensor(mean)[:, None, None]) / torch.tensor(std)[:, None, None]
    ids = torch.tensor([tok.encode(f"a photo of a {label}").ids for label in labels])
    with torch.no_grad():
        expected = hf(input_ids=ids, pixel_values=pixels).logits_per_image.softmax(-1)
    for row, prediction in zip(expected, result.predictions, strict=True):
        got = {c.label: c.probability for c in prediction.candidates}
        assert got == pytest.approx(dict(zip(labels, row.tolist(), strict=True)), abs=1e-5)
