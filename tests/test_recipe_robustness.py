"""Nothing a user types, installs or loads gets a traceback, hangs, or is silently wrong: each case is refused
with a ``RecipeError`` that names the field (or a plugin failure that names the plugin), quickly."""

from __future__ import annotations

import importlib.metadata
import re
import sys
import time
import tracemalloc
import types
import warnings
from pathlib import Path
from typing import Any, Literal

import pytest
import torch
from clean_errors import BASE
from pydantic import model_validator
from torch import nn

import zoo
from zoo import plugins
from zoo.builder import check_buildable
from zoo.config import ComponentConfig
from zoo.recipe import deep_merge, limits, load_yaml, named_recipes, parse_override

ROOT = Path(__file__).resolve().parents[1]


def errors_of(source: Any, **overrides: Any) -> list[tuple[str, str]]:
    with pytest.raises(zoo.RecipeError) as caught:
        zoo.load_recipe(source, **overrides)
    return caught.value.errors


def refused(source: Any, **overrides: Any) -> str:
    with pytest.raises(zoo.RecipeError) as caught:
        zoo.load_recipe(source, **overrides)
    return str(caught.value)


def quickly(seconds: float = 2.0):
    """Asserts that the ``with`` block took under ``seconds``."""

    class _Timer:
        def __enter__(self):
            self.start = time.perf_counter()

        def __exit__(self, *exc):
            took = time.perf_counter() - self.start
            assert took < seconds, f"took {took:.1f}s"

    return _Timer()


# ---------------------------------------------------------------------------------------------- 1. loading


@pytest.mark.parametrize(
    "layers",
    [[{}], [{"ffn": {"type": "mlp"}}], [{"select": None, "ffn": {"type": "mlp"}}]],
    ids=["empty", "no-select", "null-select"],
)
def test_an_override_without_a_usable_select_names_it(layers):
    errors = errors_of({**BASE, "layers": layers})
    assert [p for p, _ in errors] == ["layers.0.select"]


@pytest.mark.parametrize("select", [True, [0, True], {"a": 1}, 1.5, "1:2:3:4", "::0", "9" * 5000])
def test_odd_selectors_are_refused(select):
    errors = errors_of({**BASE, "layers": [{"select": select, "ffn": {"type": "mlp"}}]})
    assert errors and all(p.startswith("layers.0.select") for p, _ in errors), errors
    assert all(len(m) < 300 for _, m in errors)


def test_a_file_that_is_not_utf8_is_refused_also_as_a_parent(tmp_path):
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"extends: gpt-tiny\nname: caf\xe9\n")
    assert refused(latin) == f"{latin}: line 2: not UTF-8 text (byte 0xe9 at offset 27); save it as UTF-8"
    child = tmp_path / "child.yaml"
    child.write_text("extends: latin.yaml\nname: child\n")
    assert refused(child).startswith(f"{latin}: line 2: not UTF-8 text")


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
@pytest.mark.parametrize("depth", [limits.MAX_NESTING + 1, 1000, 100_000])
def test_deep_nesting_is_refused(tmp_path, suffix, depth):
    f = tmp_path / f"deep{suffix}"
    key = '"description"' if suffix == ".json" else "description"
    f.write_text(f"{{{key}: {'[' * depth}{']' * depth}}}")
    with quickly():
        message = refused(f)
    assert "nest" in message and "deep" in message, message


def test_deep_nesting_from_python_is_refused():
    value: Any = 1
    for _ in range(5000):
        value = {"x": value}
    with quickly():
        assert "nests deeper than" in refused({**BASE, "description": value})
    with quickly():
        assert "nests deeper than" in refused(BASE, description=value)
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with quickly():
        refused({**BASE, "description": loop})


