"""MPNet (``MPNetModel``, ``ForMaskedLM``, ``For{Sequence,Token}Classification``): RoBERTa without token types, plus
T5's bias over token indices for all layers (``learned_relative``); positions past token id 1 whatever the pad id;
classifiers drop out at ``hidden_dropout_prob``. all-mpnet-base-v2 is an MPNetModel, mean-pooled (``--embed``)."""

from ._common import renamed
from .mapping import Rule
from .roberta import ROBERTA, heads
from .rows_classic import bert_classes, fixed_pad, past_pad
from .rows_encoder import head_class, hidden_dropout_heads
from .table import Fixed, Refused

HEADS = bert_classes("MPNet")
OLD, NEW = "self.query self.key self.value output.dense output.LayerNorm", "attn.q attn.k attn.v attn.o LayerNorm"
LAYERS = {f".attention.{a}.": f".attention.{b}." for a, b in zip(OLD.split(), NEW.split(), strict=True)}
NAMES = {"roberta.embeddings.token_type": None, "roberta.": "mpnet."}
BODY = renamed(ROBERTA.rules, NAMES, {"positional.": "positional.absolute."}, parts=LAYERS)
BIAS = Rule("mpnet.encoder.relative_attention_bias.weight", "positional.relative.relative_attention_bias.weight")
POSITIONAL = {"type": "learned_relative", "num_buckets": 32, "max_distance": 128, "relative_to": "index"}
BUCKETS = "transformers' MPNet computes 32 buckets whatever this says (compute_position_bias's default)"

MPNET = ROBERTA.derive(
    "mpnet",
    classes=tuple(HEADS),
    rules=(*BODY, BIAS),
    ignored=tuple(n.replace("roberta.", "mpnet.") for n in ROBERTA.ignored if ".token_type" not in n),
    base_prefix="mpnet.",
    recipes=("mpnet-base",),
    hf_class=head_class(HEADS),
    base_class="MPNetModel",
    drop=("type_vocab_size", "position_embedding_type"),
    rows=(
        hidden_dropout_heads(heads(HEADS)),
        past_pad("MPNet", 1, max_position_embeddings=512),
        fixed_pad(1, row=1),
        Fixed("type_vocab_size", 0),
        *(Fixed(f"positional.{field}", value) for field, value in POSITIONAL.items()),  # HF: no ids for the bias
        Refused("relative_attention_num_buckets", lambda v: v in (None, 32), BUCKETS, export=32),
    ),
    defaults={"vocab_size": 30527},
)
