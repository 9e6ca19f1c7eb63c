"""The component contract as a pytest suite: every registered component, built-ins and plugins alike.

A plugin package checks its components with three lines in its tests::

    from zoo.testing import ComponentContract

    class TestContract(ComponentContract):
        plugin = "zoo-sliding-window"  # the entry-point name; or kinds = ("attention",) / names = ("my_attn",)

Each *case* is one registered component with one of its config's ``examples`` (or one block layout of
``BlockConfig.examples``), placed into the tiny recipe of every architecture that accepts it (each
architecture config lists its tiny recipes in ``examples``; a combination that its validation refuses
is not a case; an attention-kind mixer that refuses the recipe's positional encoding but takes none, such as
RWKV or Mamba, is placed with ``positional: none``). For every case the suite checks:

- forward: finite outputs of the family's shape, and a backward pass that gives finite gradients;
- causality (causal stacks): a later token changes no earlier output;
- padding invariance (token inputs): padding after the sequence changes no real position;
- cached decoding (decoders, encoder-decoders): step by step through the cache equals the full forward;
- ``torch.compile(fullgraph=True)``: traces without a graph break and gives the same outputs (once per
  component example, in one of the architectures that take it: compiling is the slow check, and the
  architectures take turns, so that each is compiled with its share of the components);
- declared cost: the config's ``cost(ctx)`` exists and every count it declares equals the built modules';
- config round trip: the spec survives ``model_dump`` -> validate, and the recipe validates against the
  JSON Schema of recipes (``zoo schema``).

A component whose examples fit no architecture is a failing case that says why, so an example with a
typo cannot pass silently.

Attention kernels (kind ``kernel``) have a contract of their own, ``KernelContract``: each registered kernel
equals the reference math (``eager``) on grouped heads, masks, fully masked rows, score biases, soft-caps,
scales and causal queries after cached keys, and gives finite gradients.

A plugin that ships recipes checks that each one trains with ``RecipeContract``::

    from zoo.testing import RecipeContract

    class TestRecipes(RecipeContract):
        recipes = ("my-tiny", "my-other-tiny")  # named recipes (or recipe dicts / paths)

For every recipe it checks that a few optimizer steps on one fixed batch give every parameter a finite
gradient at every step and bring the loss down by at least ``min_loss_drop``. The batch is a language model's
(token ids as their own labels); a recipe with another objective overrides ``batch()``.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
from torch import nn

from zoo import compat

from .kernels import KERNEL_CASES, KernelContract

__all__ = ["KERNEL_CASES", "Case", "ComponentContract", "KernelContract", "RecipeContract", "contract_cases"]

N, L = 2, 8
"""Batch and sequence length of the contract inputs."""
ATOL = 1e-5


@dataclass(frozen=True)
class Case:
    """One component with one of its examples, in one architecture's tiny recipe."""

    kind: str
    name: str
    plugin: str
    options: dict[str, Any]
    architecture: str
    recipe: dict[str, Any] = field(repr=False)
    error: str | None = None
    """Why the example fits no architecture (the case then fails with this message)."""

    @property
    def id(self) -> str:
        opts = ",".join(f"{k}={v}" for k, v in self.options.items()) or "defaults"
        return f"{self.kind}:{self.name}[{opts}]@{self.architecture}"

    @property
    def causal(self) -> bool:
        return self.architecture_config().stacks[-1][1]

    @property
    def token_input(self) -> bool:
        """Token ids in, to every stack (an encoder that hears audio, ``encoder_embedding: audio``, takes none)."""
        return self.architecture_config().token_input and self.source_features is None

    @property
    def source_features(self) -> Any:
        """The encoder's own embedding where it embeds features (Whisper's log-mel frames), else None."""
        from zoo.recipe import load_recipe

        if not self.recipe.get("encoder_embedding"):
            return None
        own = load_recipe(self.recipe).encoder_embedding
        return own if not getattr(type(own), "token_input", True) else None

    @property
    def seq2seq(self) -> bool:
        return len(self.architecture_config().stacks) > 1

    @property
    def per_token(self) -> bool:
        """The head predicts at every position (an LM head), not once per sequence (a classifier)."""
        from zoo.recipe import load_recipe

        recipe = load_recipe(self.recipe)
        cost = recipe.head.cost(recipe.context())
        return cost is None or not cost.per_sequence

    def architecture_config(self) -> Any:
        from zoo.plugins import get_registry

        return get_registry().get("architecture", self.recipe["architecture"]).config()

    def build(self, seed: int = 0) -> nn.Module:
        import zoo

        torch.manual_seed(seed)
        return zoo.build(self.recipe).eval()