def test_a_long_extends_chain_is_refused(tmp_path):
    for i in range(1200):
        parent = f"c{i + 1}.yaml" if i < 1199 else "gpt-tiny"
        (tmp_path / f"c{i}.yaml").write_text(f"extends: {parent}\nname: c{i}\n")
    with quickly():
        message = refused(tmp_path / "c0.yaml")
    assert f"extends: a chain of more than {limits.MAX_EXTENDS} recipe files" in message
    # A chain within the limit still works.
    assert zoo.load_recipe(tmp_path / f"c{1200 - limits.MAX_EXTENDS + 1}.yaml").vocab_size == 256


def test_a_5000_digit_integer_is_refused_wherever_it_comes_from(tmp_path):
    digits = "9" * 5000
    yaml_file = tmp_path / "big.yaml"
    yaml_file.write_text(f"extends: gpt-tiny\nd_model: {digits}\n")
    assert refused(yaml_file).endswith("line 2, column 10: an integer of 5,000 digits; at most 40 are read")
    json_file = tmp_path / "big.json"
    json_file.write_text(f'{{"extends": "gpt-tiny", "d_model": {digits}}}')
    assert refused(json_file).endswith("an integer of 5,000 digits; at most 40 are read")
    assert errors_of({**BASE, "d_model": 10**5000}) == [("d_model", "an integer longer than 40 digits")]
    with pytest.raises(zoo.RecipeError, match="--set d_model: an integer of 5,000 digits"):
        parse_override(f"d_model={digits}")
    # Large but readable integers are reported with the limit they break, in a short message.
    (path, message), *_ = errors_of({**BASE, "d_model": 10**30})
    assert path == "d_model" and "65536" in message and len(message) < 200


@pytest.mark.parametrize("ref", ["x" * 5000, "a\0b", "", 7, None])
def test_odd_extends_references_are_refused(ref):
    message = refused({**BASE, "extends": ref})
    assert "extends" in message and len(message) < 1500, message


