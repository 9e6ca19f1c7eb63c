"""Training checkpoints written directly (no training): a built model, its tokenizer and run.json, in seconds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import nn

from zoo.train import checkpoint as ckpt
from zoo.train.tokenizer import Tokenizer


def write_run(run_dir: Path, model: nn.Module, tokenizer: Tokenizer | None, *, step: int = 10, **info: Any) -> Path:
    """A run folder whose one complete checkpoint holds ``model``, ``tokenizer`` and ``info`` (objective,
    labels, ...) as ``zoo train`` writes them; returns the checkpoint folder."""
    return ckpt.write_checkpoint(
        run_dir,
        step,
        recipe=model.recipe,
        model_state=model.state_dict(),
        optimizer_state={"state": {}, "param_groups": []},
        trainer_state={"step": step, "scheduler": {}, "rng": {}},
        tokenizer=tokenizer,
        info=info,
        aliases=ckpt.tied_aliases(model),
        keep=1,
    )
