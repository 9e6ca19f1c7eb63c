"""A zoo model exported for ``trust_remote_code`` (written by ``zoo export``; self-contained: it imports torch and
transformers, never zoo).

The network is a ``torch.export`` program per entry point (``forward.pt2``; an encoder-decoder has ``encode.pt2``
and ``decode.pt2``) that takes the weights as inputs: the weights live once, in ``model.safetensors``, loaded by
``from_pretrained`` into this model's parameters (``zoo.<name>``). Generation recomputes the whole sequence at
every step (no key/value cache: the programs have none), so ``generate`` gives zoo's greedy tokens, slower than
zoo's cached decoding.
"""

import os

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers.modeling_outputs import (
    BaseModelOutput,
    BaseModelOutputWithPooling,
    CausalLMOutputWithPast,
    ImageClassifierOutput,
    MaskedLMOutput,
    Seq2SeqLMOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from transformers.utils import cached_file

from .configuration_zoo import ZooConfig

HUB_ARGUMENTS = ("cache_dir", "force_download", "proxies", "token", "revision", "local_files_only", "subfolder")


def _weights(shapes: dict, dtype: torch.dtype) -> nn.Module:
    """Empty parameters under zoo's names (``blocks.0.attention.q_proj.weight``), as nested modules."""
    root = nn.Module()
    for name, (shape, _) in shapes.items():
        *path, leaf = name.split(".")
        module = root
        for part in path:
            if not hasattr(module, part):
                module.add_module(part, nn.Module())
            module = getattr(module, part)
        module.register_parameter(leaf, nn.Parameter(torch.empty(shape, dtype=dtype), requires_grad=False))
    return root


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name.removeprefix("torch."))


class ZooPreTrainedModel(PreTrainedModel):
    config_class = ZooConfig
    base_model_prefix = "zoo"
    supports_gradient_checkpointing = False
    _no_split_modules: list = []

    def __init__(self, config: ZooConfig) -> None:
        super().__init__(config)
        dtypes = {d for _, d in config.zoo_parameters.values()}
        self.zoo = _weights(config.zoo_parameters, _dtype(dtypes.pop()) if len(dtypes) == 1 else torch.float32)
        self._programs: dict = {}
        self._placed: dict = {}
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        """Every weight comes from the checkpoint."""

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        model = super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        hub = {k: kwargs[k] for k in HUB_ARGUMENTS if kwargs.get(k) is not None}
        model.load_programs(pretrained_model_name_or_path, **hub)
        return model

    def save_pretrained(self, save_directory, *args, **kwargs):
        """transformers' save, and the programs beside the weights (a folder ``from_pretrained`` loads again)."""
        super().save_pretrained(save_directory, *args, **kwargs)
        for name, program in self._programs.items():
            torch.export.save(program, os.path.join(str(save_directory), f"{name}.pt2"))

    def load_programs(self, path, **hub) -> None:
        """Read the ``torch.export`` programs (``<name>.pt2``) from the folder or Hub repository ``path``."""
        for name in self.config.zoo_programs:
            self._programs[name] = torch.export.load(cached_file(str(path), f"{name}.pt2", **hub))
        self._placed = {}

    def _run(self, name: str, *inputs: torch.Tensor):
        """Run the program ``name`` on ``inputs`` with this model's weights, on the inputs' device."""
        if name not in self._programs:
            raise RuntimeError(f"the program {name}.pt2 is not loaded: load this model with from_pretrained")
        device = inputs[0].device
        key = (name, str(device))
        if key not in self._placed:
            program = self._programs[name]
            if device.type != "cpu":
                program = torch.export.passes.move_to_device_pass(program, device)
            self._placed[key] = program.module()
        weights = {n: p.to(device=device, dtype=_dtype(d)) for (n, p), (_, d) in self._weights()}
        return self._placed[key](weights, *inputs)

    def _weights(self):
        parameters = dict(self.zoo.named_parameters())
        return [((n, parameters[n]), (n, d)) for n, (_, d) in sorted(self.config.zoo_parameters.items())]


def _loss(logits: torch.Tensor, labels: torch.Tensor | None) -> torch.Tensor | None:
    if labels is None:
        return None
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=-100)


def _mask(ids: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    return torch.ones(ids.shape, dtype=torch.long, device=ids.device) if mask is None else mask.long()


class ZooForCausalLM(ZooPreTrainedModel, GenerationMixin):
    """Token ids (N, L) and attention mask -> next-token logits (N, L, V); positions count from each row's first
    real token (left padding), as zoo's generation numbers them."""

    _is_stateful = True  # no cache to roll back: generation recomputes

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, labels=None, **kwargs):
        mask = _mask(input_ids, attention_mask)
        if position_ids is None:
            position_ids = (mask.cumsum(dim=1) - 1).clamp(min=0)
        logits = self._run("forward", input_ids, mask, position_ids.expand_as(input_ids).contiguous())
        loss = None if labels is None else _loss(logits[:, :-1], labels[:, 1:])
        return CausalLMOutputWithPast(loss=loss, logits=logits)

    def prepare_inputs_for_generation(self, input_ids, attention_mask=None, **kwargs):
        return {"input_ids": input_ids, "attention_mask": attention_mask}

    def _update_model_kwargs_for_generation(self, outputs, model_kwargs, is_encoder_decoder=False, num_new_tokens=1):
        mask = model_kwargs.get("attention_mask")
        if mask is not None:
            model_kwargs["attention_mask"] = torch.cat([mask, mask.new_ones((mask.shape[0], num_new_tokens))], -1)
        return model_kwargs