def test_an_alias_bomb_is_refused_before_it_expands(tmp_path):
    lines = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]" for p, c in zip("abcdefgh", "bcdefghi", strict=True)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\n")
    tracemalloc.start()
    try:
        with quickly(1.0):
            message = refused(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert f"the recipe expands to more than {limits.MAX_NODES:,} values (aliases expanded)" in message
    assert peak < 20 * 2**20
    many = tmp_path / "aliases.yaml"
    many.write_text("a: &a 1\nb: [" + ", ".join(["*a"] * (limits.MAX_ALIASES + 1)) + "]\n")
    assert f"more than {limits.MAX_ALIASES} aliases" in refused(many)
    recursive = tmp_path / "recursive.yaml"
    recursive.write_text("name: &a [*a]\n")
    assert "refers to a collection that contains it" in refused(recursive)
    # Aliases within the limits are fine (and mean what YAML says).
    ok = tmp_path / "ok.yaml"
    ok.write_text("extends: gpt-tiny\nnorm: &n {type: rmsnorm}\nlayers: [{select: 0, norm: *n}]\n")
    assert zoo.load_recipe(ok).layers[0].norm.type == "rmsnorm"


def test_a_file_over_the_size_limit_is_refused_at_once(tmp_path):
    big = tmp_path / "big.yaml"
    entry = b"  - {select: 0, ffn: {type: mlp}}\n"
    big.write_bytes(b"extends: gpt-tiny\nlayers:\n" + entry * (50 * 2**20 // len(entry)))  # 50 MiB
    with quickly(1.0):
        message = refused(big)
    assert message == f"{big}: the file is larger than 1024 KiB, the most a recipe may be"


def test_many_overrides_are_refused_as_a_whole():
    layers = [{"select": 0, "ffn": {"type": "mlp"}}] * (limits.MAX_LAYERS + 1)
    with quickly():
        assert errors_of({**BASE, "layers": layers}) == [("layers", "1,025 per-layer overrides; at most 1,024")]


def test_the_readme_states_every_limit():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Writing recipes", 1)[1].split("\n## ", 1)[0]
    for name in dir(limits):
        if name.startswith("MAX_"):
            value = getattr(limits, name)
            shown = {
                f"{value:,}",
                str(value),
                f"{value // 1024} KiB",
                f"{value >> 20} MiB",
                f"2^{value.bit_length() - 1}",
            }
            assert any(s in section for s in shown), f"README's Writing recipes does not state {name} = {value}"


# ---------------------------------------------------------------------------------------------- 2. bounds


@pytest.mark.parametrize(
    ("change", "path", "limit"),
    [
        ({"num_layers": 10**9}, "num_layers", limits.MAX_LAYERS),
        ({"num_decoder_layers": 10**9, "architecture": "encoder-decoder"}, "num_decoder_layers", limits.MAX_LAYERS),
        ({"d_model": 2**20}, "d_model", limits.MAX_D_MODEL),
        ({"vocab_size": 2**40}, "vocab_size", limits.MAX_VOCAB),
        ({"max_len": 2**40}, "max_len", limits.MAX_POSITIONS),
        ({"ffn": {"type": "moe", "num_experts": 10**6, "top_k": 1}}, "ffn.num_experts", limits.MAX_EXPERTS),
        ({"ffn": {"type": "mlp", "hidden": 2**40}}, "ffn.hidden", limits.MAX_WIDTH),
        ({"attention": {"type": "mha", "num_heads": 10**6}}, "attention.num_heads", limits.MAX_HEADS),
        ({"attention": {"type": "mha", "num_heads": 4, "head_dim": 10**9}}, "attention.head_dim", limits.MAX_HEAD_DIM),
        ({"attention": {"type": "moa", "num_experts": 10**6, "top_k": 2}}, "attention.num_experts", limits.MAX_EXPERTS),
    ],
)
def test_sizes_have_upper_bounds_that_the_message_names(change, path, limit):
    with quickly():
        errors = errors_of(deep_merge(BASE, change))
    assert any(p == path and f"less than or equal to {limit}" in m for p, m in errors), errors


def test_the_experts_of_the_whole_model_are_bounded():
    moe = {"type": "moe", "num_experts": limits.MAX_EXPERTS, "top_k": 1}
    errors = errors_of({**BASE, "num_layers": 17, "ffn": moe})
    assert errors == [("ffn", "the model has 69,632 routed experts over its layers; at most 65,536")]


def test_a_maximal_sinusoidal_table_costs_nothing_on_the_meta_device():
    with quickly(5.0):
        zoo.build(BASE, device="meta", positional="sinusoidal", max_len=limits.MAX_POSITIONS, d_model=4096)


# ---------------------------------------------------------------------------------------------- 3. refusals


def test_an_override_that_selects_no_layer_is_refused():
    errors = errors_of({**BASE, "layers": [{"select": 7, "ffn": {"type": "mlp"}}]})
    assert errors == [("layers.0.select", "7 selects no layer: the decoder has 2 (0 to 1)")]
    errors = errors_of("t5-tiny", layers=[{"select": "5:", "ffn": {"type": "mlp"}}])
    assert [p for p, _ in errors] == ["layers.0.select"]
    assert "the encoder has" in errors[0][1] and "the decoder has" in errors[0][1]


def test_an_override_of_a_stack_the_architecture_lacks_is_refused():
    errors = errors_of({**BASE, "layers": [{"select": 0, "stack": "encoder", "ffn": {"type": "mlp"}}]})
    assert errors == [("layers.0.stack", "architecture 'decoder' has no encoder stack; its stacks: decoder")]
    assert [p for p, _ in errors_of("vit-tiny", layers=[{"select": 0, "stack": "decoder"}])] == ["layers.0.stack"]


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"train": {"lr": float("inf")}}, "train.lr"),
        ({"init_std": float("nan")}, "init_std"),
        ({"dropout": float("nan")}, "dropout"),
        ({"norm": {"type": "layernorm", "eps": float("inf")}}, "norm.eps"),
        ({"attention": {"type": "mha", "num_heads": 4, "scale": float("nan")}}, "attention.scale"),
        ({"positional": {"type": "rope", "theta": float("inf")}}, "positional.theta"),
        ({"ffn": {"type": "moe", "num_experts": 2, "top_k": 1, "aux_loss_coef": float("inf")}}, "ffn.aux_loss_coef"),
        ({"layers": [{"select": 0, "norm": {"type": "rmsnorm", "eps": float("-inf")}}]}, "layers.0.norm.eps"),
    ],
)
def test_floats_are_finite_everywhere(change, path):
    errors = errors_of(deep_merge(BASE, change))
    assert errors == [(path, f"Input should be a finite number (got {change_value(change)})")]


