"""OLMo 3 (``Olmo3ForCausalLM``): OLMo 2's network in which ``sliding_attention`` layers (three in four by default)
slide over ``sliding_window`` keys, each kind of layer with its own RoPE (4.x ``rope_theta`` and ``rope_scaling``:
the full layers'). The sliding layers' rope is the recipe's; full layers with another carry it as their ``rotary``."""

from .layer_kinds import FULL, SLIDING, every_nth
from .olmo2 import OLMO2
from .rows_sliding import rope_per_kind

THETA = 500000.0  # Olmo3Config.default_theta, which the sliding layers keep

OLMO3 = OLMO2.derive(
    "olmo3",
    classes=("Olmo3ForCausalLM",),
    recipes=("olmo-3-7b",),
    drop=("rope", "layers", "rope_parameters.partial_rotary_factor"),
    rows=rope_per_kind(  # as Olmo3Config.convert_rope_params_to_dict assembles them
        "OLMo 3",
        lambda config: {SLIDING: THETA, FULL: config["rope_theta"] or THETA},
        fill=every_nth(FULL, SLIDING, 4),
        keys={"sliding_window": 4096, "layer_types": None},
        theta=None,
        why="OLMo 3 rotates every head dim",
    ),
)
