"""The headline, SFT vs GRPO at pass@1, written as soon as base, SFT and GRPO are scored, so that a reader of a long run
sees it before the other methods finish."""

from __future__ import annotations

from thai_grpo.evaluation.scoring import paired_test

HEADLINE_FILE = "results/headline.json"


def headline(scores: dict[str, dict], n_boot: int = 10_000, seed: int = 0) -> dict:
    """pass@1 [95% bootstrap over problems] of each scored model, and GRPO - SFT with its paired interval."""
    models = {name: {"pass@1": s["pass@1"]["estimate"], "low": s["pass@1"]["bootstrap_low"],
                     "high": s["pass@1"]["bootstrap_high"], "greedy": s["greedy_accuracy"]["estimate"]}
              for name, s in scores.items()}
    diff = paired_test(scores["grpo"], scores["sft"], "pass@1", n_boot=n_boot, seed=seed)
    return {"models": models, "grpo_minus_sft": {k: diff[k] for k in ("mean_diff", "ci_low", "ci_high", "p_value")},
            "n_resamples": n_boot}


def headline_line(record: dict, path: str = HEADLINE_FILE) -> str:
    """One terminal line: ``Headline ready: SFT 0.315 -> GRPO 0.507 pass@1 (+0.193 [+0.157, +0.229]); see ...``."""
    sft, grpo, diff = record["models"]["sft"], record["models"]["grpo"], record["grpo_minus_sft"]
    return (f"Headline ready: SFT {sft['pass@1']:.3f} -> GRPO {grpo['pass@1']:.3f} held-out pass@1 "
            f"(GRPO - SFT {diff['mean_diff']:+.3f} [{diff['ci_low']:+.3f}, {diff['ci_high']:+.3f}] paired 95%); "
            f"see {path}; the other methods and results/report.html follow")