def change_value(change: dict[str, Any]) -> Any:
    value: Any = change
    while isinstance(value, (dict, list)):
        value = value[0] if isinstance(value, list) else list(value.values())[-1]
    return value


def test_inf_and_nan_in_a_yaml_file_are_refused(tmp_path):
    f = tmp_path / "inf.yaml"
    f.write_text("extends: gpt-tiny\ntrain: {lr: .inf}\nnorm: {type: layernorm, eps: .nan}\n")
    errors = errors_of(f)
    assert sorted(p for p, _ in errors) == ["norm.eps", "train.lr"]


def test_a_plugin_configs_floats_are_finite_too(register_plugin):
    class FiniteConfig(ComponentConfig):
        type: Literal["finite-norm"] = "finite-norm"
        eps: float = 1e-5

    class Plugin:
        @zoo.hookimpl
        def register_components(self, register):
            register("norm", "finite-norm", nn.LayerNorm, FiniteConfig)

    register_plugin(Plugin(), "finite-plugin")
    assert errors_of({**BASE, "norm": {"type": "finite-norm", "eps": float("nan")}}) == [
        ("norm.eps", "Input should be a finite number (got nan)")
    ]


def test_a_pad_token_outside_the_vocabulary_is_refused():
    message = "must be < vocab_size (64): it is a token id; got 64"
    assert errors_of({**BASE, "pad_token_id": 64}) == [("pad_token_id", message)]
    # In an encoder-decoder the pad token starts the decoder: the same rule.
    assert errors_of("t5-tiny", pad_token_id=10**6) == [
        ("pad_token_id", "must be < vocab_size (256): it is a token id; got 1000000")
    ]
    zoo.load_recipe({**BASE, "pad_token_id": 63})


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"num_layers": True}, "num_layers"),
        ({"d_model": False}, "d_model"),
        ({"dropout": True}, "dropout"),
        ({"train": {"steps": True}}, "train.steps"),
        ({"attention": {"type": "mha", "num_heads": True}}, "attention.num_heads"),
        ({"layers": [{"select": True, "ffn": {"type": "mlp"}}]}, "layers.0.select"),
        ({"expect": {"parameters": True}}, "expect.parameters"),
    ],
)
def test_a_boolean_is_never_read_as_a_number(change, path):
    errors = errors_of(deep_merge(BASE, change))
    assert [p for p, _ in errors] == [path], errors


@pytest.mark.parametrize("name", ["", "   ", "x" * (limits.MAX_NAME_CHARS + 1)])
def test_a_recipe_needs_a_name(name):
    assert [p for p, _ in errors_of({**BASE, "name": name})] == ["name"]


