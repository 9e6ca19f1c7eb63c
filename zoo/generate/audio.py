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


def transcribe(
    run: str | Path | Any,
    wav: str | Path,
    *,
    device: str | torch.device | None = None,
    **settings: Any,
) -> tuple[list[int], str | None, Any]:
    """Decode a wav file with a model whose encoder hears audio (Whisper): the new token ids, their text (None when
    the model has no tokenizer) and the generation's stats. ``settings``: ``zoo.generate.generate``'s.

    Raises:
        AudioError: a wav file zoo cannot read, or too long for the model's window.
        TrainError: a model whose encoder does not hear audio.
    """
    from zoo.errors import TrainError
    from zoo.train.run import Run, load_run

    from .loop import generate
    from .text import stop_tokens

    if not isinstance(run, Run):
        run = load_run(run, device=device)
    audio = getattr(run.model.recipe, "encoder_embedding", None)
    if not getattr(run.model, "encodes_features", False) or audio is None:
        raise TrainError(f"{run.path} does not hear audio: --audio needs a model with an audio front end (Whisper)")
    features = wav_features(wav, audio.num_mel_bins, audio.frames)
    tok = run.tokenizer
    stops = stop_tokens(tok, True) if tok is not None else []
    out = generate(run.model, features, stop_tokens=stops, **settings)
    tokens = out.tokens[0]
    return tokens, tok.decode(tokens) if tok is not None else None, out.stats