def _tiny_recipes() -> list[tuple[str, dict[str, Any]]]:
    from zoo.plugins import get_registry

    out = []
    for arch in get_registry():
        if arch.kind != "architecture":
            continue
        for example in arch.config.examples:
            if example:
                out.append((arch.name, {"name": f"contract-{arch.name}", **copy.deepcopy(example)}))
    return out


def _unpositioned(kind: str, name: str, recipe: dict[str, Any]) -> bool:
    """True when an attention-kind mixer takes no positional encoding of the style ``recipe`` has, but takes
    none at all (RWKV, Mamba: positions are in the recurrence): it is placed with ``positional: none``."""
    from zoo.plugins import get_registry

    if kind != "attention" or "positional" not in recipe:
        return False
    registry = get_registry()
    styles = registry.get(kind, name).config.positional_styles
    positional = recipe["positional"]
    positional = positional if isinstance(positional, str) else positional.get("type", "")
    try:
        style = registry.get("positional", positional).config.style
    except Exception:  # noqa: BLE001 - an unknown type: leave the recipe as it is, its validation says why
        return False
    return style not in styles and "none" in styles


def _placements(kind: str, name: str, options: dict[str, Any]) -> Iterable[tuple[str, dict[str, Any]]]:
    """The tiny recipe of each architecture with the component in its place: the field of its kind, or the one its
    config names (``recipe_field``: an audio front end is an encoder-decoder's ``encoder_embedding``)."""
    from zoo.plugins import get_registry

    spec = {"type": name, **options}
    for arch, base in _tiny_recipes():
        recipe = copy.deepcopy(base)
        field = getattr(get_registry().get(kind, name).config, "recipe_field", kind) if kind != "block" else kind
        if kind == "block":
            recipe["block"] = dict(options)
        elif field != kind and not get_registry().get("architecture", arch).config.encoder_input:
            continue  # a component of a field of its own (an encoder's audio front end) that this architecture lacks
        else:
            recipe[field] = spec
            if _unpositioned(kind, name, recipe):
                recipe["positional"] = "none"
        yield arch, recipe


def contract_cases(
    *,
    plugin: str | None = None,
    builtin: bool = False,
    kinds: Iterable[str] | None = None,
    names: Iterable[str] | None = None,
) -> list[Case]:
    """The cases of the registered components that match: a plugin's (or zoo's own, ``builtin``), some
    kinds, some names (None: any)."""
    from zoo.errors import RecipeError
    from zoo.plugins import BUILTIN_PLUGINS, get_registry
    from zoo.recipe import load_recipe

    kinds = set(kinds) if kinds is not None else None
    names = set(names) if names is not None else None
    cases: list[Case] = []
    entries: list[tuple[str, str, str, Any]] = [
        (c.kind, c.name, c.plugin, c.config) for c in get_registry() if c.kind not in ("architecture", "kernel")
    ]
    from zoo.components.block import BlockConfig

    entries.append(("block", "block", "zoo.components.block", BlockConfig))
    for kind, name, owner, config in entries:
        if (plugin is not None and owner != plugin) or (kinds is not None and kind not in kinds):
            continue
        if builtin and owner not in (*BUILTIN_PLUGINS, "zoo.components.block"):
            continue
        if names is not None and name not in names:
            continue
        for options in config.examples:
            fitted, refusals = 0, []
            for arch, recipe in _placements(kind, name, options):
                try:
                    load_recipe(recipe)
                except RecipeError as exc:
                    refusals.append(f"{arch}: {exc}")
                    continue
                fitted += 1
                cases.append(Case(kind, name, owner, dict(options), arch, recipe))
            if not fitted:
                why = "; ".join(refusals) or "no architecture declares a tiny recipe (ArchitectureConfig.examples)"
                cases.append(Case(kind, name, owner, dict(options), "none", {}, error=why))
    return cases


