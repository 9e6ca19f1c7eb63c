"""An imported checkpoint, end to end, as a user runs it: the plain-install job of ``.ci/run`` (from an empty
folder, with only the zoo wheel and transformers installed).

    python tools/imported_model_check.py [WORK_DIR]

1. transformers makes a tiny random Llama and saves it with its tokenizer (a byte-level BPE with a chat template);
2. ``zoo import`` it; ``zoo generate --chat`` greedy;
3. ``zoo train --lora`` on a chat JSONL (loss on the assistant turns) for 20 steps;
4. ``zoo export --merge-lora``; ``transformers.pipeline("text-generation")`` loads the export, and its greedy text
   equals ``zoo generate``'s on the trained run.

Exits 1 with what differs. Needs no network and downloads nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

TEXT = "The quick brown fox jumps over the lazy dog. A zoo of transformers, read with its own tokenizer.\n" * 4
TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{{ eos_token }}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
CHATS = [
    [{"role": "user", "content": "Who jumps?"}, {"role": "assistant", "content": "The quick brown fox."}],
    [{"role": "user", "content": "Over what?"}, {"role": "assistant", "content": "The lazy dog."}],
]


def zoo(*args: str) -> str:
    """Run the ``zoo`` command; its stdout (exit on failure, with its output)."""
    done = subprocess.run(["zoo", *args], capture_output=True, text=True)
    print(f"$ zoo {' '.join(args)}\n{done.stdout}{done.stderr}", flush=True)
    if done.returncode != 0:
        sys.exit(f"zoo {args[0]} failed with exit code {done.returncode}")
    return done.stdout


def save_tokenizer(folder: Path) -> None:
    """A byte-level BPE learned from ``TEXT``, ``<s>`` before every text (as a Llama's), with a chat template."""
    import tokenizers
    import transformers

    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<s>", "</s>", "<|user|>", "<|assistant|>"],
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([TEXT] * 8, trainer=trainer)
    tok.post_processor = tokenizers.processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")
    fast.chat_template = TEMPLATE
    fast.save_pretrained(folder)


def tiny_llama(hidden: int = 64) -> Any:
    """A tiny random Llama over ``save_tokenizer``'s 300 ids (bos 0, eos 1)."""
    import transformers

    config = transformers.LlamaConfig(
        vocab_size=320,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        bos_token_id=0,
        eos_token_id=1,
    )
    return transformers.LlamaForCausalLM(config).eval()


def make_checkpoint(folder: Path) -> None:
    import torch

    torch.manual_seed(0)
    tiny_llama().save_pretrained(folder)
    save_tokenizer(folder)


def main() -> int:
    work = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())
    work.mkdir(parents=True, exist_ok=True)
    make_checkpoint(work / "tiny-llama")
    zoo("import", str(work / "tiny-llama"), "--out", str(work / "models" / "tiny-llama"))
    zoo("generate", str(work / "models" / "tiny-llama"), "--prompt", "Who jumps?", "--chat", "--temperature", "0")
    (work / "chat.jsonl").write_text("".join(json.dumps({"messages": m}) + "\n" for m in CHATS * 8))
    run = work / "runs" / "lora"
    zoo(
        "train",
        str(work / "models" / "tiny-llama"),
        "--init-from",
        str(work / "models" / "tiny-llama"),
        "--data",
        str(work / "chat.jsonl"),
        "--lora",
        "rank=8,alpha=16,targets=attention",
        "--set",
        "train.steps=20",
        "--set",
        "train.seq_len=64",
        "--set",
        "train.batch_size=4",
        "--set",
        "train.lr=0.01",
        "--out",
        str(run),
        "--no-summary",
        "--device",
        "cpu",
    )
    prompt = "Who jumps?"
    ours = zoo("generate", str(run), "--prompt", prompt, "--new", "16", "--temperature", "0").rstrip("\n")
    zoo("export", str(run), str(work / "merged"), "--merge-lora")

    import transformers

    pipe = transformers.pipeline("text-generation", model=str(work / "merged"))
    theirs = pipe(prompt, max_new_tokens=16, do_sample=False)[0]["generated_text"]
    print(f"zoo:          {ours!r}\ntransformers: {theirs!r}")
    if ours != theirs:
        print("the merged export's greedy text differs from zoo's")
        return 1
    print("the merged export generates zoo's text")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
