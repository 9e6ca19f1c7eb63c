"""Audio in: a 16 kHz wav file (read with the standard library's ``wave``) to Whisper's log-mel frames.

The features are Whisper's: the audio zero-padded (or refused when longer) to the model's window of
``2 · frames · 160`` samples (30 s for ``frames`` 1500), a 400-sample Hann-windowed STFT every 160 samples (25 ms
windows every 10 ms), the power spectrum through ``num_mel_bins`` Slaney-normalised triangular mel filters over
0-8 kHz, then ``log10`` floored at 8 below its maximum and scaled as ``(x + 4) / 4``. transformers'
``WhisperFeatureExtractor`` gives the same frames (the test compares them).
"""

from __future__ import annotations

import math
import wave
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from zoo.errors import ZooError

SAMPLE_RATE = 16_000
N_FFT = 400
HOP = 160


class AudioError(ZooError, ValueError):
    """A wav file zoo cannot read, or audio that does not fit the model: the message says what and how to fix it."""


def read_wav(path: str | Path) -> torch.Tensor:
    """The samples of a 16 kHz PCM wav file as float32 in [-1, 1] (channels averaged to mono).

    Raises:
        AudioError: not a PCM wav file, or not sampled at 16 kHz.
    """
    try:
        with wave.open(str(path), "rb") as f:
            rate, channels, width, n = f.getframerate(), f.getnchannels(), f.getsampwidth(), f.getnframes()
            data = f.readframes(n)
    except (wave.Error, EOFError) as exc:
        raise AudioError(
            f"{path}: not a PCM wav file ({exc}); convert it, e.g. ffmpeg -i IN -ar 16000 OUT.wav"
        ) from exc
    except OSError as exc:
        raise AudioError(f"{path}: cannot read it ({exc.strerror or exc})") from exc
    if rate != SAMPLE_RATE:
        raise AudioError(f"{path}: sampled at {rate:,} Hz; Whisper hears 16,000 Hz: resample it (ffmpeg -ar 16000)")
    if width not in (1, 2, 4):
        raise AudioError(f"{path}: {8 * width}-bit samples; give 8-, 16- or 32-bit PCM")
    if width == 1:  # unsigned 8-bit, centred on 128
        samples = (torch.frombuffer(bytearray(data), dtype=torch.uint8).float() - 128.0) / 128.0
    else:
        dtype = torch.int16 if width == 2 else torch.int32
        samples = torch.frombuffer(bytearray(data), dtype=dtype).float() / float(2 ** (8 * width - 1))
    return samples.view(-1, channels).mean(dim=1)


