"""Whisper: the audio front end (an embedding of an encoder's own), log-mel features from a wav file equal to
transformers' feature extractor, ``zoo generate --audio`` giving transformers' greedy tokens, the recipe's errors
and the costs of the audio encoder (summary counts, FLOPs)."""

from __future__ import annotations

import math
import wave

import pytest
import torch
from typer.testing import CliRunner

import zoo
from zoo.analysis import analytic_parameters, compare_counts, flop_estimate, model_parts, parameter_breakdown
from zoo.cli import app
from zoo.errors import RecipeError, TrainError
from zoo.generate import generate
from zoo.generate.audio import AudioError, log_mel, mel_filters, read_wav, wav_features
from zoo.recipe import load_recipe

TINY = {
    "name": "whisper-test",
    "architecture": "encoder-decoder",
    "vocab_size": 50,
    "pad_token_id": 49,
    "decoder_start_token_id": 48,
    "d_model": 32,
    "num_layers": 2,
    "num_decoder_layers": 2,
    "max_len": 24,
    "norm_position": "pre",
    "embed_norm": False,
    "final_norm": True,
    "embedding": {"type": "token", "padding_idx": 49},
    "encoder_embedding": {"type": "audio", "num_mel_bins": 8, "frames": 10},
    "positional": "learned",
    "attention": {"type": "mha", "num_heads": 4, "k_bias": False},
    "norm": {"type": "layernorm", "eps": 1e-5},
    "ffn": {"type": "mlp", "hidden": 64, "activation": "gelu"},
    "head": {"type": "lm", "tie_embeddings": True},
}


def write_wav(path, samples: torch.Tensor, rate: int = 16_000, channels: int = 1, width: int = 2) -> None:
    """``samples`` in [-1, 1] as PCM (each sample repeated over the channels)."""
    scale = 2 ** (8 * width - 1) - 1
    ints = (samples.clamp(-1, 1) * scale).round().to(torch.int16 if width == 2 else torch.int32)
    data = ints.repeat_interleave(channels).numpy().tobytes()
    with wave.open(str(path), "wb") as f:
        f.setnchannels(channels)
        f.setsampwidth(width)
        f.setframerate(rate)
        f.writeframes(data)


def whisper_reference(transformers) -> torch.nn.Module:
    """A tiny transformers Whisper (80 mels, 1500 frames) with every trained weight moved well off its init, so that
    greedy tokens vary; no suppressed tokens, start 94, eos 95."""
    config = transformers.WhisperConfig(
        vocab_size=96,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_target_positions=40,
        pad_token_id=95,
        bos_token_id=95,
        eos_token_id=95,
        decoder_start_token_id=94,
        begin_suppress_tokens=None,
        suppress_tokens=None,
    )
    torch.manual_seed(0)
    hf = transformers.WhisperForConditionalGeneration(config).eval()
    with torch.no_grad():
        for p in hf.parameters():
            if p.requires_grad:
                p.add_(0.5 * torch.randn_like(p))
    return hf


def speech(seconds: float = 1.5, seed: int = 0) -> torch.Tensor:
    """A chirp with noise: a spectrum that changes over time, as speech's does."""
    t = torch.arange(int(16_000 * seconds), dtype=torch.float64) / 16_000
    g = torch.Generator().manual_seed(seed)
    return (0.3 * torch.sin(2 * math.pi * (200 + 800 * t) * t) + 0.05 * torch.randn(t.shape, generator=g)).float()


def test_the_encoder_hears_its_own_input_and_adds_its_positions():
    torch.manual_seed(0)
    model = zoo.build(TINY).eval()
    assert model.encodes_features and type(model.encoder.positional).__name__ == "NoPositionalEncoding"
    features = torch.randn(2, 8, 20)
    with torch.no_grad():
        out = model(features, torch.tensor([[48, 5, 6], [48, 7, 8]]))
        front = model.encoder.embedding
        x = torch.nn.functional.gelu(front.conv2(torch.nn.functional.gelu(front.conv1(features)))).transpose(1, 2)
    assert out.encoder_hidden.shape == (2, 10, 32) and out.logits.shape == (2, 3, 50)
    torch.testing.assert_close(front(features), x + front.position)
    assert not front.position.requires_grad  # frozen sinusoids: counted and saved, never trained
    assert front.position[3, 0].item() == pytest.approx(math.sin(3.0))  # row t: sin(t w_0) with w_0 = 1
    assert front.position[3, 16].item() == pytest.approx(math.cos(3.0))
    with pytest.raises(ValueError, match=r"beyond the 10 of the audio embedding: give at most 20 frames"):
        model.encode(torch.randn(1, 8, 22))
    with pytest.raises(ValueError, match="take no attention_mask"):
        model.encode(features, torch.ones(2, 20))