def _one_architecture_each(cases: list[Case]) -> list[Case]:
    """One case per component example: of the architectures that take it, the one chosen least often so far
    (the first of those in registry order), so that every architecture is represented."""
    groups: dict[tuple[str, str, str, str], list[Case]] = {}
    for case in cases:
        groups.setdefault((case.kind, case.name, case.plugin, repr(case.options)), []).append(case)
    times: dict[str, int] = {}
    chosen = []
    for group in groups.values():
        case = min(group, key=lambda c: times.get(c.architecture, 0))
        times[case.architecture] = times.get(case.architecture, 0) + 1
        chosen.append(case)
    return chosen


@functools.lru_cache(maxsize=8)
def _schema_validator(schema: str) -> Any:
    """A validator for the JSON Schema ``schema`` (JSON text), checked against its metaschema once: that check
    costs 70 times the validation of a recipe, and the schema is the same for every case of a registry."""
    import jsonschema

    data = json.loads(schema)
    cls = jsonschema.validators.validator_for(data)
    cls.check_schema(data)
    return cls(data)


def _tokens(case: Case, length: int = L, seed: int = 1) -> torch.Tensor:
    vocab = case.recipe["vocab_size"]
    return torch.randint(1, vocab, (N, length), generator=torch.Generator().manual_seed(seed))


def _inputs(case: Case) -> dict[str, torch.Tensor]:
    features = case.source_features
    if features is not None:  # an encoder that hears audio: random log-mel frames (N, M, 2 L)
        frames = torch.randn(N, features.num_mel_bins, 2 * L, generator=torch.Generator().manual_seed(1))
        return {"input_ids": frames, "decoder_input_ids": _tokens(case, seed=2)}
    if not case.token_input:
        r = case.recipe
        size = (N, r.get("num_channels", 3), r["image_size"], r["image_size"])
        return {"images": torch.randn(size, generator=torch.Generator().manual_seed(1))}
    if case.seq2seq:
        return {"input_ids": _tokens(case), "decoder_input_ids": _tokens(case, seed=2)}
    vision = case.recipe.get("vision")
    if vision:  # a dual-encoder: texts and as many images
        size = (N, vision.get("num_channels", 3), vision["image_size"], vision["image_size"])
        return {"input_ids": _tokens(case), "images": torch.randn(size, generator=torch.Generator().manual_seed(1))}
    return {"input_ids": _tokens(case)}


