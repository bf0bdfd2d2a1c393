"""The loss-family study (``snakemake --cores 2 losses``): results/losses/results.json and its page.

Every ``group: losses`` variant and the chapter's ``grpo``, each trained from the SFT adapter at every training seed
(``thai_grpo.workflow.loss_runs``) and scored on the same held-out problems. The statistics, each variant against
``grpo`` under the declared plan (pooled many-to-one, seed as block, Dunnett), are ``thai_grpo_studies.loss_stats``. This
module adds what each variant changes (its merged ``grpo`` section against grpo's), per-step curves averaged over the
seeds (TRL's KL and clip fraction, completion length, share cut at the budget), the health detector's flags per run
and the measured cost per variant (Snakemake benchmark seconds), then draws and renders the page.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from markupsafe import Markup
from matplotlib.ticker import MaxNLocator

from thai_grpo.analyses.health import training_health
from thai_grpo.evaluation.plan import VERDICTS as VERDICT_KEYS
from thai_grpo.report.plan_words import VERDICT_WORDS, verdict_word
from thai_grpo.report.plotting import save_figure
from thai_grpo_studies.study_words import seed_pair_verdict
from thai_grpo_studies.loss_stats import loss_study

#: Per-step curves: our step records' names (thai_grpo.methods.recorder), and TRL's own log keys where ours lack one.
STEP_KEYS = ("kl", "clip_ratio", "completion_length_mean", "clipped_ratio")
TRL_KEYS = {"clip_high": "clip_ratio/high_mean", "clip_low": "clip_ratio/low_mean"}
CURVES = (*STEP_KEYS, *TRL_KEYS)
STAGES = ("train", "sample", "score")
FIGURES = ("losses_curves", "losses_versus")
REPORT_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


def changes(plan: dict, baseline: dict) -> dict:
    """What a variant's plan sets differently from the baseline's: {grpo field or "rewards": [baseline, variant]}."""
    mine, theirs = plan.get("grpo_args") or {}, baseline.get("grpo_args") or {}
    diff = {key: [theirs.get(key), mine.get(key)] for key in sorted(set(mine) | set(theirs))
            if mine.get(key) != theirs.get(key)}
    if list(plan.get("rewards") or []) != list(baseline.get("rewards") or []):
        diff["rewards"] = [baseline.get("rewards"), plan.get("rewards")]
    return diff


def run_steps(train: dict) -> list[dict]:
    """One run's per-step values of ``CURVES``: our step records, with TRL's upper and lower clip fractions from its
    log history (same step numbers); a reused generation batch (num_iterations > 1) has no length or truncation."""
    history = {h["step"]: h for h in train.get("trl_log_history") or []
               if "step" in h and ("loss" in h or "reward" in h)}  # a step's log, not the run's closing summary
    rows = []
    for record in train.get("steps") or []:
        logged = history.get(record.get("step"), {})
        rows.append({"step": record.get("step"), "reused_batch": bool(record.get("reused_batch")),
                     **{key: record.get(key) for key in STEP_KEYS},
                     **{ours: logged.get(theirs) for ours, theirs in TRL_KEYS.items()}})
    return rows


def seed_mean_curves(runs_steps: list[list[dict]]) -> list[dict]:
    """Per step, each curve's mean over the runs (seeds) that logged it at that step (None where none did), and how
    many runs reached the step."""
    by_step: dict[int, list[dict]] = {}
    for steps in runs_steps:
        for row in steps:
            by_step.setdefault(row["step"], []).append(row)
    curves = []
    for step in sorted(by_step):
        rows = by_step[step]
        means = {}
        for key in CURVES:
            values = [float(r[key]) for r in rows if r.get(key) is not None]
            means[key] = float(np.mean(values)) if values else None
        curves.append({"step": step, "runs": len(rows), **means})
    return curves


def run_health(train: dict) -> dict:
    """The health detector's flags from one run's own step records (generation steps only)."""
    return training_health([s for s in train.get("steps") or [] if not s.get("reused_batch")])


def run_costs(seconds: dict, runs: list[str]) -> dict:
    """Wall seconds (Snakemake benchmarks) of each run's train, sample and score jobs, and their sum over the runs;
    a missing benchmark counts as absent, not zero (``missing`` lists it)."""
    per_run = {run: {kind: seconds.get(f"{kind}-{run}") for kind in STAGES} for run in runs}
    missing = [f"{kind}-{run}" for run, kinds in per_run.items() for kind, s in kinds.items() if s is None]
    per_kind = {kind: float(sum(k[kind] for k in per_run.values() if k[kind] is not None)) for kind in STAGES}
    return {"runs": per_run, "per_kind": per_kind, "sum_seconds": float(sum(per_kind.values())), "missing": missing}


def loss_results(runs: dict[str, list[dict]], trains: dict[str, dict], plans: dict[str, dict], seconds: dict,
                 baseline: str = "grpo", analysis: dict | None = None) -> dict:
    """results/losses/results.json. ``runs``: per variant (``baseline`` first) its runs as {"run", "seed", "scores"};
    ``trains``: train.json per run id; ``plans``: ``variant_plan`` (plus "description") per variant; ``analysis``:
    the declared plan (``evaluation.plan.analysis_plan``; absent = its defaults)."""
    study = loss_study(runs, baseline, plan=analysis)
    variants = {}
    for name, variant_runs in runs.items():
        ids = [r["run"] for r in variant_runs]
        health = {run: run_health(trains[run]) for run in ids}
        variants[name] = {
            **study["variants"][name],
            "description": (plans[name].get("description") or ""),
            "changes": changes(plans[name], plans[baseline]) if name != baseline else {},
            "curves": seed_mean_curves([run_steps(trains[run]) for run in ids]),
            "health": health,
            "flagged": [run for run, h in health.items() if h["truncation_failed"] or h["hacking_suspect"]],
            "cost": run_costs(seconds, ids),
        }
    sentences = {metric: {t["variant"]: seed_pair_verdict(t, t["variant"], baseline) for t in tests}
                 for metric, tests in study["versus"].items()}
    all_runs = [r["run"] for rs in runs.values() for r in rs]
    doc = {**study, "variants": variants, "sentences": sentences,
           "training_seeds": [r["seed"] for r in runs[baseline]],
           "num_problems": runs[baseline][0]["scores"]["num_problems"],
           "n_samples": runs[baseline][0]["scores"]["n_samples"],
           "cost": run_costs(seconds, all_runs)}
    return {**doc, "report": main_report_rows(doc)}


def main_report_rows(losses: dict) -> dict | None:
    """The loss-family study for the main report (its results.json ``report``): per
    variant its first metric's mean over seeds and, but for the baseline, its difference and verdict against it."""
    if not losses or not losses.get("variants") or not losses.get("metrics"):
        return None
    metric = losses["metrics"][0]
    versus = {t["variant"]: t for t in (losses.get("versus") or {}).get(metric) or []}
    rows = [{"name": name, "description": v.get("description") or "",
             "mean": v["metrics"][metric]["between_seed"]["mean"], "test": versus.get(name),
             "verdict": verdict_word(versus[name]) if "verdict" in (versus.get(name) or {}) and
             (versus[name]["verdict"] in VERDICT_KEYS) else None}
            for name, v in losses["variants"].items()]
    return {"metric": metric, "baseline": losses.get("baseline"), "seeds": losses.get("training_seeds") or [],
            "family": (losses.get("families") or {}).get(metric), "rows": rows}