def test_counts_and_flops_are_exact():
    torch.manual_seed(0)
    model = zoo.build(TINY)
    assert not compare_counts(parameter_breakdown(model), analytic_parameters(model))
    tiny = zoo.build("whisper-tiny", device="meta")
    assert zoo.count_parameters(tiny) == 37_760_640
    front = [p for p in model_parts(tiny) if p.path == "encoder.embedding"]
    assert len(front) == 1
    E, M = 384, 80
    assert front[0].cost.params == 3 * M * E + E + 3 * E * E + E + 1500 * E
    per_frame = flop_estimate(front, seq_len=1500).forward_per_sequence / 1500
    assert per_frame == 2 * (2 * 3 * M * E + 3 * E * E)  # conv1 at two input frames, conv2 once


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"architecture": "decoder"}, "encoder_embedding: an encoder's own input embedding belongs to an encoder-de"),
        ({"embedding": {"type": "audio"}}, "embedding: embedding 'audio' embeds an encoder's own input: give it as "),
        ({"encoder_embedding": {"type": "audio", "frames": 0}}, "encoder_embedding.frames: "),
        ({"d_model": 27, "attention": {"type": "mha", "num_heads": 3}}, "need an even d_model of at least 4, got 27"),
        ({"encoder_embedding": {"type": "audio", "mels": 8}}, "encoder_embedding.mels: unknown key"),
    ],
)
def test_bad_front_ends_are_refused_by_path(overrides, message):
    bad = {**TINY, **overrides}
    if bad["architecture"] == "decoder":
        bad.pop("num_decoder_layers")
        bad.pop("decoder_start_token_id")
    with pytest.raises(RecipeError, match=message):
        load_recipe(bad)


def test_log_mel_features_equal_transformers(tmp_path):
    transformers = pytest.importorskip("transformers")
    samples = speech()
    write_wav(tmp_path / "a.wav", samples)
    read = read_wav(tmp_path / "a.wav")
    assert read.shape == samples.shape and (read - samples).abs().max() < 1e-4  # 16-bit rounding
    write_wav(tmp_path / "stereo.wav", samples, channels=2)
    torch.testing.assert_close(read_wav(tmp_path / "stereo.wav"), read)
    for mels in (80, 128):
        extractor = transformers.WhisperFeatureExtractor(feature_size=mels)
        assert torch.allclose(mel_filters(mels), torch.from_numpy(extractor.mel_filters), atol=1e-12)
        expected = extractor(read.numpy(), sampling_rate=16_000, return_tensors="pt").input_features
        actual = wav_features(tmp_path / "a.wav", mels)
        assert actual.shape == expected.shape == (1, mels, 3000)
        assert (actual - expected).abs().max() < 1e-4


def test_bad_audio_is_refused_with_what_to_do(tmp_path):
    write_wav(tmp_path / "8k.wav", speech(), rate=8000)
    with pytest.raises(AudioError, match=r"sampled at 8,000 Hz; Whisper hears 16,000 Hz: resample it"):
        read_wav(tmp_path / "8k.wav")
    (tmp_path / "text.wav").write_text("not audio")
    with pytest.raises(AudioError, match=r"text.wav: not a PCM wav file .*ffmpeg"):
        read_wav(tmp_path / "text.wav")
    with pytest.raises(AudioError, match=r"31.00 s of audio; the model hears 30.00 s at once: cut it"):
        log_mel(torch.zeros(31 * 16_000))


def test_generate_refuses_token_ids_for_a_model_that_hears_audio():
    model = zoo.build(TINY).eval()
    with pytest.raises(TrainError, match=r"encoder hears audio: give its log-mel features, a float tensor \(N, M, T\)"):
        generate(model, [[1, 2, 3]], max_new_tokens=2)
    features = torch.randn(2, 8, 20)
    cached = generate(model, features, max_new_tokens=6, temperature=0.0)
    assert cached.tokens == generate(model, features, max_new_tokens=6, use_cache=False).tokens


