"""The trainer's checkpoints: whether a run directory may be resumed (and with which changes), loading a
checkpoint's state, writing checkpoints and ``run.yaml``, and cleaning what a killed process left."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Any

import torch

from zoo.errors import CheckpointError, TrainError, ZooError
from zoo.files import WriteError, why_not_written

from . import checkpoint as ckpt
from . import distributed as dist
from . import sharded


class Checkpointing:
    """The trainer's resume checks, loading and saving (a mixin of ``zoo.train.loop.Trainer``, whose attributes
    it uses)."""

    def _find_checkpoint(self, resume: bool) -> Path | None:
        found = ckpt.latest_checkpoint(self.run_dir) if self.run_dir.exists() else None
        if found is not None and not resume:
            raise TrainError(
                f"{self.run_dir} already holds a run (checkpoint {found.name}): pass --resume to continue it, "
                "or --out for a new run directory"
            )
        if found is None and resume and self.saved_start is None:
            raise TrainError(
                f"--resume: {self.run_dir} holds no run to continue (no checkpoint, no {ckpt.START_FILE}); drop "
                "--resume to start a new run there, or name the run's folder with --out"
            )
        if found is None and resume:  # killed before its first checkpoint: run.yaml says how it was started
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

    def _claim_folder(self, force: bool) -> None:
        """Refuse a run directory that holds something else than a run (a run is refused or resumed by
        ``_find_checkpoint``); ``force`` replaces it whole (rank 0, before anything is written)."""
        d = self.run_dir
        if not d.is_dir() or (d / ckpt.CHECKPOINTS).exists() or (d / ckpt.START_FILE).exists():
            return
        held = sorted(p.name for p in d.iterdir() if not p.name.startswith("."))
        if not held:
            return
        if not force:
            listed = ", ".join(held[:5]) + (f" and {len(held) - 5} more" if len(held) > 5 else "")
            raise TrainError(
                f"{d} holds something else than a run ({listed}): pass --force (force=True) to replace it whole "
                "with this run, or choose another --out"
            )
        if self.env.is_main:
            shutil.rmtree(d)
            d.mkdir(parents=True)
        dist.barrier(self.env)

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

    def _load(self, path: Path) -> None:
        """Load a checkpoint of either format (``sharded.is_sharded``) into this run, whatever its processes."""
        is_sharded = sharded.is_sharded(path)
        if is_sharded:  # checked and outlined from its index; the shards are read into this run's own state dicts
            sharded.verify(path, self.env)
            model_state = sharded.model_outline(path)
        else:
            model_state = ckpt.read_model_state(path)
        ckpt.check_state_fits(self.model, model_state, path)
        if not is_sharded:
            ckpt.check_finite(model_state, path)
        optimizer_state, trainer_state = ckpt.read_training_state(path, verified=is_sharded)
        sizes = [len(group["params"]) for group in self.optimizer.param_groups]
        ckpt.check_training_state(path, optimizer_state, trainer_state, model_state, sizes)
        try:
            if is_sharded:
                sharded.load_shards(path, self.wrapped, self.optimizer, self.aliases, self.env)
            else:
                dist.load_full_state(self.wrapped, self.optimizer, model_state, optimizer_state, self.env)
            self.scheduler.load_state_dict(trainer_state["scheduler"])
            if trainer_state.get("scaler"):
                self.scaler.load_state_dict(trainer_state["scaler"])
        except ZooError:
            raise
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

    def save(self, step: int, eval_metrics: dict[str, float]) -> Path | None:
        """Write a checkpoint of ``step``; weights that hold NaN or inf stop the run instead (never saved).

        One process writes the whole state (``checkpoint.write_checkpoint``); several processes each write their
        shards of it into one temporary folder (``zoo.train.sharded``), which rank 0 then completes and renames.
        """
        if self.env.active:
            model_state, optimizer_state = sharded.sharded_state(self.wrapped, self.optimizer, self.aliases)
            bad, count = sharded.nonfinite_anywhere(model_state, self.env), len(model_state)
        else:
            model_state, optimizer_state = dist.full_state(self.wrapped, self.optimizer, self.env)
            stored = {k: v for k, v in model_state.items() if k not in self.aliases}  # a tied tensor counts once
            bad, count = ckpt.nonfinite_tensors(stored), len(stored)
        if bad:
            kept = self.last_checkpoint.name if self.last_checkpoint else "none was written"
            raise TrainError(
                f"the weights became non-finite by step {step} ({len(bad)} of {count or '?'} tensors hold "
                f"nan or inf, e.g. {bad[0]}); training stopped without saving. The last good checkpoint is kept "
                f"({kept}). Try a lower train.lr, train.clip_grad, or precision fp32."
            )
        rng = {
            "cpu": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state(self.env.device) if self.env.device.type == "cuda" else None,
        }
        rngs = dist.gather_objects(rng, self.env)
        tmp = self._write_shards(step, model_state, optimizer_state) if self.env.active else None
        path = None
        if self.env.is_main:
            path = ckpt.write_checkpoint(
                self.run_dir,
                step,
                recipe=self.recipe,
                model_state=None if tmp else model_state,
                optimizer_state=None if tmp else optimizer_state,
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
                tmp=tmp,
            )
            if self.start_pending:
                self._write_start()
        self.start_pending = False
        dist.barrier(self.env)
        return path

    def _write_shards(self, step: int, model_state: dict, optimizer_state: dict) -> Path:
        """Every process writes its shards into one new temporary folder (rank 0 makes it); a failure anywhere
        removes the folder and is a ``WriteError`` on every process."""
        made = ckpt.new_checkpoint_folder(self.run_dir, step) if self.env.is_main else None
        tmp = Path(dist.broadcast_object(str(made) if made else None, self.env))
        try:
            sharded.write_shards({"model": model_state, "optimizer": optimizer_state}, tmp, self.env)
        except OSError as exc:
            if self.env.is_main:
                shutil.rmtree(tmp, ignore_errors=True)
            final = self.run_dir / ckpt.CHECKPOINTS / ckpt.checkpoint_name(step)
            raise WriteError(
                f"{final} could not be written: {why_not_written(final, exc)}. The run keeps its last complete "
                "checkpoint: fix that, then zoo train --resume"
            ) from None
        return tmp

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
            **({"format": sharded.FORMAT, "mesh": sharded.mesh_of(self.layout, self.env)} if self.env.active else {}),
            "init_from": str(self.init_from) if self.init_from else None,
            "eval": eval_metrics,
        }
        images = getattr(self.objective, "images", None)
        if images is not None:
            info["image_mean"], info["image_std"] = images.mean, images.std
        return info
