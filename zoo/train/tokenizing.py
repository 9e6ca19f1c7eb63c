"""The trainer's tokenizer: the checkpoint's on resume, the imported model's, a BPE learned on the data, or bytes."""

from __future__ import annotations

from typing import Any

from zoo.errors import TrainError

from . import checkpoint as ckpt
from . import distributed as dist
from .objectives import needs_tokenizer
from .tokenizer import BPETokenizer, ByteTokenizer, Tokenizer


class Tokenizing:
    """The trainer's tokenizer (a mixin of ``zoo.train.loop.Trainer``, whose attributes it uses)."""

    def _tokenizer(self) -> Tokenizer | None:
        if not needs_tokenizer(self.objective_name):
            return None
        if self.resume_from is not None:
            tokenizer = ckpt.read_tokenizer(self.resume_from)
        elif self.transfer is not None and self.transfer.tokenizer is not None:
            tokenizer = self.transfer.tokenizer  # the ids the imported embeddings were trained on
        elif self.transfer is not None and self.transfer.imported and self.recipe.vocab_size != 256:
            raise self.transfer.no_tokenizer()  # its embeddings read another tokenizer's ids than bytes or a BPE's
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