@pytest.mark.slow
def test_zoo_generate_on_a_wav_file_gives_transformers_greedy_tokens(tmp_path):
    transformers = pytest.importorskip("transformers")
    hf = whisper_reference(transformers)
    hf.save_pretrained(tmp_path / "hf")
    samples = speech(seconds=2.0, seed=1)
    write_wav(tmp_path / "speech.wav", samples)
    extractor = transformers.WhisperFeatureExtractor()
    features = extractor(read_wav(tmp_path / "speech.wav").numpy(), sampling_rate=16_000, return_tensors="pt")
    hf.generation_config.eos_token_id = None  # nothing ends early: all 12 tokens compared
    with torch.no_grad():
        expected = hf.generate(features.input_features, max_new_tokens=12, do_sample=False)[0].tolist()
    assert len(expected) == 12 and len(set(expected)) > 2

    result = CliRunner().invoke(
        app,
        [
            "generate",
            str(tmp_path / "hf"),
            "--audio",
            str(tmp_path / "speech.wav"),
            "--new",
            "12",
            "--temperature",
            "0",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "tokens: " + " ".join(map(str, expected)) in " ".join(result.output.split())  # as wrapped to any width


def test_the_cli_says_what_to_give(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["generate", str(tmp_path)])
    assert result.exit_code != 0
    assert "give --prompt TEXT (text in) or --audio WAV (a wav file to transcribe), one of them" in result.output


def test_the_audio_encoder_costs_its_frames_whatever_the_target_length():
    parts = model_parts(zoo.build("whisper-tiny", device="meta"))
    encoder = [p for p in parts if p.path.startswith("encoder.")]
    assert {p.tokens for p in encoder} == {1500}
    short, long = (flop_estimate(encoder, seq_len=n).forward_per_sequence for n in (10, 400))
    assert short == long
    E = 384
    cross = [p for p in parts if p.cross]
    assert len(cross) == 4 and all(p.context == 1500 and p.context_matmul == 2 * E * E for p in cross)
    T, cost = 100, cross[0].cost
    expected = T * 2 * (cost.matmul - 2 * E * E) + 1500 * 2 * (2 * E * E) + T * 2 * 2 * 1500 * cost.score_width
    assert flop_estimate(cross[:1], seq_len=T).forward_per_sequence == expected


def test_plan_traces_frames_and_serving_counts_the_cross_attention_cache():
    from zoo.analysis.plan import plan

    p = plan("whisper-tiny", gpu="h100-80gb")
    assert p.seq_len == 447  # max_len - 1: the target's [eos] takes the last decoder position
    assert p.serving.cross_bytes_per_sequence == 4 * 2 * 1500 * 384 * 2  # layers x (k, v) x frames x E x bf16
    assert p.serving.kv_bytes_per_token == 4 * 2 * 384 * 2


def test_the_picture_shows_the_audio_front_end_under_the_encoder():
    from zoo.draw import describe

    stacks, _ = describe(zoo.build("whisper-tiny", device="meta"))
    encoder, decoder = stacks
    assert encoder.input == "log-mel frames 80 × 3000"
    assert (
        encoder.embedding.title == "Audio front end (log-mel)"
        and "no positional encoding" not in encoder.embedding.lines
    )
    assert decoder.input == "target token ids (shifted right)"
    assert decoder.embedding.title == "Token embedding" and not any(
        "shared" in line for line in decoder.embedding.lines
    )


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("tie_word_embeddings", False, "tie_word_embeddings"),
        ("decoder_attention_heads", 2, "decoder_attention_heads=2 is not supported"),
        ("decoder_ffn_dim", 48, "decoder_ffn_dim=48 is not supported"),
        ("activation_function", "swish_cubed", "activation_function"),
    ],
)
def test_what_zoo_cannot_build_is_refused_by_name(tmp_path, key, value, message):
    import json

    from hf_cases.whisper import CASES

    import zoo.hf
    from zoo.errors import HFImportError

    config = {**CASES["whisper-tiny-style"]["config"], "model_type": "whisper", key: value}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(HFImportError, match=message):
        zoo.hf.hf_recipe(tmp_path)


def test_training_refuses_an_audio_encoder_before_writing_anything(tmp_path):
    from zoo.train import train

    with pytest.raises(TrainError, match=r"whisper-test's encoder hears audio \(encoder_embedding: audio\), and zoo's"):
        train(TINY, out=tmp_path / "run", device="cpu", **{"train.steps": 1, "train.seq_len": 8})
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_a_checkpoints_generation_config_steers_decoding_as_in_transformers(tmp_path):
    """The prompt (start, detected language, forced task, no timestamps) and the suppressed tokens of a
    generation_config.json, as transformers' Whisper generate reads them: the same tokens for two files at once."""
    transformers = pytest.importorskip("transformers")
    from zoo.generate.audio import transcribe

    hf = whisper_reference(transformers)
    g = hf.generation_config
    g.lang_to_id, g.task_to_id = {"<|en|>": 90, "<|fr|>": 91}, {"transcribe": 93, "translate": 92}
    g.no_timestamps_token_id, g.is_multilingual = 89, True
    g.forced_decoder_ids = [[1, None], [2, 93]]  # the language detected, then transcribe
    g.suppress_tokens, g.begin_suppress_tokens = [5, 7, 24], [3, 11]
    g.eos_token_id = None  # nothing ends early: all 12 tokens compared
    hf.save_pretrained(tmp_path / "hf")
    files = []
    for seed in (1, 2):
        write_wav(tmp_path / f"{seed}.wav", speech(seconds=1.0 + seed, seed=seed))
        files.append(tmp_path / f"{seed}.wav")
    extractor = transformers.WhisperFeatureExtractor()
    features = torch.cat(
        [extractor(read_wav(f).numpy(), sampling_rate=16_000, return_tensors="pt").input_features for f in files]
    )
    with torch.no_grad():
        expected = hf.generate(features, max_new_tokens=12, do_sample=False, return_dict_in_generate=True).sequences
    out = transcribe(tmp_path / "hf", files, max_new_tokens=12)
    assert [row[:4] for row in expected.tolist()] == out.prompts and all(p[2:] == [93, 89] for p in out.prompts)
    assert [row[4:] for row in expected.tolist()] == out.tokens
    assert not {3, 11} & {row[0] for row in out.tokens} and not {5, 7, 24} & {t for r in out.tokens for t in r}
    assert transcribe(tmp_path / "hf", files, max_new_tokens=12, use_cache=False).tokens == out.tokens
