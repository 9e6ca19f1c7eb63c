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

This module holds ``train()`` and the ``Trainer``'s setup, steps and loop; the trainer's checkpoints and
resume checks are in ``resume``, its Ctrl-C handling in ``interrupt``, its events and metrics records in
``progress``, run folders in ``rundir`` and the optimizer's settings in ``optim``.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from zoo.architectures.blocks import set_activation_checkpointing
from zoo.dtypes import dtype_name
from zoo.errors import TrainError
from zoo.recipe import Recipe, load_recipe, positions_fit

from . import checkpoint as ckpt
from . import distributed as dist
from .events import TrainEvent, TrainResult
from .interrupt import Interruptible, TrainInterrupted
from .lora import adapt
from .metrics import MetricsWriter
from .objectives import (
    Objective,
    check_trainable,
    describe_batch,
    loss_weight,
    make_objective,
    needs_tokenizer,
    objective_name,
    perplexity,
)
from .optim import autocast, autocast_dtype, lr_factor, parameter_groups
from .progress import Reporting
from .resume import Checkpointing
from .rundir import RUNS_DIR, Start, check_run_name, default_run_dir
from .tensor import WholeLogits, clip_grad_norm, loss_context, place
from .tokenizing import Tokenizing
from .transfer import Transfer, init_from_folder

__all__ = [
    "INIT_AND_RESUME",
    "RUNS_DIR",
    "Start",
    "TrainEvent",
    "TrainInterrupted",
    "TrainResult",
    "Trainer",
    "autocast",
    "autocast_dtype",
    "batch_seed",
    "check_run_name",
    "check_sequence_length",
    "default_run_dir",
    "lr_factor",
    "parameter_groups",
    "train",
]

INIT_AND_RESUME = (
    "--init-from starts a new run from imported weights and --resume continues a run from its own checkpoint: "
    "give one of them (a run started with --init-from resumes with --resume alone)"
)


def train(
    recipe: str | Path | Mapping[str, Any] | Recipe,
    *,
    data: str | Path | None = None,
    out: str | Path | None = None,
    device: str = "auto",
    resume: bool = False,
    allow_changes: bool = False,
    init_from: str | Path | None = None,
    force: bool = False,
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
        force: ``out`` holds something else than a run (files of yours): replace it whole. Without it, such a
            folder is refused; a run folder needs ``resume`` (or another ``out``) either way.
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
        force=force,
    )
    try:
        return trainer.run()
    finally:
        trainer.close()