def test_yaml_is_read_as_yaml_1_2(tmp_path):
    assert load_yaml("a: 1:04\nb: 010\nc: [on, off, yes, no, y, n]\nd: 1e-3\ne: 0x10\nf: 2024-01-01\ng: 1_000\n") == {
        "a": "1:04",
        "b": 10,
        "c": ["on", "off", "yes", "no", "y", "n"],
        "d": 0.001,
        "e": 16,
        "f": "2024-01-01",
        "g": "1_000",
    }
    assert load_yaml("a: [true, False, null, ~, .inf, -.5]") == {"a": [True, False, None, None, float("inf"), -0.5]}
    sexagesimal = tmp_path / "sexagesimal.yaml"
    sexagesimal.write_text("extends: gpt-tiny\nd_model: 1:04\n")
    assert errors_of(sexagesimal) == [
        ("d_model", "Input should be a valid integer, unable to parse string as an integer (got '1:04')")
    ]
    assert parse_override("d_model=1:04") == ("d_model", "1:04")
    assert [p for p, _ in errors_of("gpt-tiny", **dict([parse_override("norm=off")]))] == ["norm.type"]


def test_duplicate_keys_and_unknown_tags_are_refused(tmp_path):
    dup = tmp_path / "dup.yaml"
    dup.write_text("extends: gpt-tiny\nnum_layers: 2\nnum_layers: 3\n")
    assert "found duplicate key 'num_layers'" in refused(dup)
    dup_json = tmp_path / "dup.json"
    dup_json.write_text('{"extends": "gpt-tiny", "num_layers": 2, "num_layers": 3}')
    assert "found duplicate key 'num_layers'" in refused(dup_json)
    for tag in ("!!timestamp nonsense", "!!binary '@@'", "!!python/name:os.system", "!!set {a: 1}", "!!map x"):
        f = tmp_path / "tag.yaml"
        f.write_text(f"extends: gpt-tiny\ndescription: {tag}\n")
        assert "invalid YAML" in refused(f), tag
    for tag, problem in [
        ("!!int '1:04'", "is not an integer"),
        ("!!bool yes", "is not a boolean"),
        ("!!float x", "is not a number"),
    ]:
        f = tmp_path / "tag.yaml"
        f.write_text(f"extends: gpt-tiny\nnum_layers: {tag}\n")
        assert problem in refused(f), tag


def test_keys_must_be_strings(tmp_path):
    f = tmp_path / "keys.yaml"
    f.write_text("extends: gpt-tiny\n1: 2\n")
    assert "keys are strings, not 1" in refused(f)


# ---------------------------------------------------------------------------------------------- 4. build checks


class Picky(nn.Module):
    """A norm whose factory refuses what its config accepted."""

    def __init__(self, d_model: int, *, fail: str = "value") -> None:
        super().__init__()
        errors = {
            "value": ValueError("no"),
            "key": KeyError("gone"),
            "zero": ZeroDivisionError("x"),
            "exit": SystemExit(4),
        }
        if fail in errors:
            raise errors[fail]


class PickyConfig(ComponentConfig):
    type: Literal["picky"] = "picky"
    fail: str = "value"


@pytest.fixture
def picky(register_plugin):
    class Plugin:
        @zoo.hookimpl
        def register_components(self, register):
            register("norm", "picky", Picky, PickyConfig)

    register_plugin(Plugin(), "picky-plugin")


@pytest.mark.parametrize(
    ("fail", "raised"),
    [
        ("value", "ValueError: no"),
        ("key", "KeyError: 'gone'"),
        ("zero", "ZeroDivisionError: x"),
        ("exit", "SystemExit: 4"),
    ],
)
def test_check_buildable_turns_any_factory_failure_into_a_recipe_error(picky, fail, raised):
    recipe = zoo.load_recipe({**BASE, "norm": {"type": "picky", "fail": fail}})  # validation alone accepts it
    expected = f"norm 'picky' (plugin 'picky-plugin') failed to build: {raised}"
    with pytest.raises(zoo.RecipeError, match=re.escape(expected)):
        check_buildable(recipe)
    with pytest.raises(zoo.RecipeError, match=re.escape(expected)):
        zoo.build(recipe)
    assert check_buildable({**BASE, "norm": {"type": "picky", "fail": "none"}}).norm.type == "picky"


