"""One folder convention: every reader takes a model, checkpoint, run or Hugging Face folder; files are written
with the permissions the umask gives; what a plain install ships (recipes inside the package, numpy declared);
HF-style names on built models."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest
import torch
from clean_errors import FAST, assert_clean_error, cli

import zoo
import zoo.files
from zoo.locate import NotAModelFolder, locate
from zoo.train import train

ROOT = Path(__file__).resolve().parents[1]
TINY = {
    "name": "tiny",
    "architecture": "decoder",
    "vocab_size": 256,
    "d_model": 32,
    "num_layers": 2,
    "max_len": 32,
    "attention": {"type": "gqa", "num_heads": 4, "num_kv_heads": 2},
    "positional": {"type": "rope"},
    "norm": {"type": "rmsnorm"},
    "ffn": {"type": "swiglu", "hidden": 64},
    "head": {"type": "lm", "tie_embeddings": False},
}


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("run") / "run"
    train(TINY, out=out, device="cpu", **{**FAST, "train.checkpoint_interval": 2})
    return out


def _logits(model: torch.nn.Module) -> torch.Tensor:
    ids = torch.arange(12).reshape(2, 6) % 256
    with torch.no_grad():
        return model.eval()(ids).logits


def _modes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): stat.filemode(p.stat().st_mode) for p in [root, *root.rglob("*")]}


# ---------------------------------------------------------------------------------------------- the four kinds


def test_locate_tells_the_four_kinds_apart(tmp_path, run_dir):
    zoo.save(zoo.build(TINY), tmp_path / "model")
    zoo.to_hf(zoo.build(TINY), tmp_path / "hf")
    checkpoint = sorted((run_dir / "checkpoints").glob("step-*"))[-1]
    assert locate(tmp_path / "model").kind == "model"
    assert locate(checkpoint).kind == "checkpoint"
    assert (found := locate(run_dir)).kind == "run" and found.path == checkpoint
    assert found.note == f"run {run_dir}: its latest complete checkpoint, {checkpoint.name}"
    assert locate(tmp_path / "hf").kind == "hf"


def test_every_kind_loads_the_same_weights(tmp_path, run_dir):
    trained = zoo.load(run_dir)
    reference = _logits(trained)
    checkpoint = sorted((run_dir / "checkpoints").glob("step-*"))[-1]
    trained.save_pretrained(tmp_path / "model")
    zoo.to_hf(trained, tmp_path / "hf")
    for folder in (run_dir, checkpoint, tmp_path / "model", tmp_path / "hf"):
        assert torch.allclose(_logits(zoo.load(folder)), reference, atol=1e-5), folder


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p / "nothing", "no such folder; a model is read from a zoo model folder"),
        (lambda p: (p / "f.txt").write_text("x") and p / "f.txt", "is a file, not a folder"),
        (lambda p: (p / "empty").mkdir() or p / "empty", "holds no model: expected a zoo model folder"),
        (lambda p: (p / "r" / "checkpoints").mkdir(parents=True) or p / "r", "a run folder without a complete"),
    ],
)
def test_a_folder_of_no_kind_is_named_with_what_each_kind_holds(tmp_path, make, message):
    with pytest.raises(NotAModelFolder) as info:
        zoo.load(make(tmp_path))
    assert message in str(info.value)


def test_summary_and_build_take_a_model_folder(tmp_path, run_dir):
    result = cli("summary", str(run_dir), "--seq-len", "8")
    assert result.exit_code == 0, result.output
    assert "tiny" in result.output
    assert_clean_error(cli("summary", str(tmp_path)), "holds no model")


# ---------------------------------------------------------------------------------------------- HF-style names


def test_save_pretrained_and_from_pretrained_round_trip(tmp_path):
    model = zoo.build(TINY)
    model.save_pretrained(tmp_path / "m")
    assert {"recipe.yaml", "model.safetensors", "config.json", "checksums.json"} <= {
        p.name for p in (tmp_path / "m").iterdir()
    }
    config = zoo.files.read_json(tmp_path / "m" / "config.json")
    assert config["recipe"]["attention"]["num_kv_heads"] == 2 and config["architecture"] == "decoder"
    again = type(model).from_pretrained(tmp_path / "m")
    assert torch.equal(_logits(again), _logits(model))


def test_from_pretrained_refuses_another_architecture(tmp_path):
    from zoo.architectures import EncoderModel

    zoo.save(zoo.build(TINY), tmp_path / "m")
    with pytest.raises(zoo.ZooError, match="holds a DecoderModel \\(decoder\\), not a EncoderModel"):
        EncoderModel.from_pretrained(tmp_path / "m")


def test_model_output_is_subscriptable_like_transformers():
    model = zoo.build(TINY)
    ids = torch.arange(8).reshape(1, 8)
    out = model(ids, labels=ids)
    assert out["logits"] is out.logits and out[0] is out.logits and out[1] is out.loss
    assert "loss" in out and "aux_loss" not in out
    with pytest.raises(KeyError, match="'aux_loss': this output has logits, loss"):
        out["aux_loss"]


# ---------------------------------------------------------------------------------------------- permissions


def test_saved_files_get_the_umask_permissions(tmp_path, umask_022):
    zoo.save(zoo.build(TINY), tmp_path / "m")
    zoo.to_hf(zoo.build(TINY), tmp_path / "hf")
    for root in (tmp_path / "m", tmp_path / "hf"):
        modes = _modes(root)
        assert set(modes.values()) <= {"drwxr-xr-x", "-rw-r--r--"}, modes


def test_training_checkpoints_get_the_umask_permissions(tmp_path, umask_022):
    train(TINY, out=tmp_path / "run", device="cpu", **FAST)
    modes = _modes(tmp_path / "run")
    assert modes["checkpoints/step-00000002"] == "drwxr-xr-x"
    assert set(modes.values()) <= {"drwxr-xr-x", "-rw-r--r--"}, modes


def test_a_stricter_umask_is_respected(tmp_path):
    old = os.umask(0o077)
    try:
        zoo.save(zoo.build(TINY), tmp_path / "m")
    finally:
        os.umask(old)
    assert stat.filemode((tmp_path / "m" / "model.safetensors").stat().st_mode) == "-rw-------"


# ---------------------------------------------------------------------------------------------- a plain install


def test_named_recipes_live_inside_the_package():
    from zoo.architectures import RECIPES_DIR

    package = Path(zoo.__file__).resolve().parent
    assert RECIPES_DIR.parent == package and len(list(RECIPES_DIR.glob("*.yaml"))) >= 13
    # the repository's top-level recipes/ is the same folder, so recipes/gpt2-small.yaml works from a clone
    assert (ROOT / "recipes").resolve() == RECIPES_DIR


def test_every_module_imported_at_run_time_is_a_declared_dependency():
    import ast

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        pytest.skip("tomllib needs Python 3.11")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {d.split(">")[0].split("=")[0].split("[")[0].strip().lower() for d in project["dependencies"]}
    extras = {d.split(">")[0].strip().lower() for ds in project["optional-dependencies"].values() for d in ds}
    distribution = {"yaml": "pyyaml", "PIL": "pillow", "sklearn": "scikit-learn", "pydantic_core": "pydantic"}
    stdlib = set(sys.stdlib_module_names)
    top_level: set[str] = set()
    for path in (ROOT / "zoo").rglob("*.py"):
        if (ROOT / "zoo" / "data") in path.parents:  # templates an export copies out (remote code), never imported
            continue
        for node in ast.parse(path.read_text()).body:  # module level only: what `import zoo.x` needs
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            top_level |= {n.split(".")[0] for n in names}
    third_party = {n for n in top_level if n not in stdlib and n != "zoo" and n != "__future__"}
    missing = {distribution.get(n, n).lower() for n in third_party} - declared
    assert not missing, f"imported at module level but not in [project] dependencies: {missing}"
    assert "numpy" in declared  # torch warns "Failed to initialize NumPy" on every command without it
    assert {"transformers", "matplotlib"} <= extras - declared  # optional extras stay optional


def test_generate_reads_a_model_folder_and_a_hugging_face_folder_as_bytes(tmp_path, run_dir):
    from zoo.generate import generate_text

    trained = zoo.load(run_dir)
    trained.save_pretrained(tmp_path / "model")
    zoo.to_hf(trained, tmp_path / "hf")
    expected, _ = generate_text(run_dir, ["The "], max_new_tokens=6, temperature=0)
    for folder in (tmp_path / "model", tmp_path / "hf"):
        texts, _ = generate_text(folder, ["The "], max_new_tokens=6, temperature=0)
        assert texts == expected, folder
    result = cli("generate", str(tmp_path / "model"), "--prompt", "The ", "--max-new-tokens", "4", "--seed", "0")
    assert result.exit_code == 0, result.output
    assert_clean_error(cli("generate", str(tmp_path), "--prompt", "x"), "holds no model: expected a zoo model folder")


def test_export_without_the_tokenizers_package_writes_the_rest_and_says_so(tmp_path, run_dir, monkeypatch):
    import importlib.util

    from zoo.hf import export_checkpoint

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tokenizers" else real(name, *a))
    done = export_checkpoint(run_dir, tmp_path / "hf")
    names = {p.name for p in (tmp_path / "hf").iterdir()}
    assert {"config.json", "model.safetensors", "generation_config.json"} <= names and "tokenizer.json" not in names
    assert any("needs the `tokenizers` package (pip install 'zoo[hf]'" in note for note in done.notes)
    assert zoo.files.read_json(tmp_path / "hf" / "generation_config.json")["eos_token_id"] is not None
