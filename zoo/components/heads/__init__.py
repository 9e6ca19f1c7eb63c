"""Output heads: what a model turns its final hidden states (N, L, E) into.

Every head has ``forward(h, *, mask=None)`` (``mask``: (N, L) bool, True on real tokens) and
``loss(logits, labels)``; the model decides which positions the labels align with.

The package holds one file per head, its module and its config: ``lm``, ``masked_lm``, ``classification`` (with
the pooler it may apply, itself a head), ``token_classification``, ``embedding`` (sentence vectors), ``rtd``
(ELECTRA's discriminator), ``contrastive`` and ``siglip`` (a dual-encoder's joint heads); ``base`` holds what they
share (the loss, pooling, the dense ``Transform``).
"""

from __future__ import annotations

from zoo.hookspecs import hookimpl

from .base import Activation, Transform, _tying, cross_entropy, pool, transform_params
from .classification import (
    ClassificationHead,
    ClassificationHeadConfig,
    PatchMeanPooler,
    PatchMeanPoolerConfig,
    Pooler,
    PoolerConfig,
)
from .contrastive import ContrastiveHead, ContrastiveHeadConfig
from .embedding import EmbeddingHead, EmbeddingHeadConfig
from .lm import LMHead, LMHeadConfig
from .masked_lm import MaskedLMHead, MaskedLMHeadConfig
from .rtd import ReplacedTokenHead, ReplacedTokenHeadConfig
from .siglip import SiglipHead, SiglipHeadConfig
from .token_classification import TokenClassificationHead, TokenClassificationHeadConfig

__all__ = [
    "cross_entropy",
    "pool",
    "transform_params",
    "Activation",
    "Transform",
    "LMHead",
    "MaskedLMHead",
    "ClassificationHead",
    "Pooler",
    "TokenClassificationHead",
    "LMHeadConfig",
    "MaskedLMHeadConfig",
    "ClassificationHeadConfig",
    "TokenClassificationHeadConfig",
    "PoolerConfig",
    "ContrastiveHead",
    "ContrastiveHeadConfig",
    "PatchMeanPooler",
    "PatchMeanPoolerConfig",
    "EmbeddingHead",
    "ReplacedTokenHead",
    "ReplacedTokenHeadConfig",
    "SiglipHead",
    "SiglipHeadConfig",
    "EmbeddingHeadConfig",
    "_tying",
]


@hookimpl
def register_components(register):
    register("head", "lm", LMHead, LMHeadConfig)
    register("head", "mlm", MaskedLMHead, MaskedLMHeadConfig)
    register("head", "classification", ClassificationHead, ClassificationHeadConfig)
    register("head", "pooler", Pooler, PoolerConfig)
    register("head", "patch_mean", PatchMeanPooler, PatchMeanPoolerConfig)
    register("head", "embedding", EmbeddingHead, EmbeddingHeadConfig)
    register("head", "contrastive", ContrastiveHead, ContrastiveHeadConfig)
    register("head", "rtd", ReplacedTokenHead, ReplacedTokenHeadConfig)
    register("head", "siglip", SiglipHead, SiglipHeadConfig)
    register("head", "token_classification", TokenClassificationHead, TokenClassificationHeadConfig)