def _close(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    torch.testing.assert_close(a, b, rtol=0, atol=ATOL, msg=lambda m: f"{what}: {m}")


class ComponentContract:
    """Subclass as ``TestSomething`` and set ``plugin``, ``kinds`` or ``names`` to choose the components."""

    plugin: str | None = None
    builtin: bool = False
    """zoo's own components (what zoo's test suite checks)."""
    kinds: tuple[str, ...] | None = None
    names: tuple[str, ...] | None = None

    @pytest.fixture(autouse=True)
    def _one_thread(self):
        # Tiny models: one thread is fastest, and several spin against each other on a busy machine.
        before = torch.get_num_threads()
        torch.set_num_threads(1)
        yield
        torch.set_num_threads(before)

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "case" not in metafunc.fixturenames:
            return
        cases = contract_cases(plugin=self.plugin, builtin=self.builtin, kinds=self.kinds, names=self.names)
        if not cases:
            raise ValueError(f"zoo.testing: nothing registered matches plugin={self.plugin!r}, kinds={self.kinds!r}")
        wanted = getattr(metafunc.function, "applies", None)
        chosen = [c for c in cases if c.error is not None or wanted is None or wanted(c)]
        if getattr(metafunc.function, "once_per_example", False):
            chosen = _one_architecture_each(chosen)
        metafunc.parametrize("case", chosen, ids=[c.id for c in chosen])

    @staticmethod
    def _usable(case: Case) -> None:
        if case.error is not None:
            pytest.fail(f"{case.kind} '{case.name}' with {case.options} fits no architecture: {case.error}")

    def test_forward_and_backward(self, case: Case) -> None:
        self._usable(case)
        model = case.build().train()
        out = model(**_inputs(case))
        assert out.logits.shape[0] == N and torch.isfinite(out.logits).all(), "non-finite or misshapen output"
        loss = out.logits.float().square().mean() + (out.aux_loss if out.aux_loss is not None else 0.0)
        loss.backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        assert grads, "no parameter received a gradient"
        assert all(torch.isfinite(g).all() for g in grads), "non-finite gradients"

    def test_causality(self, case: Case) -> None:
        self._usable(case)
        model = case.build()
        x = _inputs(case)
        key = "decoder_input_ids" if case.seq2seq else "input_ids"
        changed = dict(x)
        changed[key] = x[key].clone()
        changed[key][:, -1] = (x[key][:, -1] % (case.recipe["vocab_size"] - 1)) + 1
        with torch.no_grad():
            a, b = model(**x).logits, model(**changed).logits
        _close(a[:, :-1], b[:, :-1], "a later token changed an earlier output")

    test_causality.applies = lambda case: case.token_input and case.causal and case.per_token  # type: ignore[attr-defined]

    def test_padding_is_invisible(self, case: Case) -> None:
        self._usable(case)
        model = case.build()
        x = _tokens(case, L - 3)
        padded = torch.cat([x, torch.zeros(N, 3, dtype=x.dtype)], dim=1)
        mask = torch.ones(N, L, dtype=torch.bool)
        mask[:, L - 3 :] = False
        with torch.no_grad():
            if case.seq2seq:
                target = _tokens(case, 4, seed=2)
                a = model(input_ids=x, decoder_input_ids=target).logits
                b = model(input_ids=padded, attention_mask=mask, decoder_input_ids=target).logits
            else:
                a = model(input_ids=x).logits
                b = model(input_ids=padded, attention_mask=mask).logits
        per_token = case.per_token and not case.seq2seq  # (N, L, V) or (N, L); a pooled head gives (N, C)
        _close(b[:, : L - 3] if per_token else b, a, "padding changed a real position")

    test_padding_is_invisible.applies = lambda case: case.token_input  # type: ignore[attr-defined]

    def test_cached_decoding_equals_recomputation(self, case: Case) -> None:
        self._decode_against_recomputation(case, static=False)

    test_cached_decoding_equals_recomputation.applies = (  # type: ignore[attr-defined]
        lambda case: case.token_input and case.causal and case.per_token
    )

    def test_static_cached_decoding_equals_recomputation(self, case: Case) -> None:
        """The fixed-shape cache a compiled decode step uses (``new_cache(..., static=True)``)."""
        self._decode_against_recomputation(case, static=True)

    test_static_cached_decoding_equals_recomputation.applies = (  # type: ignore[attr-defined]
        lambda case: case.token_input and case.causal and case.per_token
    )

    def _decode_against_recomputation(self, case: Case, *, static: bool) -> None:
        self._usable(case)
        model = case.build()
        with torch.no_grad():
            if case.seq2seq:
                source, target = _tokens(case), _tokens(case, seed=2)
                full = model(input_ids=source, decoder_input_ids=target).logits
                hidden = model.encode(source)
                cache = model.new_cache(N, L, static=static)
                steps = [model(decoder_input_ids=target[:, :3], encoder_hidden=hidden, cache=cache).logits]
                for t in range(3, L):
                    step = model(decoder_input_ids=target[:, t : t + 1], encoder_hidden=hidden, cache=cache)
                    steps.append(step.logits)
            else:
                x = _tokens(case)
                full = model(input_ids=x).logits
                cache = model.new_cache(N, L, static=static)
                steps = [model(input_ids=x[:, :3], cache=cache).logits]
                steps += [model(input_ids=x[:, t : t + 1], cache=cache).logits for t in range(3, L)]
        what = "static-cached" if static else "cached"
        _close(torch.cat(steps, dim=1), full, f"{what} decoding differs from the full forward")

    def test_compiles_without_graph_breaks(self, case: Case) -> None:
        """In one architecture per example (``_one_architecture_each``): the others run the same component code."""
        self._usable(case)
        compat.reset_dynamo()
        model = case.build()
        x = _inputs(case)
        compiled = torch.compile(model, fullgraph=True, backend="eager")
        with torch.no_grad():
            _close(compiled(**x).logits, model(**x).logits, "the compiled model differs")

    test_compiles_without_graph_breaks.once_per_example = True  # type: ignore[attr-defined]

    def test_declared_cost_matches_the_modules(self, case: Case) -> None:
        self._usable(case)
        import zoo
        from zoo.analysis import analytic_parameters, compare_counts, parameter_breakdown

        model = zoo.build(case.recipe, device="meta")
        undeclared = [
            path
            for path, made in model.zoo_components.items()
            if made.kind != "architecture" and not made.nested and made.config.cost(made.ctx) is None
        ]
        assert not undeclared, f"no cost declared (define cost(ctx) on the config) for: {', '.join(undeclared)}"
        mismatches = compare_counts(parameter_breakdown(model), analytic_parameters(model))
        assert not mismatches, "declared parameters differ from the built modules: " + "; ".join(
            f"{m.where}: counted {m.counted:,}, declared {m.analytic:,}" for m in mismatches
        )

    def test_config_round_trip(self, case: Case) -> None:
        self._usable(case)
        from zoo.recipe import load_recipe, recipe_json_schema

        recipe = load_recipe(case.recipe)
        again = load_recipe(recipe.to_dict())
        assert again == recipe, "the recipe does not survive to_dict() and validation"
        import jsonschema

        schema = recipe_json_schema()
        validator = _schema_validator(json.dumps(schema, sort_keys=True))
        error = jsonschema.exceptions.best_match(validator.iter_errors(recipe.to_dict()))
        if error is not None:
            raise error


class RecipeContract:
    """Subclass as ``TestSomething`` and set ``recipes`` to the recipes to train (names, paths or dicts)."""

    recipes: tuple[Any, ...] = ()
    steps: int = 8
    """Optimizer steps (AdamW at ``lr``) on one fixed batch of ``batch_size`` x ``seq_len`` tokens."""
    batch_size: int = 4
    seq_len: int = 32
    lr: float = 3e-3
    min_loss_drop: float = 0.5
    """How far the last step's loss must be below the first step's."""

    @pytest.fixture(autouse=True)
    def _one_thread(self):
        before = torch.get_num_threads()
        torch.set_num_threads(1)
        yield
        torch.set_num_threads(before)

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "recipe" not in metafunc.fixturenames:
            return
        if not self.recipes:
            raise ValueError(f"zoo.testing: {type(self).__name__}.recipes names no recipe")
        ids = [str(r.get("name", i) if isinstance(r, dict) else r) for i, r in enumerate(self.recipes)]
        metafunc.parametrize("recipe", self.recipes, ids=ids)

    def batch(self, recipe: Any) -> dict[str, torch.Tensor]:
        """The forward's keyword arguments for one training step of the built ``recipe`` (a ``Recipe``): a
        language model's token ids, which are their own labels."""
        ids = torch.randint(
            1, recipe.vocab_size, (self.batch_size, self.seq_len), generator=torch.Generator().manual_seed(0)
        )
        return {"input_ids": ids, "labels": ids}

    def test_recipe_trains_a_few_steps(self, recipe: Any) -> None:
        import zoo

        torch.manual_seed(0)
        model = zoo.build(recipe).train()
        batch = self.batch(model.recipe)
        optimizer = torch.optim.AdamW(model.parameters(), lr=self.lr)
        losses = []
        for step in range(self.steps):
            loss = model(**batch).loss
            assert loss is not None and torch.isfinite(loss), f"step {step}: the loss is {loss}"
            optimizer.zero_grad()
            loss.backward()
            missing = [n for n, p in model.named_parameters() if p.grad is None]
            assert not missing, f"step {step}: no gradient for {', '.join(missing)}"
            bad = [n for n, p in model.named_parameters() if not torch.isfinite(p.grad).all()]
            assert not bad, f"step {step}: non-finite gradient for {', '.join(bad)}"
            optimizer.step()
            losses.append(loss.item())
        assert losses[-1] < losses[0] - self.min_loss_drop, (
            f"the loss went {losses[0]:.3f} -> {losses[-1]:.3f}: {losses}"
        )
