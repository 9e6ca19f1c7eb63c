"""The config of a zoo model exported for ``trust_remote_code`` (written by ``zoo export``; self-contained:
it imports transformers, never zoo).

``zoo_kind`` is the architecture and head (``decoder/lm``), ``zoo_parameters`` the name, shape and dtype of
every weight (``model.safetensors`` holds them under ``zoo.<name>``), ``zoo_programs`` the ``torch.export``
programs (``<name>.pt2``) that compute the model from them, ``zoo_inputs`` what the forward program takes,
``zoo_dtype`` the floating dtype it computes in, and ``zoo_recipe`` the zoo recipe it was built from.
"""

from transformers import PretrainedConfig


class ZooConfig(PretrainedConfig):
    model_type = "zoo"

    def __init__(
        self,
        zoo_kind: str = "causal-lm",
        zoo_parameters: dict | None = None,
        zoo_programs: list | None = None,
        zoo_inputs: list | None = None,
        zoo_dtype: str = "float32",
        zoo_recipe: dict | None = None,
        vocab_size: int | None = None,
        **kwargs,
    ) -> None:
        self.zoo_kind = zoo_kind
        self.zoo_parameters = zoo_parameters or {}
        self.zoo_programs = zoo_programs or []
        self.zoo_inputs = zoo_inputs or []
        self.zoo_dtype = zoo_dtype
        self.zoo_recipe = zoo_recipe or {}
        self.vocab_size = vocab_size
        super().__init__(**kwargs)
