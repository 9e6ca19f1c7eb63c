"""The ``train:`` section of a recipe: how to train the model, validated like the rest of the recipe.

Pure pydantic (no torch), part of the recipe's schema (the CLI imports ``zoo.recipe`` at startup); ``zoo.train``
trains by it. Every field has a default, so a recipe without a ``train:`` section trains with these.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from zoo.limits import MAX_SEED, MAX_SIZE

Objective = Literal[
    "auto", "causal_lm", "masked_lm", "classification", "image_classification", "seq2seq", "contrastive"
]
Precision = Literal["auto", "fp32", "bf16", "fp16"]
Parallel = Literal["auto", "ddp", "fsdp"]
Checkpointing = Literal["none", "every", "every_k", "attention"]
Sharding = Literal["full", "hybrid"]
LORA_KINDS = ("attention", "ffn", "all")
"""The kinds of projection ``train.lora.targets`` names besides projection names (``q_proj``...)."""


class LoRAConfig(BaseModel):
    """Low-rank adapters (``zoo.lora``): the base weights are frozen, and each targeted linear layer learns
    ``(alpha / rank) * B @ A`` beside its weight."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    rank: int = Field(8, ge=1, le=MAX_SIZE, description="Rank r of each adapter (A: r x in, B: out x r).")
    alpha: float = Field(16.0, gt=0, description="Scale numerator: the adapter adds (alpha / rank) * B @ A.")
    dropout: float = Field(0.0, ge=0, lt=1, description="Dropout on the adapter's input while training.")
    targets: list[str] = Field(
        default_factory=lambda: ["attention"],
        min_length=1,
        description="Which linears to adapt: attention, ffn, all, or projection names (q_proj, v_proj, ...), as "
        "the components declare them adaptable.",
    )

    @model_validator(mode="before")
    @classmethod
    def _one_target(cls, data: object) -> object:
        if isinstance(data, dict) and isinstance(data.get("targets"), str):  # targets: attention
            data = {**data, "targets": [t for t in data["targets"].replace("+", ",").split(",") if t.strip()]}
        return data

    @model_validator(mode="after")
    def _names(self) -> LoRAConfig:
        for target in self.targets:
            if not target.strip() or not target.replace("_", "").replace(".", "").isalnum():
                raise ValueError(
                    f"targets: {target!r} is not a projection name; give {', '.join(LORA_KINDS)} or names like q_proj"
                )
        return self


class MeshConfig(BaseModel):
    """The device mesh of a torchrun run: ``replicate x shard x tensor`` processes, tensor innermost (the ranks of
    one tensor-parallel group are neighbours, on one node). ``replicate x shard`` is the data-parallel degree: each
    of those groups takes its slice of every batch. ``shard > 1``: FSDP2 shards weights, gradients and optimizer
    state over ``shard`` processes (with ``replicate > 1``: HSDP); ``tensor > 1``: each block's projections split
    over ``tensor`` processes, as each component declares (``zoo.train.tensor``)."""

    model_config = ConfigDict(extra="forbid")

    replicate: int = Field(1, ge=1, le=MAX_SIZE, description="Data-parallel replicas (DDP, or HSDP's replicas).")
    shard: int = Field(1, ge=1, le=MAX_SIZE, description="Processes FSDP2 shards weights and optimizer state over.")
    tensor: int = Field(1, ge=1, le=MAX_SIZE, description="Processes each block's projections split over (TP).")
    sequence: bool = Field(
        False,
        description="With tensor > 1: each block's norms, dropout and residual stream hold 1/tensor of the "
        "sequence (sequence parallelism); attention and FFN gather it whole.",
    )

    @model_validator(mode="after")
    def _sequence_needs_tensor(self) -> MeshConfig:
        if self.sequence and self.tensor == 1:
            raise ValueError("sequence: true splits the sequence over the tensor-parallel ranks: set tensor > 1")
        return self

    @property
    def world_size(self) -> int:
        return self.replicate * self.shard * self.tensor

    def __str__(self) -> str:
        sequence = ", sequence: true" if self.sequence else ""
        return f"{{replicate: {self.replicate}, shard: {self.shard}, tensor: {self.tensor}{sequence}}}"


