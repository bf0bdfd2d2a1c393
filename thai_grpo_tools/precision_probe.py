"""How much of a small trained update each evaluation path (dtype x merged or not) keeps: GRPO's change over SFT,
scaled to ``--scales`` of its size, read as the shift in the summed log-probability of fixed completions, against
float64 (the truth) and float32 unmerged.

    .venv/bin/python -m thai_grpo_tools.precision_probe --results results --problems 8 --samples 2
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from thai_grpo.data.prompts import SYSTEM_PROMPT
from thai_grpo.evaluation.token_logprobs import sampled_token_pairs
from thai_grpo.models.loading import load_policy, load_tokenizer
from thai_grpo.models.sampling import sample_heldout

PATHS = [(dtype, merged) for dtype in ("float64", "float32", "bfloat16", "float16") for merged in (False, True)]
ADAPTER_FILE = "adapter_model.safetensors"


def scaled_adapter(sft_dir: Path, grpo_dir: Path, scale: float, target: Path) -> Path:
    """An adapter folder whose weights are SFT + ``scale`` x (GRPO - SFT), computed in float64, stored in float32."""
    sft, grpo = load_file(str(sft_dir / ADAPTER_FILE)), load_file(str(grpo_dir / ADAPTER_FILE))
    if sft.keys() != grpo.keys():
        raise ValueError(f"{sft_dir} and {grpo_dir} hold different LoRA tensors: train GRPO from this SFT adapter")
    target.mkdir(parents=True, exist_ok=True)
    save_file({name: (sft[name].double() + scale * (grpo[name].double() - sft[name].double())).float()
               for name in sft}, str(target / ADAPTER_FILE))
    (target / "adapter_config.json").write_text((grpo_dir / "adapter_config.json").read_text())
    return target


def summed_logprob(model, pairs: list[tuple[list[int], list[int]]]) -> float:
    """The sum over every completion token of log p(token | prefix), log-softmax in float64."""
    total = 0.0
    with torch.no_grad():
        for prompt, completion in pairs:
            ids = torch.tensor([prompt + completion])
            logits = model(input_ids=ids).logits[0, len(prompt) - 1:-1].double()
            total += torch.log_softmax(logits, -1).gather(1, torch.tensor(completion)[:, None]).sum().item()
    return total


def path_logprob(base: Path, adapter: Path, dtype: str, merged: bool, pairs) -> float:
    model = load_policy(base, adapter, dtype=dtype, merged=merged).eval()
    if dtype == "float64":
        model = model.double()  # the LoRA matrices too: float64 end to end
    return summed_logprob(model, pairs)


def fixed_completions(results: Path, problems: int, samples: int, seed: int):
    """GRPO's own samples (float32, unmerged) on the first held-out problems, as (prompt ids, completion ids)."""
    tokenizer = load_tokenizer(results / "model/base")
    rows = [json.loads(line) for line in (results / "data/heldout.jsonl").read_text().splitlines()][:problems]
    model = load_policy(results / "model/base", results / "runs/grpo/adapter", dtype="float32").eval()
    records = sample_heldout(model, tokenizer, rows, SYSTEM_PROMPT, samples, 80, 1.0, problems, seed)
    return sampled_token_pairs(tokenizer, records, SYSTEM_PROMPT, problems * samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("results"))
    parser.add_argument("--scales", type=float, nargs="+", default=[1.0, 0.01, 0.001])
    parser.add_argument("--problems", type=int, default=8)
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--out", type=Path, help="also write the table as JSON here")
    options = parser.parse_args()
    torch.manual_seed(options.seed)
    torch.set_num_threads(1)
    base, sft, grpo = (options.results / p for p in ("model/base", "model/sft_adapter", "runs/grpo/adapter"))
    pairs = fixed_completions(options.results, options.problems, options.samples, options.seed)
    print(f"{len(pairs)} completions, {sum(len(c) for _, c in pairs)} tokens")
    reading = {path: path_logprob(base, sft, *path, pairs) for path in PATHS}
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for scale in options.scales:
            adapter = scaled_adapter(sft, grpo, scale, Path(scratch) / f"scale-{scale}")
            shifts = {path: path_logprob(base, adapter, *path, pairs) - reading[path] for path in PATHS}
            truth, old = shifts[("float64", False)], shifts[("float32", False)]
            for (dtype, merged), shift in shifts.items():
                rows.append({"scale": scale, "dtype": dtype, "merged": merged, "shift": shift,
                             "error_vs_float64": abs(shift - truth) / abs(truth),
                             "error_vs_float32_unmerged": abs(shift - old) / abs(old)})
    print(f"{'scale':>6} {'dtype':>9} {'merged':>6} {'shift (nats)':>14} {'rel err vs f64':>15} {'vs f32 unmerged':>16}")
    for row in rows:
        print(f"{row['scale']:>6g} {row['dtype']:>9} {str(row['merged']):>6} {row['shift']:>+14.6f} "
              f"{row['error_vs_float64']:>15.2e} {row['error_vs_float32_unmerged']:>16.2e}")
    if options.out:
        options.out.write_text(json.dumps({"completions": len(pairs), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