def test_check_buildable_checks_the_expected_size():
    with pytest.raises(zoo.RecipeError, match="expect.parameters: the recipe expects 1 parameters"):
        check_buildable({**BASE, "expect": {"parameters": 1}})


def test_a_factory_that_returns_no_module_is_refused(register_plugin):
    class Plugin:
        @zoo.hookimpl
        def register_components(self, register):
            register("norm", "nothing", lambda d_model: None, _config("nothing"))

    register_plugin(Plugin(), "nothing-plugin")
    with pytest.raises(zoo.RecipeError, match="its factory returned NoneType, not a torch.nn.Module"):
        check_buildable({**BASE, "norm": "nothing"})


def _config(name: str) -> type[ComponentConfig]:
    from pydantic import create_model

    return create_model(f"{name}Config", __base__=ComponentConfig, type=(Literal[name], name))


def test_a_model_too_big_for_the_device_is_refused_before_allocating(monkeypatch):
    from zoo import builder

    available = builder.available_memory("cpu")
    assert available is None or available > 0
    monkeypatch.setattr(builder, "available_memory", lambda device: 1000)
    with pytest.raises(zoo.RecipeError) as caught:
        zoo.build("gpt-tiny")
    message = str(caught.value)
    assert "need 487.0 KiB but the CPU has 1,000 B available" in message and 'device="meta"' in message
    assert "--device meta" in message
    zoo.build("gpt-tiny", device="meta")  # the meta device allocates nothing: never refused
    monkeypatch.setattr(builder, "available_memory", lambda device: None)
    zoo.build("gpt-tiny")  # unknown: not refused


# ---------------------------------------------------------------------------------------------- 5. across layers


@pytest.mark.parametrize(
    ("positional", "attention", "fact"),
    [
        ("alibi", {"type": "mha", "num_heads": 8}, "num_heads"),
        ({"type": "t5_relative", "num_buckets": 8, "max_distance": 16}, {"type": "mha", "num_heads": 2}, "num_heads"),
        ("rope", {"type": "mha", "num_heads": 4, "head_dim": 4}, "head_dim"),
        ("rope", {"type": "mha", "num_heads": 2}, "head_dim"),
    ],
)
def test_the_shared_positional_module_fits_every_layers_attention(positional, attention, fact):
    recipe = {**BASE, "positional": positional, "layers": [{"select": "1:", "attention": attention}]}
    errors = errors_of(recipe)
    assert len(errors) == 1 and errors[0][0] == "layers.0.attention" and errors[0][1].startswith(f"{fact} "), errors
    assert "sized for block 0" in errors[0][1]
    # The same heads in every layer are fine (other options may differ) and the model runs.
    same = {
        **BASE,
        "positional": positional,
        "layers": [{"select": 1, "attention": {**BASE["attention"], "bias": False}}],
    }
    model = zoo.build(same)
    model(torch.randint(0, 64, (2, 8)))


@pytest.fixture
def retention():
    if "retention" not in zoo.get_registry().names("attention"):
        pytest.skip("zoo-retnet is not installed")


@pytest.mark.parametrize("positional", ["alibi", "t5_relative"])
def test_retention_refuses_a_score_bias(retention, positional):
    assert errors_of("retnet-tiny", positional=positional) == [
        (
            "attention",
            f"attention 'retention' cannot take positional '{positional}', which adds a score bias; "
            "it takes embed, none, rotate encodings",
        )
    ]
    for fine in ("rope", "learned", "none"):
        zoo.load_recipe("retnet-tiny", positional=fine)


def test_an_attention_that_cannot_cross_attend_is_refused_in_an_encoder_decoder(retention):
    errors = errors_of(
        "t5-tiny",
        positional="rope",
        layers=[{"select": "all", "stack": "decoder", "attention": {"type": "retention", "num_heads": 4}}],
    )
    assert errors == [
        (
            "layers.0.attention",
            "attention 'retention' cannot be cross-attention, and the decoder of 'encoder-decoder' builds its "
            "cross-attention from each block's attention",
        )
    ]


