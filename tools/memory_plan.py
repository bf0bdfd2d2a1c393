"""The memory plan of the real config (`make memory-plan`): results/memory_plan/plan.json and plan.md, computed by
thai_grpo_tools.stage_plans for Qwen3-0.6B on a 16 GB T4 (not measured on a GPU).

    python tools/memory_plan.py [OUT_DIR]      the plan of config/config.yaml + config/qwen3-0.6b.yaml
    python tools/memory_plan.py --check        the formula against peaks measured on CPU stand-ins (real
                                                 vocabulary, 2-3 sizes): PPO's forward-backward of one chunk, each
                                                 size in a fresh process, peak RSS above the level before the step
    python tools/memory_plan.py --compare PEAKS BASE ADAPTER TINY
                                                 after a DAG run on CUDA with THAI_GRPO_CUDA_PEAKS=PEAKS: each job's
                                                 measured peak CUDA memory (gpus.cuda_peak_writer) beside the
                                                 plan for the stand-in BASE / ADAPTER at the sizes of the TINY config
At Qwen3-0.6B's own shape, stage by stage: tools/rehearse_full.py (make rehearse-full, make gpu-check).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


REPO = Path(__file__).resolve().parents[1]
# Stand-in sizes for the check: Qwen3-0.6B's vocabulary and ratios (head_dim = 2 x hidden / heads, KV heads =
# heads / 2, intermediate = 3 x hidden), depth and width shrunk; rows x tokens of one PPO chunk.
CHECK_SIZES = [{"hidden_size": 32, "num_hidden_layers": 2, "rows": 2, "width": 192},
               {"hidden_size": 64, "num_hidden_layers": 4, "rows": 2, "width": 256},
               {"hidden_size": 128, "num_hidden_layers": 4, "rows": 4, "width": 256}]
TOLERANCE = 0.20  # measured peak within 20% of the prediction
# glibc's malloc keeps freed blocks below its (growing) mmap threshold in the heap, where RSS still counts them: a
# fixed 64 KiB threshold maps every tensor of that size or more on its own, so RSS follows the live tensors.
MALLOC_ENV = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "65536"}


def merged_config(*extra: Path) -> dict:
    """config/config.yaml with config/qwen3-0.6b.yaml (and ``extra`` files) merged on top, as Snakemake merges them."""
    from thai_grpo_tools.stage_plans import real_config

    return real_config(REPO, *extra)


def write_plan(out_dir: Path) -> list[dict]:
    from thai_grpo.core.io import write_json
    from thai_grpo.jobs.memory_stages import CARD_GIB, RESERVE_GIB
    from thai_grpo_tools.stage_plans import CARDS_GIB, markdown_table, sizes_for_card, stage_plans

    config = merged_config()
    plans = stage_plans(config)
    sizes = {card: sizes_for_card(config, gib) for card, gib in CARDS_GIB.items()}  # what auto chooses per card
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "plan.json", {"model": "Qwen/Qwen3-0.6B", "card": "16 GB T4", "card_gib": CARD_GIB,
                                       "reserve_gib": RESERVE_GIB, "measured": False, "stages": plans,
                                       "sizes_per_card": sizes})
    table = markdown_table(plans)
    (out_dir / "plan.md").write_text(table + "\n", encoding="utf-8")
    print(table)
    for card, chosen in sizes.items():
        print(f"{card}: {chosen}")
    return plans


MEASURE = r"""
import json, sys, torch
from peft import LoraConfig, get_peft_model
from transformers import Qwen3Config, Qwen3ForCausalLM, Qwen3ForSequenceClassification
from thai_grpo.methods.ppo import _chunk_losses
from thai_grpo.methods.settings import PPOSettings
from thai_grpo.jobs.memory_plan import Lora, Shape, lora_parameters, ppo_logit_floats, ATTENTION_TARGETS
from thai_grpo_tools.stage_plans import activation_floats
from thai_grpo_tools.rehearsal import QWEN3_0_6B_CONFIG