class _Encoder(nn.Module):
    """What ``get_encoder`` returns: the encoder program over the parent's weights."""

    def __init__(self, parent: ZooPreTrainedModel) -> None:
        super().__init__()
        self.__dict__["parent"] = parent  # not a submodule: no cycle in the module tree

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        hidden = self.parent._run("encode", input_ids, _mask(input_ids, attention_mask))
        return BaseModelOutput(last_hidden_state=hidden)


class ZooForConditionalGeneration(ZooPreTrainedModel, GenerationMixin):
    """Source ids (N, S) and target ids (N, T) -> next-token logits over the target (N, T, V)."""

    _is_stateful = True

    def get_encoder(self, *args, **kwargs) -> nn.Module:
        return _Encoder(self)

    def shift_right(self, labels: torch.Tensor) -> torch.Tensor:
        start = labels.new_full((labels.shape[0], 1), self.config.decoder_start_token_id)
        shifted = torch.cat([start, labels[:, :-1]], dim=1)
        return shifted.masked_fill(shifted == -100, self.config.pad_token_id or 0)

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        decoder_input_ids=None,
        decoder_attention_mask=None,
        encoder_outputs=None,
        labels=None,
        **kwargs,
    ):
        if encoder_outputs is None:
            encoder_outputs = self.get_encoder()(input_ids, attention_mask)
        hidden = encoder_outputs[0] if isinstance(encoder_outputs, (tuple, list)) else encoder_outputs.last_hidden_state
        if attention_mask is None:
            attention_mask = torch.ones(hidden.shape[:2], dtype=torch.long, device=hidden.device)
        if decoder_input_ids is None:
            decoder_input_ids = self.shift_right(labels)
        decoder_mask = _mask(decoder_input_ids, decoder_attention_mask)
        logits = self._run("decode", decoder_input_ids, hidden, attention_mask.long(), decoder_mask)
        return Seq2SeqLMOutput(loss=_loss(logits, labels), logits=logits, encoder_last_hidden_state=hidden)

    def prepare_inputs_for_generation(self, input_ids, attention_mask=None, encoder_outputs=None, **kwargs):
        return {"decoder_input_ids": input_ids, "attention_mask": attention_mask, "encoder_outputs": encoder_outputs}

    def _update_model_kwargs_for_generation(self, outputs, model_kwargs, is_encoder_decoder=True, num_new_tokens=1):
        return model_kwargs


class _EncoderHeads(ZooPreTrainedModel):
    """An encoder: token ids (N, L), attention mask and token types -> its head's output."""

    def _logits(self, input_ids, attention_mask, token_type_ids):
        inputs = [input_ids, _mask(input_ids, attention_mask)]
        if "token_type_ids" in self.config.zoo_inputs:
            inputs.append(torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids)
        return self._run("forward", *inputs)


class ZooForMaskedLM(_EncoderHeads):
    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, labels=None, **kwargs):
        logits = self._logits(input_ids, attention_mask, token_type_ids)
        return MaskedLMOutput(loss=_loss(logits, labels), logits=logits)


class ZooForSequenceClassification(_EncoderHeads):
    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, labels=None, **kwargs):
        logits = self._logits(input_ids, attention_mask, token_type_ids)
        return SequenceClassifierOutput(loss=_loss(logits, labels), logits=logits)


class ZooForTokenClassification(_EncoderHeads):
    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, labels=None, **kwargs):
        logits = self._logits(input_ids, attention_mask, token_type_ids)
        return TokenClassifierOutput(loss=_loss(logits, labels), logits=logits)


class ZooModel(_EncoderHeads):
    """An encoder with a pooler head: the pooled features (N, E) as ``pooler_output``."""

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, **kwargs):
        pooled = self._logits(input_ids, attention_mask, token_type_ids)
        return BaseModelOutputWithPooling(pooler_output=pooled)


class ZooForImageClassification(ZooPreTrainedModel):
    """Images (N, C, H, W) -> class logits (N, num_labels)."""

    main_input_name = "pixel_values"

    def forward(self, pixel_values=None, labels=None, **kwargs):
        logits = self._run("forward", pixel_values.to(_dtype(self.config.zoo_dtype)))
        return ImageClassifierOutput(loss=_loss(logits, labels), logits=logits)