# ---------------------------------------------------------------------------------------------- 6. plugins


@pytest.fixture
def installed(monkeypatch):
    """``installed(("zoo-x", module), ...)`` pretends those entry points are installed (see test_plugins)."""
    monkeypatch.delenv("ZOO_STRICT_PLUGINS", raising=False)

    def install(*entries: tuple[str, types.ModuleType]) -> None:
        points = []
        for name, module in entries:
            monkeypatch.setitem(sys.modules, module.__name__, module)
            points.append(importlib.metadata.EntryPoint(name=name, value=module.__name__, group="zoo"))
        monkeypatch.setattr(plugins, "_entry_points", lambda: points)
        plugins.reset()

    yield install
    plugins.reset()


class _Exits(types.ModuleType):
    """A module whose import raises what it is given (the import of ``value`` runs ``__getattr__``)."""

    def __init__(self, name: str, exc: BaseException) -> None:
        super().__init__(name)
        self._exc = exc

    def __getattr__(self, attr: str) -> Any:
        raise self._exc


def test_a_plugin_module_whose_attributes_raise_is_reported(installed):
    installed(("zoo-odd", _Exits("zoo_test_odd", SystemExit(7))))
    (message,) = load_warnings()
    assert message.startswith("plugin 'zoo-odd' failed and was skipped: ") and "SystemExit: 7" in message
    assert zoo.load_recipe("gpt-tiny").name == "gpt-tiny"


def load_warnings() -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plugins.get_registry()
    return [str(w.message) for w in caught if issubclass(w.category, plugins.PluginWarning)]


def test_a_plugin_that_exits_at_import_is_reported_like_any_failure(installed, tmp_path, monkeypatch):
    (tmp_path / "zoo_test_exits.py").write_text("raise SystemExit(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(
        plugins, "_entry_points", lambda: [importlib.metadata.EntryPoint("zoo-exits", "zoo_test_exits", "zoo")]
    )
    plugins.reset()
    assert load_warnings() == ["plugin 'zoo-exits' failed and was skipped: SystemExit: 3"]
    assert next(p for p in plugins.plugins() if p.name == "zoo-exits").status == "failed"
    assert zoo.load_recipe("gpt-tiny").name == "gpt-tiny"


@pytest.mark.parametrize("exc", [SystemExit(3), GeneratorExit(), BaseException("odd")], ids=["exit", "genexit", "base"])
def test_a_hook_that_raises_any_exception_is_reported(installed, exc):
    @zoo.hookimpl
    def register_components(register):
        raise exc

    module = types.ModuleType("zoo_test_hook_exits")
    module.register_components = register_components
    installed(("zoo-hook", module))
    if isinstance(exc, GeneratorExit):
        with pytest.raises(GeneratorExit):
            plugins.get_registry()
        return
    (message,) = load_warnings()
    assert message.startswith(
        f"plugin 'zoo-hook' failed and was skipped: register_components raised {type(exc).__name__}"
    )


def test_an_interrupt_at_import_is_not_swallowed(installed, tmp_path, monkeypatch):
    (tmp_path / "zoo_test_interrupt.py").write_text("raise KeyboardInterrupt\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(
        plugins, "_entry_points", lambda: [importlib.metadata.EntryPoint("zoo-int", "zoo_test_interrupt", "zoo")]
    )
    plugins.reset()
    with pytest.raises(KeyboardInterrupt):
        plugins.get_registry()


class Brittle(nn.Module):
    """A norm whose config's own code raises."""

    def __init__(self, d_model: int, **options: Any) -> None:
        super().__init__()


class BrittleConfig(ComponentConfig):
    type: Literal["brittle"] = "brittle"
    where: str = "none"

    @model_validator(mode="after")
    def _validate(self):
        if self.where == "validator":
            raise KeyError("validator")
        if self.where == "exit":
            raise SystemExit(5)
        return self

    def check(self, ctx):
        if self.where == "check":
            return [1 / 0]
        return []