size = json.loads(sys.argv[1])
torch.manual_seed(0); torch.set_num_threads(1)
h, layers, rows, width = size["hidden_size"], size["num_hidden_layers"], size["rows"], size["width"]
config = {**QWEN3_0_6B_CONFIG, "hidden_size": h, "num_hidden_layers": layers, "num_attention_heads": 4,
          "num_key_value_heads": 2, "head_dim": h // 2, "intermediate_size": 3 * h, "torch_dtype": "float32"}
lora = LoraConfig(r=16, lora_alpha=32, target_modules=list(ATTENTION_TARGETS))
policy = get_peft_model(Qwen3ForCausalLM(Qwen3Config(**config)), lora)
value = get_peft_model(Qwen3ForSequenceClassification(Qwen3Config(**config, num_labels=1, pad_token_id=151643)),
                       LoraConfig(task_type="SEQ_CLS", r=16, lora_alpha=32, target_modules=list(ATTENTION_TARGETS),
                                  modules_to_save=["score"]))
prompt = width // 2
ids = torch.randint(0, 1000, (rows, width))
rollout = {"width": prompt, "mask": torch.ones(rows, width - prompt, dtype=torch.bool), "ids": ids,
           "attention": torch.ones(rows, width, dtype=torch.long), "logprobs": torch.zeros(rows, width - prompt),
           "advantages": torch.ones(rows, width - prompt), "values": torch.zeros(rows, width - prompt),
           "returns": torch.ones(rows, width - prompt)}
def rss(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024
index = torch.arange(rows)
settings = PPOSettings(temperature=1.0)
losses = _chunk_losses(rollout, index, settings, {"policy": policy, "value": value})  # warm-up: kernels, workspaces
losses["loss"].backward(); del losses
for p in list(policy.parameters()) + list(value.parameters()):
    p.grad = None
import gc; gc.collect()
before = rss("VmRSS:")
open("/proc/self/clear_refs", "w").write("5")  # reset the peak RSS (VmHWM) to the current RSS
losses = _chunk_losses(rollout, index, settings, {"policy": policy, "value": value})
losses["loss"].backward()
peak = rss("VmHWM:")
shape = Shape.from_config(config)
l = Lora(r=16, target_modules=tuple(sorted(ATTENTION_TARGETS)))
tokens = rows * width
predicted = 4 * (activation_floats(shape, l, tokens) * 2                   # policy and value model
                 + rows * ppo_logit_floats(shape, width, width - prompt)    # full-vocabulary tensors
                 + 2 * lora_parameters(shape, l))                           # LoRA gradients
print(json.dumps({**size, "predicted_mib": predicted / 2**20, "measured_mib": (peak - before) / 2**20}))
"""


def check() -> bool:
    """Each stand-in size in a fresh process: predicted vs measured peak of one PPO chunk's forward-backward."""
    ok = True
    print(f"{'hidden':>6} {'layers':>6} {'rows x tokens':>14} {'predicted MiB':>14} {'measured MiB':>13} {'ratio':>6}")
    for size in CHECK_SIZES:
        done = subprocess.run([sys.executable, "-c", MEASURE, json.dumps(size)], capture_output=True, text=True,
                              cwd=REPO, check=True, env=MALLOC_ENV)
        result = json.loads(done.stdout.strip().splitlines()[-1])
        ratio = result["measured_mib"] / result["predicted_mib"]
        ok &= abs(ratio - 1) <= TOLERANCE
        print(f"{size['hidden_size']:>6} {size['num_hidden_layers']:>6} {size['rows']:>5} x {size['width']:<7}"
              f"{result['predicted_mib']:>14.0f} {result['measured_mib']:>13.0f} {ratio:>6.2f}")
    print(f"within {TOLERANCE:.0%} at every size: {ok}")
    return ok


def compare(peaks: Path, base: Path, adapter: Path, tiny: Path) -> None:
    """Measured peak CUDA memory per job beside the plan's prediction for the same model and sizes."""
    from thai_grpo.jobs.memory_plan import Lora, Shape
    from thai_grpo_tools.stage_plans import predicted_for_job, stage_plans

    config = merged_config(tiny)
    shape = Shape.from_config(json.loads((base / "config.json").read_text(encoding="utf-8")))
    sft = Lora.from_config(json.loads((adapter / "adapter_config.json").read_text(encoding="utf-8")))
    plans = stage_plans(config, shape, sft)
    print(f"{'job':<34}{'measured GiB':>13}{'planned GiB':>12}{'ratio':>7}   (planned for these stand-ins and sizes)")
    for path in sorted(peaks.glob("*.json")):
        record = json.loads(path.read_text())
        planned = predicted_for_job(record["job"], plans)
        ratio = f"{record['max_allocated_gib'] / planned:7.2f}" if planned else "      -"
        print(f"{record['job']:<34}{record['max_allocated_gib']:>13.2f}{planned or float('nan'):>12.2f}{ratio}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        sys.exit(0 if check() else 1)
    if sys.argv[1:2] == ["--compare"]:
        compare(*map(Path, sys.argv[2:6]))
        sys.exit(0)
    write_plan(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "results" / "memory_plan")
