"""ERNIE (``ErnieModel``, ``ForMaskedLM``, ``ForPreTraining``, ``ForSequenceClassification``,
``ForTokenClassification``): BERT's network and names under ``ernie.``; with ``use_task_id`` a task-type table
(``embedding.task_types``) whose first row every token adds, as transformers does without ``task_type_ids``."""

from ._common import renamed
from .bert import BERT, fits_head, transform_activation
from .mapping import Rule
from .rows_classic import bert_classes, by_head, encoder_heads
from .table import Computed

HEADS = bert_classes("Ernie", pretraining=True)
CLASSES = by_head(HEADS)
TASKS = Computed(
    "task types",
    keys={"use_task_id": False, "task_type_vocab_size": 3},
    paths=("embedding.task_types",),
    read=lambda config, recipe: {"embedding.task_types": config["task_type_vocab_size"] * bool(config["use_task_id"])},
    write=lambda recipe, weights: {
        "use_task_id": recipe.embedding.task_types > 0,
        "task_type_vocab_size": recipe.embedding.task_types or 3,  # ErnieConfig's default, unused without tasks
    },
)

ERNIE = BERT.derive(
    "ernie",
    classes=tuple(HEADS),
    rules=(
        *renamed(BERT.rules, {"bert.": "ernie."}),
        Rule("ernie.embeddings.task_type_embeddings.weight", "embedding.task_type.weight"),
    ),
    ignored=tuple(name.replace("bert.", "ernie.") for name in BERT.ignored),
    base_prefix="ernie.",
    recipes=("ernie-3.0-base-zh",),
    hf_class=lambda recipe: CLASSES[recipe.head.type],
    base_class="ErnieModel",
    rows=(
        encoder_heads(HEADS, "cls.predictions.decoder.bias", fits_head, transform_activation),
        TASKS,
    ),
)