@pytest.fixture
def brittle(register_plugin):
    class Plugin:
        @zoo.hookimpl
        def register_components(self, register):
            register("norm", "brittle", Brittle, BrittleConfig)

    register_plugin(Plugin(), "brittle-plugin")


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("validator", "norm 'brittle' (plugin 'brittle-plugin'): validating its options raised KeyError: 'validator'"),
        ("exit", "norm 'brittle' (plugin 'brittle-plugin'): validating its options raised SystemExit: 5"),
        ("check", "norm 'brittle' (plugin 'brittle-plugin'): check() raised ZeroDivisionError: division by zero"),
    ],
)
def test_a_plugin_config_that_raises_becomes_a_recipe_error(brittle, where, message):
    errors = errors_of({**BASE, "norm": {"type": "brittle", "where": where}})
    assert errors == [("norm", message)]


def test_an_undecodable_shipped_recipe_is_reported_and_skipped(register_plugin, tmp_path, monkeypatch):
    shipped = tmp_path / "recipes"
    shipped.mkdir()
    (shipped / "latin-tiny.yaml").write_bytes(b"extends: gpt-tiny\nname: caf\xe9\n")
    (shipped / "broken-tiny.yaml").write_text("name: [unclosed\n")
    (shipped / "fine-tiny.yaml").write_text("extends: gpt-tiny\nname: fine-tiny\n")

    class Plugin:
        @zoo.hookimpl
        def register_recipes(self):
            return [shipped]

    register_plugin(Plugin(), "shipping-plugin")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        named = named_recipes()
    messages = sorted(str(w.message) for w in caught if issubclass(w.category, plugins.PluginWarning))
    assert "fine-tiny" in named and "latin-tiny" not in named and "broken-tiny" not in named
    assert len(messages) == 2
    assert messages[0].startswith("plugin 'shipping-plugin' ships recipe 'broken-tiny'")
    assert messages[1].startswith("plugin 'shipping-plugin' ships recipe 'latin-tiny'")
    assert "not UTF-8 text" in messages[1] and messages[1].endswith("; skipped")
    assert zoo.load_recipe("fine-tiny").vocab_size == 256
    # A name of a skipped recipe says it is not there; strict mode makes the broken file an error.
    with pytest.raises(zoo.RecipeError, match="no recipe file or named recipe 'latin-tiny'"):
        zoo.load_recipe("latin-tiny")
    (shipped / "latin-tiny.yaml").write_bytes(b"extends: gpt-tiny\nname: caf\xe9 \n")  # changed: checked again
    monkeypatch.setenv("ZOO_STRICT_PLUGINS", "1")
    with pytest.raises(zoo.PluginError, match="ships recipe 'latin-tiny'"):
        named_recipes()


def test_the_retention_config_declares_its_limits(retention):
    config = zoo.get_registry().get("attention", "retention").config
    assert config.supports_cross is False and "bias" not in config.positional_styles
    assert config.model_fields["num_heads"].metadata  # bounded


def test_what_dump_yaml_writes_load_yaml_reads_back():
    from zoo.recipe import dump_yaml

    data = {"name": "1e-3", "description": "on", "train": {"data": "0o17", "lr": 1e-05}, "x": ["010", "1:04", 10, None]}
    assert load_yaml(dump_yaml(data)) == data
    assert zoo.check_buildable is check_buildable


@pytest.mark.parametrize("device", ["nonsense", "cuda:x", 3.5])
def test_a_device_torch_does_not_know_is_refused(device):
    with pytest.raises(zoo.RecipeError, match="unknown device"):
        zoo.build("gpt-tiny", device=device)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_where_there_is_none_is_refused():
    with pytest.raises(zoo.RecipeError, match="CUDA is not available"):
        zoo.build("gpt-tiny", device="cuda")
