"""The training loop: recipe in, checkpoints and metrics out.

    result = train("recipes/gpt-tiny.yaml", out="runs/gpt")            # embedded English text
    result = train("gpt-tiny", out="runs/gpt", resume=True)             # continue from the last checkpoint

One optimizer step is ``grad_accum`` micro-steps of ``batch_size`` examples (all processes together).
Batch ``(step, micro)`` is drawn from a generator seeded by ``(seed, step, micro)``, and the optimizer,
scheduler, loss scaler and RNG states are checkpointed, so a resumed run on the same machine computes
exactly what the uninterrupted run would have. The loss (and the gradient norm) is checked for NaN/inf at
every log point, and the weights before every checkpoint: a bad value stops the run naming its step, and
the last good checkpoint (one whose weights are all finite) stays.

``resume=True`` continues a run as it was started: ``RUN_DIR/run.yaml`` records the recipe named and the
overrides given when the run began, and a resume re-reads that recipe with those overrides (new ones on top),
so ``train("gpt-tiny", out=RUN, resume=True)`` (``zoo train gpt-tiny --out RUN --resume``) continues a run
started with ``**{"train.steps": 800}`` at 800 steps. A recipe that then differs from the checkpoint's (the
file changed since, or a new override) is refused with every difference, unless ``allow_changes=True``, which
lets training settings change (the learning rate, steps, schedule...); the optimizer, the schedule and the
logs then all use the new values, and ``run.yaml`` records them with the next checkpoint. A run first removes
what a killed process left in its directory.

``init_from=DIR`` starts a new run from the weights of a model, checkpoint, run or Hugging Face folder
(``zoo.train.transfer``): fine-tuning with a new head, or continued training. It never goes with ``resume``.

Ctrl-C (SIGINT, one process): the step under way finishes, a checkpoint of it is written (unless one of that
step exists; it is as exact as any other, so the resumed run equals the uninterrupted one) and the run stops
with ``TrainInterrupted`` (a ``KeyboardInterrupt``), which names the step, the checkpoint and the resume
command. A second Ctrl-C, or one under torchrun, stops at once without writing; the last complete checkpoint
stays and is named.

The loop reports through ``callback(TrainEvent)`` (the CLI draws a progress bar from it) and writes
``metrics.jsonl``; it prints nothing itself.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import math
import os
import shlex
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from zoo.architectures.blocks import set_activation_checkpointing
from zoo.dtypes import dtype_name, parse_dtype
from zoo.errors import CheckpointError, TrainError, ZooError
from zoo.recipe import Recipe, load_recipe, positions_fit

from . import checkpoint as ckpt
from . import distributed as dist
from .metrics import MetricsWriter
from .objectives import Objective, describe_batch, make_objective, needs_tokenizer, objective_name, perplexity
from .tokenizer import BPETokenizer, ByteTokenizer, Tokenizer
from .transfer import Transfer, init_from_folder

RUNS_DIR = Path("runs")
INIT_AND_RESUME = (
    "--init-from starts a new run from imported weights and --resume continues a run from its own checkpoint: "
    "give one of them (a run started with --init-from resumes with --resume alone)"
)


@dataclass
class TrainEvent:
    """What the loop reports. ``kind``: start | resume | step | eval | checkpoint | end | notice.

    ``start`` data includes ``objective``, ``generates`` (the model will generate text), ``seq_len`` (tokens
    per training sequence; None for images) and what one step consumes; ``step`` data is the metrics record
    plus ``unit`` (tokens or samples), ``per_s`` (that unit per second, None before any time passed) and
    ``eta_s``.
    """

    kind: str
    step: int
    total: int
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class TrainResult:
    """How a run ended: where it is, how far it got, its last losses and held-out metrics, and the model."""

    run_dir: Path
    step: int
    train_loss: float | None
    eval: dict[str, float]
    seconds: float
    checkpoint: Path | None
    model: nn.Module
    """The trained model (this process's copy; under FSDP2, its shards)."""


@dataclass(frozen=True)
class Start:
    """How ``train()`` was called: the recipe as given (re-read on resume) and the overrides on top of it."""

    recipe: str | Path | Mapping[str, Any] | Recipe
    overrides: dict[str, Any]

    @property
    def reference(self) -> str | None:
        """The recipe's name or path as given; None for a dict or a ``Recipe``."""
        return str(self.recipe) if isinstance(self.recipe, (str, Path)) else None


class TrainInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a run: the step it reached, its last complete checkpoint, and how to resume it."""

    def __init__(
        self, *, run_dir: Path, step: int, total: int, checkpoint: Path | None, written: bool, recipe: str
    ) -> None:
        self.run_dir = run_dir
        self.step = step
        """The last step that was completed."""
        self.total = total
        self.checkpoint = checkpoint
        """The last complete checkpoint (None: none was written yet)."""
        self.written = written
        """Whether ``checkpoint`` was written at the interrupt (of ``step``)."""
        self.recipe = recipe
        super().__init__(self.message)

    @property
    def resume_command(self) -> str:
        return f"zoo train {shlex.quote(self.recipe)} --out {shlex.quote(str(self.run_dir))} --resume"

    @property
    def message(self) -> str:
        text = f"interrupted at step {self.step:,} of {self.total:,}. "
        if self.checkpoint is None:
            text += "No checkpoint was written yet: a resumed run starts from step 0."
        elif self.written:
            text += f"Wrote the checkpoint of that step, {self.checkpoint}."
        else:
            saved = int(self.checkpoint.name.removeprefix("step-"))
            lost = self.step - saved
            steps = f"{lost:,} step after it is" if lost == 1 else f"{lost:,} steps after it are"
            text += f"The last complete checkpoint is {self.checkpoint} (step {saved:,})" + (
                f"; the {steps} lost (stopped at once: no checkpoint on a second Ctrl-C or under torchrun)."
                if lost > 0
                else "."
            )
        return f"{text}\nResume with: {self.resume_command}"


def train(
    recipe: str | Path | Mapping[str, Any] | Recipe,
    *,
    data: str | Path | None = None,
    out: str | Path | None = None,
    device: str = "auto",
    resume: bool = False,
    allow_changes: bool = False,
    init_from: str | Path | None = None,
    callback: Callable[[TrainEvent], None] | None = None,
    **overrides: Any,
) -> TrainResult:
    """Train the model a recipe describes, with the recipe's ``train:`` section.

    Args:
        recipe: a path, a recipe name, a dict or a ``Recipe``.
        data: the user's data (see ``zoo.train.data``); default ``train.data``, else the embedded data.
        out: the run directory; default ``runs/<recipe name>`` (``-2``, ``-3``... when taken).
        device: ``auto`` (CUDA when present), ``cpu`` or ``cuda``.
        resume: continue from the newest complete checkpoint in ``out`` as the run was started: ``recipe``
            re-read with the overrides the run was started with (``RUN_DIR/run.yaml``), ``overrides`` on top.
        allow_changes: on resume, accept training settings (``train.*``, the name) that differ from the
            checkpoint's and train on with them; the model, tokenizer and objective never change.
        init_from: a model, checkpoint, run or Hugging Face folder whose weights the new run starts from
            (``zoo.train.transfer``); not with ``resume``.
        callback: receives every ``TrainEvent`` (on rank 0 only, under torchrun).
        overrides: recipe overrides with dotted keys, e.g. ``**{"train.steps": 100}``.

    Raises:
        TrainError: bad data, a mismatched checkpoint, a sequence length beyond the positional table, a
            vocabulary mismatch, a NaN loss or weights, a run name that would leave ``runs/``, weights of
            ``init_from`` that do not fit the recipe, ``init_from`` with ``resume``.
        CheckpointError: a damaged checkpoint file. ``RecipeError`` for an invalid recipe.
        TrainInterrupted: Ctrl-C (a ``KeyboardInterrupt``: the step, the checkpoint, the resume command).
    """
    if init_from is not None and resume:
        raise TrainError(INIT_AND_RESUME)
    start = Start(recipe, dict(overrides))
    if overrides or not isinstance(recipe, Recipe):
        recipe = load_recipe(recipe, **overrides)
    trainer = Trainer(
        recipe,
        data=data,
        out=out,
        device=device,
        resume=resume,
        allow_changes=allow_changes,
        callback=callback,
        start=start,
        init_from=init_from,
    )
    try:
        return trainer.run()
    finally:
        trainer.close()


def batch_seed(seed: int, step: int, micro: int) -> int:
    """A 63-bit seed for the batch of (seed, step, micro-step): independent streams, reproducible anywhere."""
    digest = hashlib.blake2b(f"{seed}/{step}/{micro}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def check_run_name(name: str) -> str:
    """A recipe name that names one folder inside ``runs/``: no path separator, ``..``, absolute path."""
    separators = {"/", "\\", os.sep, os.altsep or "/"}
    if (
        not name.strip()
        or name in (".", "..")
        or any(sep in name for sep in separators)
        or "\0" in name
        or Path(name).is_absolute()
    ):
        raise TrainError(
            f"the recipe name {name!r} cannot name a run folder inside {RUNS_DIR}/ (it is empty, holds a path "
            "separator or '..', or is absolute): give the recipe a plain name (--set name=NAME), or pass --out DIR"
        )
    return name


def default_run_dir(name: str, resume: bool) -> Path:
    """``runs/NAME``; when it already holds a run, ``runs/NAME-2``, ``-3``... (resume: the newest of them).

    Raises:
        TrainError: a name that would put the run outside ``runs/`` (``../x``, ``a/b``, ``/tmp/x``).
    """
    check_run_name(name)
    pattern = f"{glob.escape(name)}-*"
    taken = [RUNS_DIR / name] + sorted(RUNS_DIR.glob(pattern), key=lambda p: _suffix(p, name))
    taken = [p for p in taken if p.exists() and _suffix(p, name) >= 0]
    if resume:
        return taken[-1] if taken else RUNS_DIR / name
    if not taken:
        return RUNS_DIR / name
    return RUNS_DIR / f"{name}-{max(_suffix(p, name) for p in taken) + 1}"


def _suffix(path: Path, name: str) -> int:
    rest = path.name[len(name) :]
    if rest == "":
        return 1
    return int(rest[1:]) if rest[1:].isdigit() else -1


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype of a precision setting (None: plain fp32)."""
    if precision == "auto":
        if device.type != "cuda":
            return None
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    dtype = parse_dtype(precision)  # fp32, bf16, fp16: names of zoo.dtypes' table
    return None if dtype == torch.float32 else dtype


def autocast(device_type: str, dtype: torch.dtype, checkpointing: str = "none") -> torch.autocast:
    """Autocast to ``dtype``. With activation checkpointing, without autocast's cache of weight casts: the
    cache keeps a low-precision copy of every weight until the forward ends (2 bytes per parameter in bf16),
    which checkpointed blocks would otherwise not keep; without checkpointing the backward keeps those
    copies anyway, and the cache saves casting a weight twice."""
    return torch.autocast(device_type, dtype=dtype, cache_enabled=checkpointing == "none")


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """AdamW groups: decay the weights of Linear and Conv layers only; never norms, biases, embeddings.

    A tied LM head shares the embedding table, which therefore stays undecayed.
    """
    embedding_ids = {id(p) for m in model.modules() if isinstance(m, nn.Embedding) for p in m.parameters()}
    decay_ids = {
        id(m.weight)
        for m in model.modules()
        if isinstance(m, (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)) and id(m.weight) not in embedding_ids
    }
    decay = [p for p in model.parameters() if id(p) in decay_ids]
    rest = [p for p in model.parameters() if id(p) not in decay_ids]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def lr_factor(step: int, *, warmup: int, total: int, min_ratio: float) -> float:
    """Learning rate / peak for optimizer step ``step`` (0-based): linear warmup, then cosine to min_ratio."""
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def check_sequence_length(recipe: Recipe, seq_len: int, objective: str) -> None:
    """A training sequence must fit a positional table that has rows for ``max_len`` positions only."""
    longest = seq_len + 1 if objective == "seq2seq" else seq_len  # seq2seq targets carry an [eos]
    if positions_fit(recipe, longest) is not None:
        raise TrainError(
            f"train.seq_len ({seq_len}) needs {longest} positions, beyond the {recipe.positional.type} position "
            f"table of max_len {recipe.max_len}: lower train.seq_len or raise max_len"
        )


class Trainer:
    """One training run. ``train()`` is the way to use it; the pieces are methods to keep each short."""

    def __init__(
        self,
        recipe: Recipe,
        *,
        data: str | Path | None,
        out: str | Path | None,
        device: str,
        resume: bool,
        callback: Callable[[TrainEvent], None] | None,
        allow_changes: bool = False,
        start: Start | None = None,
        init_from: str | Path | None = None,
    ) -> None:
        """``start``: how ``train()`` was called (None: ``recipe`` is the whole recipe, as given)."""
        if init_from is not None and resume:
            raise TrainError(INIT_AND_RESUME)
        self.allow_changes = allow_changes
        self.callback = callback
        self.env = dist.setup(device)
        self.metrics: MetricsWriter | None = None
        self.stop_requested = False
        """Set by a first Ctrl-C: the loop stops after the step under way, with a checkpoint."""
        if out is None:
            out = dist.broadcast_object(default_run_dir(recipe.name, resume), self.env)
        self.run_dir = Path(out)
        self.saved_start = ckpt.read_start(self.run_dir) if resume else None
        self.new_overrides = dict(start.overrides) if start is not None else {}
        if start is not None and self.saved_start and self.saved_start["overrides"]:
            # As the run was started: its overrides under the ones given now.
            start = Start(start.recipe, {**self.saved_start["overrides"], **start.overrides})
            recipe = load_recipe(start.recipe, **start.overrides)
        self.start = start
        self.recipe = recipe
        self.config = recipe.train
        self.objective_name = objective_name(recipe)
        self.seq_len = self.config.seq_len or recipe.max_len or 0
        if self.objective_name != "image_classification":
            check_sequence_length(recipe, self.seq_len, self.objective_name)
        if self.config.batch_size % self.env.world_size:
            raise TrainError(
                f"train.batch_size ({self.config.batch_size}) is the batch of all {self.env.world_size} processes "
                "together and must be divisible by their number"
            )
        self.resume_from = self._find_checkpoint(resume)
        self._clean_leftovers()
        if self.resume_from is None and self.saved_start:  # killed before its first checkpoint: start as it did
            init_from = init_from or self.saved_start.get("init_from")
            data = data or self.saved_start.get("data")
        self.init_from = Path(init_from) if init_from is not None else None
        if data is None:  # a resumed run reads what it was trained on unless told otherwise
            data = ckpt.read_info(self.resume_from).get("data") if self.resume_from else self.config.data
        self.data_path = Path(data) if data is not None else None
        self._check_schedule()
        self._build()

    # ------------------------------------------------------------------------------------------ setup

    def _emit(self, kind: str, step: int, /, **data: Any) -> None:
        if self.callback is not None and self.env.is_main:
            self.callback(TrainEvent(kind, step, self.config.steps, {k: v for k, v in data.items() if k != "step"}))

    def _find_checkpoint(self, resume: bool) -> Path | None:
        found = ckpt.latest_checkpoint(self.run_dir) if self.run_dir.exists() else None
        if found is not None and not resume:
            raise TrainError(
                f"{self.run_dir} already holds a run (checkpoint {found.name}): pass --resume to continue it, "
                "or --out for a new run directory"
            )
        if found is None and resume:
            self._emit("notice", 0, message=f"no complete checkpoint in {self.run_dir}: starting from step 0")
        if found is not None:
            self._check_changes(found)
        return found

    def _check_changes(self, found: Path) -> None:
        """Refuse a recipe that differs from the checkpoint's, unless the differences are training settings
        and ``allow_changes`` is set (then say which values change)."""
        differences = ckpt.recipe_differences(found, self.recipe)
        fixed = [d for d in differences if not d.changeable]
        changes = [d for d in differences if d.changeable]
        if fixed:
            raise TrainError(
                f"{found} was trained from a different recipe; --resume needs the same model, tokenizer and "
                "objective (saved → given):\n  " + "\n  ".join(self._shown(d) for d in differences)
            )
        if changes and not self.allow_changes:
            if self.saved_start is not None:
                hint = (
                    f"Resume without new --set values to continue the run as it was started (its recipe with the "
                    f"overrides in {self.run_dir / ckpt.START_FILE})"
                )
            else:
                hint = f"Give the run's own settings (they are in {found / 'recipe.yaml'})"
            raise TrainError(
                f"--resume continues the run of {found} as it was started, and the recipe given differs from its "
                f"own (saved → given):\n  " + "\n  ".join(self._shown(d) for d in changes) + f"\n{hint}, or pass "
                "--allow-changes (allow_changes=True) to train on with the new values"
            )
        if changes:
            listed = "; ".join(str(d) for d in changes)
            self._emit("notice", 0, message=f"resuming with changed settings (saved → given): {listed}")

    def _shown(self, difference: ckpt.Difference) -> str:
        """A difference, and where the given value came from: an override given now, or the recipe itself."""
        if self.start is None:
            return str(difference)
        keys = [k.replace("__", ".") for k in self.new_overrides]
        if any(difference.field == k or difference.field.startswith(f"{k}.") for k in keys):
            return f"{difference}   (a new --set)"
        if self.start.reference is None:
            return f"{difference}   (the recipe given)"
        return f"{difference}   (the recipe as it reads now)"

    def _check_schedule(self) -> None:
        """Say so when the learning rate would never leave its warmup."""
        c = self.config
        if c.warmup_steps >= c.steps:
            self._emit(
                "notice",
                0,
                message=f"train.warmup_steps ({c.warmup_steps:,}) >= train.steps ({c.steps:,}): the learning rate "
                "never leaves its warmup (it reaches train.lr on the last step at best, and the cosine decay never "
                f"starts); lower it, e.g. --set train.warmup_steps={c.steps // 10}",
            )

    def _clean_leftovers(self) -> None:
        """Remove what a killed process left in the run directory (rank 0, before anything is written)."""
        removed = ckpt.clean_leftovers(self.run_dir) if self.env.is_main else []
        dist.barrier(self.env)
        if removed:
            self._emit(
                "notice",
                0,
                message=f"removed what an interrupted run left in {self.run_dir}: {', '.join(removed)}",
                removed=removed,
            )

    def _build(self) -> None:
        from zoo.builder import build

        config, env = self.config, self.env
        torch.manual_seed(config.seed)
        self.model = build(self.recipe)  # identical initialisation on every rank
        self.transfer: Transfer | None = None
        if self.init_from is not None:
            self.transfer = init_from_folder(self.model, self.init_from)
            head = getattr(self.recipe.head, "type", "?")
            self._emit(
                "notice",
                0,
                message=self.transfer.message(head),
                loaded=self.transfer.loaded,
                initialised=self.transfer.initialised,
            )
        self.aliases = ckpt.tied_aliases(self.model)
        self.tokenizer = self._tokenizer()
        self.objective: Objective = make_objective(
            self.recipe, self.model, self.tokenizer, self.data_path, self.seq_len
        )
        self.strategy = dist.choose_strategy(self.model, env, config.parallel)
        set_activation_checkpointing(self.model, config.activation_checkpointing, config.checkpoint_every)
        if self.strategy != "fsdp":
            self.model.to(env.device)
        # FSDP2 shards in place onto the device (or, offloaded, keeps the shards in CPU memory)
        self.wrapped = dist.wrap(
            self.model, env, self.strategy, sharding=config.fsdp_sharding, offload=config.fsdp_offload
        )
        fused = env.device.type in ("cuda", "cpu")
        self.optimizer = torch.optim.AdamW(
            parameter_groups(self.model, config.weight_decay),
            lr=config.lr,
            betas=config.betas,
            eps=config.eps,
            fused=fused,
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_factor)
        self.amp_dtype = autocast_dtype(config.precision, env.device)
        use_scaler = self.amp_dtype == torch.float16
        self.scaler = torch.amp.GradScaler(env.device.type, enabled=use_scaler)
        self.step_model = torch.compile(self.wrapped) if config.compile else self.wrapped
        if env.device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        self.start_step = 0
        if self.resume_from is not None:
            self._load(self.resume_from)
        else:
            torch.manual_seed(config.seed + 1 + env.rank)  # dropout streams differ per rank
        if env.is_main:
            self.metrics = MetricsWriter(self.run_dir, resume_step=self.start_step if self.resume_from else None)
            if self.resume_from is None:
                self._write_start()
        # A resumed run records how it goes on (changed settings included) with its first checkpoint.
        self.start_pending = self.resume_from is not None
        self.eval_set = self.objective.eval_batches(config.batch_size, config.eval_batches)
        self.last_checkpoint = self.resume_from
        self.done_step = self.start_step
        """The last step completed (its optimizer update and schedule step done)."""

    def _write_start(self) -> None:
        """``run.yaml``: the recipe named, its file, the overrides, the data and the imported weights."""
        from zoo.recipe import find_recipe

        reference = self.start.reference if self.start is not None else None
        file = None
        if reference is not None:
            with contextlib.suppress(ZooError, OSError):
                file = str(find_recipe(reference).resolve())
        ckpt.write_start(
            self.run_dir,
            {
                "recipe": reference,
                "file": file,
                "overrides": self.start.overrides if self.start is not None else {},
                "data": str(self.data_path) if self.data_path else None,
                "init_from": str(self.init_from) if self.init_from else None,
                "resolved": self.recipe.to_dict(),
            },
        )

    def _tokenizer(self) -> Tokenizer | None:
        if not needs_tokenizer(self.objective_name):
            return None
        if self.resume_from is not None:
            tokenizer = ckpt.read_tokenizer(self.resume_from)
        elif self.transfer is not None and self.transfer.tokenizer is not None:
            tokenizer = self.transfer.tokenizer  # the ids the imported embeddings were trained on
        elif self.config.tokenizer == "bpe":
            tokenizer = self._train_bpe()
        else:
            tokenizer = ByteTokenizer()
        vocab = self.recipe.vocab_size or 0
        if tokenizer.vocab_size > vocab:
            raise TrainError(
                f"the {self.config.tokenizer} tokenizer has {tokenizer.vocab_size} ids but the recipe's vocab_size "
                f"is {vocab}: --set vocab_size={tokenizer.vocab_size}"
            )
        return tokenizer

    def _train_bpe(self) -> Tokenizer:
        from . import data as D

        def learn() -> dict[str, Any]:
            if self.data_path is None:
                docs = D.embedded_english()[0]
            elif self.data_path.suffix == ".tsv":
                docs = [("", f"{a}\n{b}") for a, b in D.load_tsv(self.data_path)]
            else:
                docs = D.load_documents(self.data_path)
            return BPETokenizer.train((text for _, text in docs), self.recipe.vocab_size or 0).to_json()

        from .tokenizer import tokenizer_from_json

        # Learned once on rank 0 and sent to the others: every rank must agree on every id.
        return tokenizer_from_json(dist.broadcast_object(learn() if self.env.is_main else None, self.env))

    def _lr_factor(self, step: int) -> float:
        c = self.config
        return lr_factor(step, warmup=c.warmup_steps, total=c.steps, min_ratio=c.min_lr_ratio)

    def _load(self, path: Path) -> None:
        model_state = ckpt.read_model_state(path)
        ckpt.check_state_fits(self.model, model_state, path)
        ckpt.check_finite(model_state, path)
        optimizer_state, trainer_state = ckpt.read_training_state(path)
        try:
            dist.load_full_state(self.wrapped, self.optimizer, model_state, optimizer_state, self.env)
            self.scheduler.load_state_dict(trainer_state["scheduler"])
            if trainer_state.get("scaler"):
                self.scaler.load_state_dict(trainer_state["scaler"])
        except (KeyError, ValueError, RuntimeError, TypeError) as exc:
            raise CheckpointError(
                f"{path}: the optimizer or trainer state does not fit this model ({type(exc).__name__}: {exc})"
            ) from None
        self._apply_settings()
        self.start_step = int(trainer_state["step"])
        if self.start_step > self.config.steps:
            raise TrainError(
                f"train.steps ({self.config.steps}) is below the step of {path} ({self.start_step}): "
                "there is nothing left to train; raise train.steps"
            )
        rng = trainer_state["rng"]
        if len(rng) == self.env.world_size:
            torch.set_rng_state(rng[self.env.rank]["cpu"])
            if rng[self.env.rank]["cuda"] is not None and self.env.device.type == "cuda":
                torch.cuda.set_rng_state(rng[self.env.rank]["cuda"], self.env.device)
        else:  # another number of processes: fresh, still reproducible, dropout streams
            torch.manual_seed(self.config.seed + 1 + self.env.rank + 1_000_003 * self.start_step)
        self._emit("resume", self.start_step, checkpoint=str(path))

    def _apply_settings(self) -> None:
        """The recipe's optimizer settings and peak learning rate over the checkpoint's (after loading it).

        A checkpoint holds the optimizer's state (moments, step counts) and the schedule's position; its
        settings come from the recipe, so a resume with ``allow_changes`` trains, schedules and logs with
        the new values. Unchanged settings give back exactly the values loaded.
        """
        c = self.config
        for group, decay in zip(self.optimizer.param_groups, (c.weight_decay, 0.0), strict=True):
            group.update(betas=c.betas, eps=c.eps, weight_decay=decay, initial_lr=c.lr)
        self.scheduler.base_lrs = [c.lr for _ in self.optimizer.param_groups]
        for group in self.optimizer.param_groups:
            group["lr"] = c.lr * self._lr_factor(self.scheduler.last_epoch)
        self.scheduler._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    # ------------------------------------------------------------------------------------------ steps

    def _to_device(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """This rank's slice of a global batch, on the device (pinned, asynchronous copies on CUDA)."""
        env = self.env
        if env.active:
            batch = {k: v.tensor_split(env.world_size)[env.rank] for k, v in batch.items()}
        if env.device.type == "cuda":
            return {k: v.pin_memory().to(env.device, non_blocking=True) for k, v in batch.items()}
        return batch

    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return autocast(self.env.device.type, self.amp_dtype, self.config.activation_checkpointing)

    def train_step(self, step: int) -> tuple[torch.Tensor, torch.Tensor | None, int]:
        """One optimizer step (1-based ``step``): (mean loss, gradient norm, examples or tokens seen)."""
        config = self.config
        total = torch.zeros((), device=self.env.device)
        seen = 0
        for micro in range(config.grad_accum):
            batch = self.objective.batch(
                torch.Generator().manual_seed(batch_seed(config.seed, step, micro)), config.batch_size
            )
            seen += self.objective.count(batch)
            batch = self._to_device(batch)
            with dist.gradient_sync(self.wrapped, self.strategy, sync=micro == config.grad_accum - 1):
                with self._autocast():
                    loss = self.objective.loss(self.step_model, batch)
                self.scaler.scale(loss / config.grad_accum).backward()
            total += loss.detach().float()
        norm = None
        if config.clip_grad is not None:
            self.scaler.unscale_(self.optimizer)
            norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), config.clip_grad)
            norm = norm.full_tensor() if hasattr(norm, "full_tensor") else norm
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        return total / config.grad_accum, norm, seen

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Held-out metrics over the fixed evaluation batches, summed over all processes."""
        self.model.eval()
        sums: dict[str, torch.Tensor] = {}
        try:
            for batch in self.eval_set:
                with self._autocast():
                    parts = self.objective.metrics(self.model, self._to_device(batch))
                for name, (total, count) in parts.items():
                    pair = torch.stack([total.double().to(self.env.device), count.double().to(self.env.device)])
                    sums[name] = sums.get(name, 0) + pair
        finally:
            self.model.train()
        out = {}
        for name, pair in sums.items():
            total, count = dist.all_reduce_sum(pair, self.env).tolist()
            out[name] = total / count if count else float("nan")
        if "loss" in out and self.objective.unit == "tokens" and self.objective_name == "causal_lm":
            out["perplexity"] = perplexity(out["loss"])
        return out

    def save(self, step: int, eval_metrics: dict[str, float]) -> Path | None:
        """Write a checkpoint of ``step``; weights that hold NaN or inf stop the run instead (never saved)."""
        model_state, optimizer_state = dist.full_state(self.wrapped, self.optimizer, self.env)
        stored = {k: v for k, v in model_state.items() if k not in self.aliases}  # a tied tensor counts once
        bad = dist.broadcast_object(ckpt.nonfinite_tensors(stored) if self.env.is_main else None, self.env)
        if bad:
            kept = self.last_checkpoint.name if self.last_checkpoint else "none was written"
            raise TrainError(
                f"the weights became non-finite by step {step} ({len(bad)} of {len(stored) or '?'} tensors hold "
                f"nan or inf, e.g. {bad[0]}); training stopped without saving. The last good checkpoint is kept "
                f"({kept}). Try a lower train.lr, train.clip_grad, or precision fp32."
            )
        rng = {
            "cpu": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state(self.env.device) if self.env.device.type == "cuda" else None,
        }
        rngs = dist.gather_objects(rng, self.env)
        path = None
        if self.env.is_main:
            path = ckpt.write_checkpoint(
                self.run_dir,
                step,
                recipe=self.recipe,
                model_state=model_state,
                optimizer_state=optimizer_state,
                trainer_state={
                    "step": step,
                    "scheduler": self.scheduler.state_dict(),
                    "scaler": self.scaler.state_dict() if self.scaler.is_enabled() else None,
                    "rng": rngs,
                },
                tokenizer=self.tokenizer,
                info=self._info(eval_metrics),
                aliases=self.aliases,
                keep=self.config.keep_checkpoints,
            )
            if self.start_pending:
                self._write_start()
        self.start_pending = False
        dist.barrier(self.env)
        return path

    def _info(self, eval_metrics: dict[str, float]) -> dict[str, Any]:
        info: dict[str, Any] = {
            "recipe": self.recipe.name,
            "objective": self.objective_name,
            "data": str(self.data_path) if self.data_path else None,
            "data_description": self.objective.description,
            "labels": self.objective.labels,
            "seq_len": self.seq_len,
            "world_size": self.env.world_size,
            "strategy": self.strategy,
            "init_from": str(self.init_from) if self.init_from else None,
            "eval": eval_metrics,
        }
        images = getattr(self.objective, "images", None)
        if images is not None:
            info["image_mean"], info["image_std"] = images.mean, images.std
        return info

    # ------------------------------------------------------------------------------------------ run

    def run(self) -> TrainResult:
        """Train to ``train.steps``; Ctrl-C raises ``TrainInterrupted`` (see the module's docstring)."""
        with self._deferred_interrupt():
            try:
                return self._run()
            except TrainInterrupted:
                raise
            except KeyboardInterrupt:  # a second Ctrl-C, or one the loop could not defer: no checkpoint
                raise self._interrupted(written=False) from None

    @contextlib.contextmanager
    def _deferred_interrupt(self) -> Iterator[None]:
        """While the loop runs, a first Ctrl-C asks it to stop after the step under way; a second one (the
        default handler again) stops at once. Only one process on its main thread, with Python's own
        handler in place, defers: under torchrun every rank would have to stop at the same step."""
        usable = (
            not self.env.active
            and threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        )
        if not usable:
            yield
            return

        def ask_to_stop(signum: int, frame: Any) -> None:
            self.stop_requested = True
            signal.signal(signal.SIGINT, signal.default_int_handler)
            with contextlib.suppress(Exception):  # a display that fails must not break the step under way
                message = "Ctrl-C: stopping after this step, with a checkpoint (press Ctrl-C again to stop at once)"
                self._emit("notice", self.done_step, message=message)

        signal.signal(signal.SIGINT, ask_to_stop)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, signal.default_int_handler)

    def _interrupted(self, *, written: bool) -> TrainInterrupted:
        reference = self.start.reference if self.start is not None else None
        return TrainInterrupted(
            run_dir=self.run_dir,
            step=self.done_step,
            total=self.config.steps,
            checkpoint=ckpt.latest_checkpoint(self.run_dir) if self.run_dir.exists() else None,
            written=written,
            recipe=reference or self.recipe.name,
        )

    def _run(self) -> TrainResult:
        config, env = self.config, self.env
        per_step = describe_batch(self.objective, config.batch_size, config.grad_accum, self.seq_len)
        self._emit(
            "start",
            self.start_step,
            model=self.model,
            recipe=self.recipe,
            run_dir=str(self.run_dir),
            device=str(env.device),
            precision=dtype_name(self.amp_dtype or torch.float32),
            strategy=self.strategy,
            world_size=env.world_size,
            objective=self.objective_name,
            generates=self.objective.generates,
            seq_len=self.seq_len if needs_tokenizer(self.objective_name) else None,  # None: images
            data=self.objective.description,
            unit=self.objective.unit,
            **per_step,
        )
        started = time.perf_counter()
        pending: list[tuple[int, torch.Tensor, torch.Tensor | None, float]] = []
        window_start, window_seen = time.perf_counter(), 0
        last_loss: float | None = None
        eval_metrics: dict[str, float] = {}
        step = self.start_step
        for step in range(self.start_step + 1, config.steps + 1):
            lr = self.optimizer.param_groups[0]["lr"]  # the rate this step uses, as the schedule set it
            loss, norm, seen = self.train_step(step)
            self.done_step = step
            pending.append((step, loss, norm, lr))
            window_seen += seen
            last = step == config.steps
            do_eval = last or (config.eval_interval and step % config.eval_interval == 0)
            do_save = last or (config.checkpoint_interval and step % config.checkpoint_interval == 0)
            if step % config.log_interval == 0 or do_eval or do_save:
                elapsed = time.perf_counter() - window_start
                last_loss = self._flush(pending, window_seen, elapsed, started)
                pending, window_start, window_seen = [], time.perf_counter(), 0
            if do_eval:
                eval_metrics = self.evaluate()
                self._record(
                    {"split": "eval", "step": step, **eval_metrics, "elapsed_s": time.perf_counter() - started}
                )
                self._emit("eval", step, metrics=eval_metrics)
            if do_save:
                self.last_checkpoint = self.save(step, eval_metrics) or self.last_checkpoint
                self._emit("checkpoint", step, path=str(self.last_checkpoint))
            if self.stop_requested and not last:  # a first Ctrl-C: log, checkpoint and stop at this step
                if pending:
                    last_loss = self._flush(pending, window_seen, time.perf_counter() - window_start, started)
                    pending = []
                if not do_save:
                    self.last_checkpoint = self.save(step, eval_metrics) or self.last_checkpoint
                    self._emit("checkpoint", step, path=str(self.last_checkpoint))
                raise self._interrupted(written=True)
        seconds = time.perf_counter() - started
        self._emit("end", step, seconds=seconds, loss=last_loss, eval=eval_metrics, run_dir=str(self.run_dir))
        return TrainResult(self.run_dir, step, last_loss, eval_metrics, seconds, self.last_checkpoint, self.model)

    def _flush(
        self,
        pending: list[tuple[int, torch.Tensor, torch.Tensor | None, float]],
        seen: int,
        elapsed: float,
        started: float,
    ) -> float:
        """Move the losses (and gradient norms) of the last steps to the host at once, stop on NaN/inf, log
        the newest."""
        losses = dist.all_reduce_mean(torch.stack([loss for _, loss, _, _ in pending]), self.env).tolist()
        # A loss scaler (fp16) skips the steps whose gradients overflow: only without one is inf a failure.
        norms = [(s, n) for s, _, n, _ in pending if n is not None] if not self.scaler.is_enabled() else []
        norm_values = torch.stack([n.float() for _, n in norms]).tolist() if norms else []
        checks = [(s, "loss", v) for (s, _, _, _), v in zip(pending, losses, strict=True)]
        checks += [(s, "gradient norm", v) for (s, _), v in zip(norms, norm_values, strict=True)]
        for step, what, value in sorted(checks, key=lambda c: c[0]):
            if not math.isfinite(value):
                kept = self.last_checkpoint.name if self.last_checkpoint else "none was written"
                raise TrainError(
                    f"the {what} became {value} at step {step}; training stopped without saving. The last good "
                    f"checkpoint is kept ({kept}). Try a lower train.lr, train.clip_grad, or precision fp32."
                )
        step, _, norm, lr = pending[-1]
        unit = self.objective.unit
        record = {
            "split": "train",
            "step": step,
            "loss": losses[-1],
            "lr": lr,
            "grad_norm": float(norm) if norm is not None else None,
            f"{unit}_per_s": seen / elapsed if elapsed > 0 else None,
            "elapsed_s": time.perf_counter() - started,
        }
        if self.env.device.type == "cuda":  # the peak of this log window, then a new window
            record["peak_memory_bytes"] = torch.cuda.max_memory_allocated(self.env.device)
            torch.cuda.reset_peak_memory_stats(self.env.device)
        self._record(record)
        remaining = self.config.steps - step
        throughput = {"unit": unit, "per_s": record[f"{unit}_per_s"], "eta_s": remaining * elapsed / len(pending)}
        self._emit("step", step, **record, **throughput)
        return losses[-1]

    def _record(self, record: dict[str, Any]) -> None:
        if self.metrics is not None:
            self.metrics.write(record)

    def close(self) -> None:
        if self.metrics is not None:
            self.metrics.close()
        dist.teardown(self.env)