def batch_seed(seed: int, step: int, micro: int) -> int:
    """A 63-bit seed for the batch of (seed, step, micro-step): independent streams, reproducible anywhere."""
    digest = hashlib.blake2b(f"{seed}/{step}/{micro}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def check_sequence_length(recipe: Recipe, seq_len: int, objective: str) -> None:
    """A training sequence must fit a positional table that has rows for ``max_len`` positions only."""
    longest = seq_len + 1 if objective == "seq2seq" else seq_len  # seq2seq targets carry an [eos]
    stack = "decoder" if objective == "seq2seq" else "encoder"  # the targets' table (decoder_max_len)
    if positions_fit(recipe, longest, stack) is not None:
        raise TrainError(
            f"train.seq_len ({seq_len}) needs {longest} positions, beyond the {recipe.positional.type} position "
            f"table of max_len {recipe.stack_max_len(stack)}: lower train.seq_len or raise max_len"
        )


class Trainer(Checkpointing, Interruptible, Reporting, Tokenizing):
    """One training run. ``train()`` is the way to use it; the pieces are methods to keep each short, those of
    checkpoints, Ctrl-C, reporting and the tokenizer in the mixins ``Checkpointing``, ``Interruptible``,
    ``Reporting`` and ``Tokenizing``."""

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
        force: bool = False,
    ) -> None:
        """``start``: how ``train()`` was called (None: ``recipe`` is the whole recipe, as given)."""
        self.finished = False  # run() reached its last step: close() may wait for the other ranks
        check_trainable(recipe)  # before the run folder is made
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
        groups = dist.data_groups(self.config.parallel, self.env)
        if self.config.batch_size % groups:
            raise TrainError(
                f"train.batch_size ({self.config.batch_size}) is the batch of all {groups} "
                f"{'processes' if groups == self.env.world_size else 'data-parallel groups (replicate x shard)'} "
                "together and must be divisible by their number"
            )
        self.resume_from = self._find_checkpoint(resume)
        self._claim_folder(force)
        self.lock = ckpt.RunLock(self.run_dir) if self.env.is_main else None  # one writer per run
        try:
            self._clean_leftovers()
            if self.resume_from is None and self.saved_start:  # killed before its first checkpoint: as it started
                init_from = init_from or self.saved_start.get("init_from")
                data = data or self.saved_start.get("data")
            self.init_from = Path(init_from) if init_from is not None else None
            if data is None:  # a resumed run reads what it was trained on unless told otherwise
                data = ckpt.read_info(self.resume_from).get("data") if self.resume_from else self.config.data
            self.data_path = Path(data) if data is not None else None
            self._check_schedule()
            self._build()
        except BaseException:
            if self.lock is not None:
                self.lock.release()
            raise

    # ------------------------------------------------------------------------------------------ setup

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
        self.aliases = ckpt.tied_aliases(adapt(self.model, self._emit))  # adapt: train.lora's adapters, rest frozen
        self.tokenizer = self._tokenizer()
        self.objective: Objective = make_objective(
            self.recipe, self.model, self.tokenizer, self.data_path, self.seq_len
        )
        self.layout = dist.choose_layout(self.model, env, config.parallel, sharding=config.fsdp_sharding)
        self.strategy, self.data_rank = self.layout.strategy, self.layout.data_rank(env.rank)
        if self.layout.tensor > 1 and config.lora is not None:
            raise TrainError("train.lora with tensor parallelism: train the adapters with tensor: 1")
        mesh = dist.device_mesh(env, self.layout)
        place(self.model, env, self.layout, mesh)  # on the device, split over the tensor dimension
        set_activation_checkpointing(self.model, config.activation_checkpointing, config.checkpoint_every)
        self.amp_dtype = autocast_dtype(config.precision, env.device)
        # FSDP2 shards in place (offloaded: shards in CPU memory), gathers weights in amp_dtype (see _autocast)
        self.wrapped = dist.wrap(
            self.model, env, self.layout, mesh=mesh, offload=config.fsdp_offload, param_dtype=self.amp_dtype
        )
        mixed = self.layout.tensor > 1 and self.strategy == "none"  # split DTensors beside plain tensors
        self.optimizer = torch.optim.AdamW(
            parameter_groups(self.model, config.weight_decay),
            lr=config.lr,
            betas=config.betas,
            eps=config.eps,
            fused=env.device.type in ("cuda", "cpu") and not mixed,
            foreach=False if mixed else None,
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_factor)
        self.scaler = torch.amp.GradScaler(env.device.type, enabled=self.amp_dtype == torch.float16)
        self.step_model = torch.compile(self.wrapped) if config.compile else self.wrapped
        self.eval_model = WholeLogits(self.model) if self.layout.tensor > 1 else self.model
        if env.device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        self.start_step = 0
        if self.resume_from is not None:
            self._load(self.resume_from)
        else:
            torch.manual_seed(config.seed + 1 + self.data_rank)  # dropout streams differ per data group
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

    def _lr_factor(self, step: int) -> float:
        c = self.config
        return lr_factor(step, warmup=c.warmup_steps, total=c.steps, min_ratio=c.min_lr_ratio)

    # ------------------------------------------------------------------------------------------ steps

    def _to_device(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """This rank's slice of a global batch, on the device (pinned, asynchronous copies on CUDA)."""
        env = self.env
        if self.layout.data > 1:  # the ranks of a tensor-parallel group read the same slice
            batch = {k: v.tensor_split(self.layout.data)[self.data_rank] for k, v in batch.items()}
        if env.device.type == "cuda":
            return {k: v.pin_memory().to(env.device, non_blocking=True) for k, v in batch.items()}
        return batch

    def _autocast(self) -> contextlib.AbstractContextManager:
        """Autocast at the precision; none in fp32, nor under FSDP2, whose policy gathers low-precision weights."""
        if self.amp_dtype is None or self.strategy == "fsdp":
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
            weight = loss_weight(self.objective, batch, self.layout.data, self.data_rank)
            batch = self._to_device(batch)
            sync = micro == config.grad_accum - 1
            with dist.gradient_sync(self.wrapped, self.strategy, sync), loss_context(self.layout.tensor):
                with self._autocast():
                    loss = self.objective.loss(self.step_model, batch) * weight
                self.scaler.scale(loss / config.grad_accum).backward()
            total += loss.detach().float()
        norm = None
        if config.clip_grad is not None:
            self.scaler.unscale_(self.optimizer)
            if self.layout.tensor > 1:  # DTensors on two meshes (split and whole weights)
                norm = clip_grad_norm(list(self.model.parameters()), config.clip_grad)
            else:
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
                with self._autocast(), loss_context(self.layout.tensor):
                    parts = self.objective.metrics(self.eval_model, self._to_device(batch))
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
        self.finished = True
        self._emit("end", step, seconds=seconds, loss=last_loss, eval=eval_metrics, run_dir=str(self.run_dir))
        return TrainResult(self.run_dir, step, last_loss, eval_metrics, seconds, self.last_checkpoint, self.model)

    def close(self) -> None:
        try:
            if self.metrics is not None:
                self.metrics.close()
        finally:  # the run's hold and the process group end even if the last metrics cannot be written
            if getattr(self, "lock", None) is not None:
                self.lock.release()
            dist.teardown(self.env, finished=self.finished)