# --------------------------------------------------------------------------- figures
def _curve_panel(ax, results: dict, key: str, title: str, ylabel: str) -> None:
    baseline = results["baseline"]
    for name, variant in results["variants"].items():
        points = [(c["step"], c[key]) for c in variant["curves"] if c.get(key) is not None]
        if not points:
            continue
        x, y = zip(*points)
        style = {"color": "black", "lw": 2.2, "zorder": 3} if name == baseline else {"lw": 1.2}
        ax.plot(x, y, marker=".", ms=3, label=name, **style)
    ax.set(title=title, xlabel="optimizer step", ylabel=ylabel)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)


def plot_curves(results: dict, path) -> None:
    """Per step, one line per variant (mean over its seeds): KL to the reference, share of tokens clipped, mean
    completion length, share of completions cut at the budget."""
    fig, axes = plt.subplots(2, 2, figsize=(12, 8), layout="constrained")
    _curve_panel(axes[0, 0], results, "kl", "KL to the reference (grpo.reference; logged only when beta > 0)",
                 "KL per token")
    _curve_panel(axes[0, 1], results, "clip_ratio", "Clipped by the ratio (TRL clip_ratio/region_mean)", "share")
    _curve_panel(axes[1, 0], results, "completion_length_mean", "Mean completion length", "tokens")
    _curve_panel(axes[1, 1], results, "clipped_ratio", "Cut at max_completion_length", "share")
    axes[0, 1].legend(fontsize=8, loc="best")
    save_figure(fig, path)


def plot_versus(results: dict, path) -> None:
    """Per metric, each variant's difference from the baseline (mean over seeds) with its simultaneous 95% interval
    (Dunnett); filled markers where the plan's verdict is a difference (higher or lower)."""
    metrics = results["metrics"]
    names = [t["variant"] for t in results["versus"][metrics[0]]] if metrics else []
    fig, axes = plt.subplots(1, max(1, len(metrics)), figsize=(4.2 * max(1, len(metrics)), 0.5 * len(names) + 1.8),
                             layout="constrained", squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        for row, test in enumerate(results["versus"][metric]):
            filled = test["verdict"] in ("higher", "lower")
            ax.errorbar(100 * test["mean_diff"], row, xerr=[[100 * (test["mean_diff"] - test["ci_low"])],
                                                           [100 * (test["ci_high"] - test["mean_diff"])]],
                        fmt="o", color="#1864ab", mfc="#1864ab" if filled else "white", capsize=3)
        ax.axvline(0, color="black", lw=0.8)
        ax.set_yticks(range(len(names)), names)
        ax.invert_yaxis()
        ax.set(title=f"{metric} - {results['baseline']}", xlabel="points (simultaneous 95% interval)")
        ax.grid(alpha=0.3, axis="x")
    save_figure(fig, path)


def render_losses_report(results: dict, figures_dir: str | Path, template_dir: str | Path) -> str:
    """The study's page: set-up, verdicts, per-metric table, curves, health flags, cost (autoescaped)."""
    from thai_grpo.report.html import _environment, data_uri

    template_dir, figures_dir = Path(template_dir), Path(figures_dir)
    plot_curves(results, figures_dir / f"{FIGURES[0]}.png")
    plot_versus(results, figures_dir / f"{FIGURES[1]}.png")
    style = Markup((template_dir / "style.css").read_text(encoding="utf-8"))  # our own file, not model text
    figures = {name: data_uri(figures_dir / f"{name}.png") for name in FIGURES}
    return _environment(template_dir).get_template("losses.html.j2").render(
        results=results, figures=figures, style=style, csp=REPORT_CSP, verdict_words=VERDICT_WORDS)
