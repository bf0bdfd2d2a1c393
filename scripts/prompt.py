"""Ask a trained model one question: its completion and, with the gold answer, the reward breakdown.

    .venv/bin/python scripts/prompt.py --model grpo -q "มีแอปเปิล 3 ผล ซื้อเพิ่มอีก 4 ผล มีแอปเปิลกี่ผล" --gold 7
    .venv/bin/python scripts/prompt.py --model sft --heldout 3          # held-out problem 3, with its gold

Held-out problem N is line N of results/data/heldout.jsonl (1-based), the number the report and README give it.

MODEL is base, sft, or a trained run under results/runs/ (grpo, dr_grpo, dpo, ppo, ...); the prompt is built as
every stage builds it (the config's system prompt and chat template). Greedy by default; --samples N draws N
completions at --temperature (the evaluation's 1.0 by default), seeded by --seed.
"""

import argparse
import sys
from pathlib import Path

from thai_grpo.workflow import eval_settings, load_config_files
from thai_grpo.core.io import read_jsonl
from thai_grpo.core.rewards import reward_breakdown
from thai_grpo.data.prompts import SYSTEM_PROMPT


def adapter_of(results: Path, model: str) -> Path | None:
    """The adapter folder a model samples with (None for the bare base), as the sample rule finds it."""
    if model == "base":
        return None
    path = results / "model/sft_adapter" if model == "sft" else results / "runs" / model / "adapter"
    if not path.is_dir():
        trained = sorted(p.parent.name for p in (results / "runs").glob("*/adapter"))
        sys.exit(f"no adapter for {model!r} at {path}: run `make run` first, or pick one of base, sft"
                 f"{', ' + ', '.join(trained) if trained else ''}")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="grpo", help="base, sft, or a trained run (default grpo)")
    question = parser.add_mutually_exclusive_group(required=True)
    question.add_argument("--question", "-q", help="the question, in Thai")
    question.add_argument("--heldout", type=int, metavar="N",
                          help="held-out problem N (line N of results/data/heldout.jsonl, as the report numbers it)")
    parser.add_argument("--gold", type=int, help="the gold answer: prints the reward breakdown")
    parser.add_argument("--samples", type=int, default=0, help="sampled completions (0: one greedy answer)")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--results", type=Path, default=Path("results"))
    parser.add_argument("--configfile", nargs="+", default=["config/config.yaml"],
                        help="the run's config files, as given to snakemake (the system prompt and chat template)")
    args = parser.parse_args()

    config = load_config_files(args.configfile)
    base = args.results / "model/base"
    if not base.is_dir():
        sys.exit(f"no base model at {base}: run `make run` (or `snakemake results/model/base`) first")
    text, gold = args.question, args.gold
    if args.heldout is not None:
        rows = read_jsonl(args.results / "data/heldout.jsonl")
        if not 1 <= args.heldout <= len(rows):
            sys.exit(f"--heldout {args.heldout}: the held-out set has problems 1 to {len(rows)}")
        text, gold = rows[args.heldout - 1]["question"], rows[args.heldout - 1]["answer"]
    adapter = adapter_of(args.results, args.model)

    from thai_grpo.models.loading import load_policy, load_tokenizer
    from thai_grpo.models.sampling import generate

    model = load_policy(base, adapter, merged=adapter is not None).eval()
    tokenizer = load_tokenizer(base)
    ev = eval_settings(config)  # the evaluation's completion budget and chat template
    completions = generate(model, tokenizer, [text], config["data"].get("system_prompt", SYSTEM_PROMPT),
                           max(args.samples, 1), ev["max_new_tokens"], args.temperature if args.samples else None,
                           args.seed, ev.get("chat_template_kwargs"))[0]
    print(f"question ({args.model}): {text}")
    for i, completion in enumerate(completions, 1):
        label = "greedy" if not args.samples else f"sample {i}/{args.samples}"
        cut = " (cut at the budget)" if completion["truncated"] else ""
        print(f"\n--- {label}, {completion['num_tokens']} tokens{cut} ---\n{completion['text']}")
        if gold is not None:
            parts = reward_breakdown(completion["text"], gold)
            print(f"reward (gold {gold}): " + ", ".join(f"{k} {v:.1f}" for k, v in parts.items()))


if __name__ == "__main__":
    main()
