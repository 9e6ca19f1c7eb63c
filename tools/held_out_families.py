"""Held-out configs: every family's test configs with options switched that no test names, each imported by zoo
and compared with transformers. A config either imports and matches within 1e-4 (fp32, padded batch), or is
refused by name (``HFImportError``); anything else (a mismatch, a crash) is a failure. Decoders are compared on
left-padded logits; encoders, encoder-decoders, vision, speech and dual-encoder families as ``tests/test_hf.py``
compares their cases (``max_differences``).

    python tools/held_out_families.py --per-family 6 --seed 0

Variations are drawn from each family's own config: booleans flipped, a few numbers moved, an activation from
transformers' table, a rope scaling from the five zoo computes (and one it does not). Configs transformers itself
cannot build are skipped and counted.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
ROPES = [
    {"rope_type": "linear", "factor": 2.0},
    {"rope_type": "dynamic", "factor": 2.0},
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8},
    {
        "rope_type": "llama3",
        "factor": 8.0,
        "original_max_position_embeddings": 8,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
    },
    {"rope_type": "proportional", "factor": 2.0},  # not one zoo computes: must be refused
]
ACTIVATIONS = ["silu", "gelu", "gelu_new", "relu", "relu2", "gelu_pytorch_tanh", "tanh", "quick_gelu"]


def variations(config: dict[str, Any], attributes: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """The case's config with two to four of its family's own options changed (not the generic ones)."""
    out = dict(config)
    choices = [k for k, v in attributes.items() if isinstance(v, bool) and k != "use_cache"]
    choices += [k for k in ("hidden_act", "rope_scaling", "rms_norm_eps", "sliding_window") if k in attributes]
    choices += [k for k in ("activation_function", "layer_norm_eps") if k in attributes]
    for key in rng.sample(choices, min(len(choices), rng.randint(2, 4))):
        value = attributes.get(key)
        if key in ("hidden_act", "activation_function"):
            out[key] = rng.choice(ACTIVATIONS)
        elif key == "rope_scaling":
            out[key] = rng.choice(ROPES)
        elif key in ("rms_norm_eps", "layer_norm_eps"):
            out[key] = rng.choice([1e-5, 1e-6, 1e-3])
        elif key == "sliding_window":
            out[key] = rng.choice([None, 3, 5])
        else:
            out[key] = not out.get(key, value)
    return out


def _raised_in_zoo(exc: BaseException) -> bool:
    """Whether the innermost frame of ``exc`` outside torch is zoo's (a crash of zoo's) rather than transformers'."""
    import traceback

    frames = [f.filename for f in traceback.extract_tb(exc.__traceback__) if f"{Path('torch')}" not in f.filename]
    return bool(frames) and str(ROOT / "zoo") in frames[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-family", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--families", nargs="*", help="model types (default: every family with cases)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    warnings.simplefilter("ignore")
    import hf_cases
    import test_hf
    import transformers

    import zoo
    from zoo.hf import HFImportError, from_hf

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    configs, cases, kinds = {}, {}, {}
    for module in hf_cases.modules():
        kinds.update(dict.fromkeys(module.CONFIGS, getattr(module, "KIND", "decoder")))
        configs.update(module.CONFIGS)
        for case in module.CASES.values():
            cases.setdefault(case["family"], []).append(case)
    rng = random.Random(args.seed)
    tally = {"match": 0, "refused": 0, "skipped": 0, "FAILED": 0}
    for family in sorted(args.families or cases):
        config_class = getattr(transformers, configs[family])
        generic = set(transformers.PretrainedConfig().to_dict())
        attributes = {k: v for k, v in config_class().to_dict().items() if k not in generic}
        for _ in range(args.per_family):
            case = rng.choice(cases[family])
            config = variations(case["config"], attributes, rng)
            changed = {k: v for k, v in config.items() if case["config"].get(k, attributes.get(k)) != v}
            with tempfile.TemporaryDirectory() as folder:
                try:
                    torch.manual_seed(0)
                    hf = getattr(transformers, case["hf_class"])(config_class(**config)).eval()
                    with torch.no_grad():  # every parameter off its init (norm scales and biases too)
                        for p in hf.parameters():
                            p.add_(0.02 * torch.randn_like(p))
                    hf.save_pretrained(folder)
                except Exception:  # transformers cannot build or save it either
                    tally["skipped"] += 1
                    continue
                try:
                    model = from_hf(folder).eval()
                except HFImportError as exc:
                    tally["refused"] += 1
                    print(f"refused  {family} {changed}: {str(exc).splitlines()[-1][:150]}")
                    continue
                except Exception as exc:  # anything but a refusal by name is a failure
                    tally["FAILED"] += 1
                    print(f"FAILED   {family} {changed}: {type(exc).__name__}: {str(exc)[:150]}")
                    continue
            if kinds[family] != "decoder":  # compared as tests/test_hf.py compares the family's cases
                reference = test_hf.Reference(test_hf.Case(**{**case, "config": config}), hf, model, Path(folder))
                try:
                    error = max(test_hf.max_differences(reference).values())
                except Exception as exc:  # noqa: BLE001 - transformers cannot run it (skipped), or zoo crashed
                    verdict = "FAILED" if _raised_in_zoo(exc) else "skipped"
                    tally[verdict] += 1
                    print(f"{verdict:8} {family} {changed}: {type(exc).__name__}: {str(exc)[:150]}")
                    continue
                verdict = "match" if error <= 1e-4 else "FAILED"
                tally[verdict] += 1
                print(f"{verdict:8} {family} {changed}: max |diff| {error:.2e} ({zoo.count_parameters(model)} params)")
                continue
            ids = torch.randint(1, config["vocab_size"], (2, 12), generator=torch.Generator().manual_seed(1))
            mask = torch.ones_like(ids)
            mask[1, :3] = 0
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            with torch.no_grad():
                try:
                    expected = hf(input_ids=ids, attention_mask=mask, position_ids=positions).logits
                except Exception:
                    tally["skipped"] += 1
                    continue
                actual = model(ids, attention_mask=mask, positions=positions).logits
            error = (expected - actual)[mask.bool()].abs().max().item()
            verdict = "match" if error <= 1e-4 else "FAILED"
            tally[verdict] += 1
            print(f"{verdict:8} {family} {changed}: max |diff| {error:.2e} ({zoo.count_parameters(model)} params)")
    print(", ".join(f"{k}: {v}" for k, v in tally.items()))
    return 1 if tally["FAILED"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