class TrainConfig(BaseModel):
    """Optimiser, schedule, batch, precision and bookkeeping of a training run."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # inf / nan: never a valid setting

    objective: Objective = Field(
        "auto",
        description="What to learn; auto follows the architecture and head: decoder -> causal_lm, encoder with an "
        "mlm head -> masked_lm, encoder with a classification head -> classification, vit -> "
        "image_classification, encoder-decoder -> seq2seq, dual-encoder -> contrastive.",
    )
    data: str | None = Field(
        None,
        description="Text file, folder of .txt files, .tsv file (label<TAB>text, source<TAB>target) or image "
        "folder (one subfolder per class). None: the embedded data of the objective.",
    )
    tokenizer: Literal["byte", "bpe"] = Field(
        "byte", description="byte: UTF-8 bytes (vocab 256). bpe: byte-level BPE trained on the data (vocab_size)."
    )
    task: Literal["reverse", "sort", "copy"] = Field(
        "reverse", description="The embedded seq2seq task (encoder-decoder models without --data)."
    )
    steps: int = Field(1000, ge=1, le=MAX_SIZE, description="Optimizer steps.")
    batch_size: int = Field(
        16, ge=1, le=MAX_SIZE, description="Sequences (or images) per micro-step, over all processes together."
    )
    seq_len: int | None = Field(
        None, ge=2, le=MAX_SIZE, description="Tokens per training sequence (seq2seq: longest source); default max_len."
    )
    grad_accum: int = Field(
        1, ge=1, le=MAX_SIZE, description="Micro-steps whose gradients add up to one optimizer step."
    )
    lr: float = Field(1e-3, gt=0, description="Peak learning rate (after warmup).")
    min_lr_ratio: float = Field(0.1, ge=0, le=1, description="Learning rate at the end of the cosine, / lr.")
    warmup_steps: int = Field(
        100, ge=0, le=MAX_SIZE, description="Steps of linear warmup from lr / warmup_steps to lr."
    )
    weight_decay: float = Field(
        0.1, ge=0, description="AdamW decay of Linear and Conv weights; never norms, biases or embeddings."
    )
    betas: tuple[float, float] = Field((0.9, 0.95), description="AdamW beta1, beta2.")
    eps: float = Field(1e-8, gt=0, description="AdamW epsilon.")
    clip_grad: float | None = Field(1.0, gt=0, description="Clip the global gradient norm to this; null: no clip.")
    precision: Precision = Field(
        "auto", description="fp32, bf16 (autocast), fp16 (autocast + loss scaling); auto: bf16 on CUDA, fp32 on CPU."
    )
    compile: bool = Field(False, description="Run the model through torch.compile.")
    parallel: Parallel | MeshConfig = Field(
        "auto",
        description="Under torchrun: ddp, or fsdp (FSDP2) for models too big for one GPU; auto chooses; or the "
        "device mesh {replicate: R, shard: S, tensor: T}, R x S x T = the number of processes.",
    )
    activation_checkpointing: Checkpointing = Field(
        "none",
        description="Recompute activations in the backward instead of keeping them: none; every block (only its "
        "input is kept); every_k: blocks 0, k, 2k... (k = checkpoint_every); attention: the attentions only "
        "(selective). Same losses and gradients, less memory, about one more forward pass of what is recomputed.",
    )
    checkpoint_every: int | None = Field(
        None, ge=1, le=MAX_SIZE, description="every_k: checkpoint every this many blocks (k); only with every_k."
    )
    fsdp_sharding: Sharding = Field(
        "full",
        description="fsdp: full shards weights, gradients and optimizer state over all processes; hybrid shards "
        "them within a node (LOCAL_WORLD_SIZE processes) and replicates across nodes (HSDP).",
    )
    fsdp_offload: bool = Field(
        False,
        description="fsdp: keep the sharded weights, gradients and optimizer state in CPU memory (FSDP2 "
        "CPUOffloadPolicy; the optimizer steps on the CPU); the GPU holds the gathered layers and activations.",
    )
    mask_prob: float = Field(0.15, gt=0, lt=1, description="Masked LM: share of tokens to predict (80/10/10).")
    val_fraction: float = Field(0.05, gt=0, lt=0.5, description="Share of the data held out for evaluation.")
    eval_interval: int = Field(
        100, ge=0, le=MAX_SIZE, description="Evaluate every this many steps (and at the end); 0: end only."
    )
    eval_batches: int = Field(8, ge=1, le=MAX_SIZE, description="Batches per evaluation.")
    log_interval: int = Field(10, ge=1, le=MAX_SIZE, description="Write a metrics record every this many steps.")
    checkpoint_interval: int = Field(
        500, ge=0, le=MAX_SIZE, description="Checkpoint every this many steps (and at the end)."
    )
    keep_checkpoints: int = Field(
        2, ge=1, le=MAX_SIZE, description="Complete checkpoints kept; older ones are deleted."
    )
    seed: int = Field(0, ge=0, le=MAX_SEED, description="Seeds the model's initialisation, the data order and dropout.")
    lora: LoRAConfig | None = Field(
        None,
        description="Train low-rank adapters on the targeted linears instead of every weight (zoo.lora); "
        "null: full training.",
    )

    @model_validator(mode="after")
    def _betas_in_range(self) -> TrainConfig:
        for i, beta in enumerate(self.betas):
            if not 0 <= beta < 1:
                raise ValueError(f"betas[{i}] ({beta}) must be in [0, 1)")
        return self

    @model_validator(mode="after")
    def _memory_options_fit(self) -> TrainConfig:
        if self.activation_checkpointing == "every_k" and self.checkpoint_every is None:
            raise ValueError("activation_checkpointing every_k needs checkpoint_every (k): e.g. checkpoint_every: 2")
        if self.activation_checkpointing != "every_k" and self.checkpoint_every is not None:
            raise ValueError(
                f"checkpoint_every ({self.checkpoint_every}) applies to activation_checkpointing: every_k only, "
                f"not {self.activation_checkpointing}: set activation_checkpointing: every_k or drop checkpoint_every"
            )
        if isinstance(self.parallel, MeshConfig) and self.fsdp_sharding != "full":
            raise ValueError(
                "fsdp_sharding applies to parallel: fsdp; a mesh says it itself: {replicate: nodes, shard: processes "
                "per node} is HSDP"
            )
        if isinstance(self.parallel, MeshConfig) and self.fsdp_offload and self.parallel.shard == 1:
            raise ValueError(f"fsdp_offload offloads FSDP2's shards, and parallel {self.parallel} has none: shard > 1")
        if self.parallel == "ddp" and (self.fsdp_sharding != "full" or self.fsdp_offload):
            raise ValueError(
                "fsdp_sharding and fsdp_offload apply to parallel: fsdp (or auto), not ddp: set parallel: fsdp"
            )
        return self