def mel_filters(num_mel_bins: int, sample_rate: int = SAMPLE_RATE, n_fft: int = N_FFT) -> torch.Tensor:
    """Triangular filters (n_fft/2 + 1, num_mel_bins) evenly spaced on the Slaney mel scale over 0 .. sample_rate/2,
    each scaled to unit area (Slaney normalisation), as librosa's and transformers' ``mel_filter_bank``."""

    def to_mel(hz: torch.Tensor) -> torch.Tensor:  # linear below 1 kHz, logarithmic above
        log = 15.0 + torch.log(hz.clamp(min=1000.0) / 1000.0) * (27.0 / math.log(6.4))
        return torch.where(hz >= 1000.0, log, 3.0 * hz / 200.0)

    def to_hz(mel: torch.Tensor) -> torch.Tensor:
        log = 1000.0 * torch.exp(math.log(6.4) / 27.0 * (mel - 15.0))
        return torch.where(mel >= 15.0, log, 200.0 * mel / 3.0)

    top = torch.tensor(float(sample_rate // 2), dtype=torch.float64)
    mels = torch.linspace(0.0, float(to_mel(top)), num_mel_bins + 2, dtype=torch.float64)
    edges = to_hz(mels)  # (num_mel_bins + 2,) Hz
    fft_freqs = torch.linspace(0.0, float(top), n_fft // 2 + 1, dtype=torch.float64)
    slopes = edges[None, :] - fft_freqs[:, None]  # (bins, num_mel_bins + 2)
    widths = edges.diff()
    down = -slopes[:, :-2] / widths[:-1]
    up = slopes[:, 2:] / widths[1:]
    filters = torch.minimum(down, up).clamp(min=0.0)
    return filters * (2.0 / (edges[2:] - edges[:-2]))[None, :]


def log_mel(samples: torch.Tensor, num_mel_bins: int = 80, frames: int = 1500) -> torch.Tensor:
    """Whisper's log-mel features (num_mel_bins, 2 · frames) of mono 16 kHz ``samples`` (S,).

    Raises:
        AudioError: the audio is longer than the model hears at once (``2 · frames · 160`` samples).
    """
    window = 2 * frames * HOP
    if samples.numel() > window:
        raise AudioError(
            f"{samples.numel() / SAMPLE_RATE:.2f} s of audio; the model hears {window / SAMPLE_RATE:.2f} s at once: "
            "cut it into pieces of at most that length"
        )
    padded = torch.zeros(window, dtype=torch.float64)
    padded[: samples.numel()] = samples.to(torch.float64)
    stft = torch.stft(
        padded, N_FFT, HOP, window=torch.hann_window(N_FFT, dtype=torch.float64), center=True, return_complex=True
    )
    power = stft[:, :-1].abs() ** 2  # (bins, 2 · frames): the last frame dropped
    mel = mel_filters(num_mel_bins).T @ power
    log = mel.clamp(min=1e-10).log10()
    log = torch.maximum(log, log.max() - 8.0)
    return ((log + 4.0) / 4.0).float()


def wav_features(path: str | Path, num_mel_bins: int = 80, frames: int = 1500) -> torch.Tensor:
    """A wav file's log-mel features, batched: (1, num_mel_bins, 2 · frames)."""
    return log_mel(read_wav(path), num_mel_bins, frames)[None]


@dataclass(frozen=True)
class SpeechPrompt:
    """How a Whisper checkpoint's ``generation_config.json`` starts and steers decoding, as transformers' Whisper
    ``generate`` reads it (short-form, without timestamps): the decoder prompt is the start token, the
    ``forced_decoder_ids`` (a None for the language: detected), the language the model finds likeliest among
    ``lang_to_id`` where none is forced, and ``<|notimestamps|>``; ``suppress_tokens`` are never produced, and
    ``begin_suppress_tokens`` not as the first new token."""

    start: int
    forced: tuple[int | None, ...] = ()
    languages: tuple[int, ...] = ()
    no_timestamps: int | None = None
    suppress: tuple[int, ...] = ()
    begin_suppress: tuple[int, ...] = ()
    stops: tuple[int, ...] = ()

    @classmethod
    def from_config(cls, config: dict[str, Any], start: int) -> SpeechPrompt:
        """The prompt a ``generation_config.json`` (``config``) describes; ``start``: the model's start token."""
        forced = []
        for position, token in sorted(config.get("forced_decoder_ids") or []):
            if position != len(forced) + 1:  # transformers reads a run of positions from 1 on, and no other
                raise AudioError(
                    f"generation_config.json: forced_decoder_ids {config['forced_decoder_ids']} must force positions "
                    "1, 2, ... in a row, as transformers reads them"
                )
            forced.append(token)
        eos = config.get("eos_token_id")
        return cls(
            start=config.get("decoder_start_token_id", start),
            forced=tuple(forced),
            languages=tuple((config.get("lang_to_id") or {}).values()),
            no_timestamps=config.get("no_timestamps_token_id"),
            suppress=tuple(config.get("suppress_tokens") or ()),
            begin_suppress=tuple(config.get("begin_suppress_tokens") or ()),
            stops=tuple(eos if isinstance(eos, list) else [] if eos is None else [eos]),
        )


@dataclass(frozen=True)
class Transcript:
    """The tokens decoded from audio (after the prompt, each row up to its stop token), the prompt, its text."""

    tokens: list[list[int]]
    prompts: list[list[int]]
    texts: list[str] | None
    seconds: float


@torch.no_grad()
def decode_speech(
    model: Any,
    features: torch.Tensor,
    prompt: SpeechPrompt,
    *,
    max_new_tokens: int = 64,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    use_cache: bool = True,
) -> tuple[list[list[int]], list[list[int]]]:
    """Decode log-mel ``features`` (N, M, T) with a Whisper-like encoder-decoder as ``prompt`` says: the new tokens
    of each row (its stop token left out) and the prompt it started from."""
    from .sampling import check_generation, sample_next

    check_generation(max_new_tokens, temperature, top_k, top_p, seed)
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    features = features.to(device, next(model.parameters()).dtype)
    n = features.shape[0]
    encoded = model.encode(features)
    rows = [[prompt.start, *prompt.forced] for _ in range(n)]
    if prompt.languages and (len(rows[0]) == 1 or rows[0][1] is None):  # the likeliest language, per row
        first = torch.full((n, 1), prompt.start, dtype=torch.long, device=device)
        logits = model(decoder_input_ids=first, encoder_hidden=encoded).logits[:, -1]
        allowed = torch.full_like(logits, float("-inf"))
        allowed[:, list(prompt.languages)] = 0.0
        for row, language in zip(rows, (logits + allowed).argmax(-1).tolist(), strict=True):
            row[1:2] = [language]
    for row in rows:
        if prompt.no_timestamps is not None and row[-1] != prompt.no_timestamps:
            row.append(prompt.no_timestamps)
        row[:] = [t for t in row if t is not None]
    seq = torch.tensor(rows, dtype=torch.long, device=device)
    generator = torch.Generator(device=device).manual_seed(seed) if seed is not None else None
    suppress, begin = list(prompt.suppress), list(prompt.begin_suppress)
    cache = model.new_cache(n, seq.shape[1] + max_new_tokens) if use_cache else None
    step = seq
    made: list[list[int]] = [[] for _ in range(n)]
    done = [False] * n
    try:
        for i in range(max_new_tokens):
            logits = model(decoder_input_ids=step, encoder_hidden=encoded, cache=cache).logits[:, -1].float()
            logits[:, suppress] = float("-inf")
            if i == 0:
                logits[:, begin] = float("-inf")
            token = sample_next(logits, temperature=temperature, top_k=top_k, top_p=top_p, generator=generator)
            for r, t in enumerate(token.tolist()):
                if not done[r]:
                    done[r] = t in prompt.stops
                    if not done[r]:
                        made[r].append(t)
            if all(done):
                break
            seq = torch.cat([seq, token[:, None]], dim=1)
            step = token[:, None] if use_cache else seq
    finally:
        model.train(was_training)
    return made, rows


def transcribe(
    run: str | Path | Any,
    wav: str | Path | list[str | Path],
    *,
    device: str | torch.device | None = None,
    **settings: Any,
) -> Transcript:
    """Decode wav files with a model whose encoder hears audio (Whisper), as transformers' Whisper ``generate``
    does with the checkpoint's ``generation_config.json`` (``SpeechPrompt``; without one, from the start token).
    ``settings``: ``decode_speech``'s (max_new_tokens, temperature, top_k, top_p, seed, use_cache).

    Raises:
        AudioError: a wav file zoo cannot read, or too long for the model's window.
        TrainError: a model whose encoder does not hear audio.
    """
    import time

    from zoo.errors import TrainError
    from zoo.train.run import Run, load_run

    from .text import stop_tokens

    if not isinstance(run, Run):
        run = load_run(run, device=device)
    audio = getattr(run.model.recipe, "encoder_embedding", None)
    if not getattr(run.model, "encodes_features", False) or audio is None:
        raise TrainError(f"{run.path} does not hear audio: --audio needs a model with an audio front end (Whisper)")
    paths = wav if isinstance(wav, list) else [wav]
    features = torch.cat([wav_features(p, audio.num_mel_bins, audio.frames) for p in paths])
    config = _generation_config(run)
    prompt = SpeechPrompt.from_config(config, run.model.decoder_start_token_id)
    tok = run.tokenizer
    if not prompt.stops and tok is not None:
        prompt = SpeechPrompt(**{**prompt.__dict__, "stops": tuple(stop_tokens(tok, True))})
    started = time.perf_counter()
    tokens, prompts = decode_speech(run.model, features, prompt, **settings)
    seconds = time.perf_counter() - started
    texts = [tok.decode(t) for t in tokens] if tok is not None else None
    return Transcript(tokens, prompts, texts, seconds)


def _generation_config(run: Any) -> dict[str, Any]:
    """The ``generation_config.json`` of a Hugging Face folder, or the one a zoo import carried, else {}."""
    from zoo.files import read_json

    folder = getattr(run, "folder", None)
    if folder is None:
        return {}
    for path in (folder.path / "generation_config.json", folder.path / "hf" / "generation_config.json"):
        if path.is_file():
            return read_json(path, error=AudioError)
    return {}
