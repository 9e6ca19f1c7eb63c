"""Start-up cost of the `zoo` command, measured side by side with a bare `python -c 'import torch'`.

    python tools/bench_cli.py [--repeat 5]

Each command runs in a fresh process, stdout discarded (piped, as in scripts), `--repeat` times; the table
shows the median and best wall time, the peak resident memory (from getrusage of the child) and the ratio to
importing torch measured in the same run. Targets: `zoo --help` under 0.5 s without importing torch;
`zoo list` within 1 s of importing torch; `zoo summary recipes/mixtral-8x7b.yaml` under 5 s and 1.5 GB.
Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from zoo.limits import count_argument

ROOT = Path(__file__).resolve().parents[1]

# Runs one command and reports its wall time and its peak RSS: the probe's only child is the command.
PROBE = """
import json, resource, subprocess, sys, time
start = time.perf_counter()
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).returncode
wall = time.perf_counter() - start
kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"wall": wall, "rss": kib * 1024, "code": code}))
"""


def zoo_command() -> list[str]:
    """The installed console script next to this interpreter, else ``python -m zoo.cli``."""
    script = Path(sys.executable).with_name("zoo")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "zoo.cli"]


def measure(argv: list[str], repeat: int) -> dict[str, float]:
    runs = []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, cwd=ROOT)
        result = json.loads(out.stdout)
        if result["code"] != 0:
            raise SystemExit(f"{' '.join(argv)} failed with exit status {result['code']}")
        runs.append(result)
    walls = [r["wall"] for r in runs]
    return {"median": statistics.median(walls), "best": min(walls), "rss": max(r["rss"] for r in runs)}


def imports_torch(argv: list[str]) -> bool:
    out = subprocess.run([sys.executable, "-X", "importtime", *argv], capture_output=True, text=True, cwd=ROOT)
    return any(line.rstrip().endswith("| torch") for line in out.stderr.splitlines())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=count_argument(1, 100_000), default=3, help="runs per command (default 3)")
    args = parser.parse_args()

    zoo = zoo_command()
    torch_import = measure([sys.executable, "-c", "import torch"], args.repeat)
    base = torch_import["median"]
    rows = [("python -c 'import torch'", torch_import, None, "baseline")]
    help_ = measure([*zoo, "--help"], args.repeat)
    help_torch = imports_torch([sys.executable, "-m", "zoo.cli", "--help"])
    rows.append(
        ("zoo --help", help_, help_["median"] < 0.5 and not help_torch, f"< 0.5 s, torch imported: {help_torch}")
    )
    list_ = measure([*zoo, "list"], args.repeat)
    rows.append(("zoo list", list_, list_["median"] - base <= 1.0, f"torch + {list_['median'] - base:+.2f} s <= 1 s"))
    summary = measure([*zoo, "summary", "recipes/mixtral-8x7b.yaml"], args.repeat)
    ok = summary["median"] < 5.0 and summary["rss"] < 1.5e9
    rows.append(("zoo summary recipes/mixtral-8x7b.yaml", summary, ok, "< 5 s, < 1.5 GB"))

    print(f"{args.repeat} runs each; {' '.join(zoo)}")
    print(f"{'command':40} {'median s':>9} {'best s':>8} {'x torch':>8} {'peak MiB':>9}  target")
    for name, r, passed, target in rows:
        verdict = "" if passed is None else ("ok   " if passed else "MISS ")
        ratio = r["median"] / base
        print(f"{name:40} {r['median']:9.2f} {r['best']:8.2f} {ratio:8.2f} {r['rss'] / 2**20:9.0f}  {verdict}{target}")
    return 0 if all(passed is not False for _, _, passed, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
