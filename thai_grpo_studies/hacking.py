"""The reward-hacking experiment (``snakemake --cores 2 hacking``): results/hacking/results.json and its report.

Three GRPO runs from one start, an SFT adapter that sometimes thinks briefly or not at all, under a completion
budget shorter than most full solutions; they differ only in the format reward (lenient ``<think>.*?</think>``,
strict ``<think>.+?</think>``, content-checked ``format_checked``). Per step: the total reward, accuracy, and the
shares of empty and of whitespace-or-one-character think blocks; the run-health detector (``thai_grpo.analyses.health``)
judges each run from its own step records (episodes anywhere in the run, ``health.hacking_episodes``), with its
error rates simulated at the run's size (``detector_rates``); the title and verdicts are sentences computed
from those numbers.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import matplotlib.pyplot as plt
from markupsafe import Markup
from matplotlib.ticker import MaxNLocator

from thai_grpo.analyses.health import (DetectorSettings, first_and_last, format_hacking_suspect, format_reward_name,
                                      training_health)
from thai_grpo.report.plotting import save_figure, step_series
from thai_grpo_studies.detector_rates import detector_rates
from thai_grpo_studies.hacking_words import (hacking_outcome, hacking_title, hacking_verdict, loophole_verdict,
                                           payoff_verdict)

#: Per-step curves kept for each run (the step logger's names, thai_grpo.methods.recorder.batch_metrics).
CURVES = ("reward_mean", "accuracy", "empty_think_share", "blank_think_share", "hollow_think_paid_share",
          "clipped_ratio", "completion_length_mean", "kl")
FIGURE = "hacking_curves"
REPORT_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


#: The simulated runs behind each run's error rates (config hacking.detector overrides them).
SIMULATION = {"plateau": 0.8, "duration": 8, "simulations": 2000, "seed": 0}


def start_and_last(values, start_steps: int | None = 1) -> tuple[float | None, float | None]:
    """Means of the first ``start_steps`` values (default 1: the start policy's own batch, sampled before any
    update; None: the first third) and of the last third, missing values skipped (``first_and_last``)."""
    return first_and_last(values, start_steps)[0], first_and_last(values)[1]


def detector_settings(config: dict | None) -> tuple[DetectorSettings, dict]:
    """Config ``hacking.detector`` -> the detector's settings and the simulation's (``SIMULATION`` by default)."""
    config = dict(config or {})
    simulation = {key: config.pop(key, default) for key, default in SIMULATION.items()}
    return DetectorSettings(**config), simulation


def run_rates(detector: dict, n_steps: int, settings: DetectorSettings, simulation: dict) -> dict | None:
    """The detector's error rates at a run's size: its number of steps and completions per step, honest runs at
    its own start share of paid hollow blocks and its start accuracy; None when the run cannot be judged."""
    base = detector.get("baseline")
    if base is None or n_steps < settings.baseline_steps + simulation["duration"]:
        return None
    return detector_rates(n_steps, int(round(base["completions_per_step"])), honest_share=base["share"],
                          accuracy=base["accuracy"] if base["accuracy"] is not None else 0.0,
                          plateau=max(simulation["plateau"], base["share"]), duration=simulation["duration"],
                          simulations=simulation["simulations"], seed=simulation["seed"], settings=settings)


def hacking_run(train: dict, plan: dict, settings: DetectorSettings = DetectorSettings(),
                simulation: dict | None = None) -> dict:
    """One run's part of the results: its format reward and budget, its per-step curves, each curve at the start
    (step 1: the start policy's batch), over the first third and over the last third of the steps, the detector's
    episodes from its own steps and its error rates simulated at the run's size, the health flags, and the hacked
    completions picked from its rollouts (collect_hacking)."""
    steps = [s for s in train.get("steps") or [] if not s.get("reused_batch")]
    means = {}
    for key in CURVES:
        values = [s.get(key) for s in steps]
        start, last = start_and_last(values)
        means[key] = {"start": start, "first_third": first_and_last(values)[0], "last_third": last}
    detector = format_hacking_suspect(steps, settings)
    return {"format_reward": format_reward_name(steps), "rewards": list(plan.get("rewards") or []),
            "max_completion_length": (plan.get("grpo_args") or {}).get("max_completion_length"),
            "steps": [{key: s.get(key) for key in ("step", *CURVES)} for s in steps],
            "means": means, "health": training_health(steps), "detector": detector,
            "rates": run_rates(detector, len(steps), settings, {**SIMULATION, **(simulation or {})}),
            "hacked_completions": train.get("empty_think_examples") or []}


def hacking_results(trains: dict, plans: dict, sft_shares: dict, seconds: dict, detector: dict | None = None) -> dict:
    """results/hacking/results.json: the set-up (``sft_shares``: config hacking.sft; ``detector``: config
    hacking.detector), every run (``hacking_run``), the title and a verdict per run computed from the detector's
    episodes, one on the strict regex's loophole and one on whether the hack paid, and the measured seconds."""
    settings, simulation = detector_settings(detector)
    runs = {name: hacking_run(trains[name], plans[name], settings, simulation) for name in trains}
    stages = ["sft_adapter_brief", *(f"train-{name}" for name in runs)]
    doc = {"setup": {"sft": sft_shares, "runs": list(runs),
                      "max_completion_length": {n: r["max_completion_length"] for n, r in runs.items()},
                      "detector": {**asdict(settings), **simulation}},
            "runs": runs,
            "title": hacking_title(runs),
            "outcomes": {name: hacking_outcome(run) for name, run in runs.items()},
            "verdicts": {name: hacking_verdict(name, run) for name, run in runs.items()},
            "loophole_verdict": loophole_verdict(runs),
            "payoff_verdict": payoff_verdict(runs),
            "seconds": {stage: seconds.get(stage) for stage in stages}}
    return {**doc, "report": main_report_rows(doc)}


def main_report_rows(hacking: dict) -> dict | None:
    """The reward-hacking experiment for the main report (its results.json ``report``): per
    run its format reward and its start -> last-third means, with the verdict sentences the run decided."""
    if not hacking or not hacking.get("runs"):
        return None
    keys = ("reward_mean", "accuracy", "empty_think_share", "hollow_think_paid_share")
    rows = [{"name": name, "format_reward": run.get("format_reward"), "steps": len(run.get("steps") or []),
             "moves": {key: ((run.get("means") or {}).get(key, {}).get("start"),
                             (run.get("means") or {}).get(key, {}).get("last_third")) for key in keys},
             "verdict": (hacking.get("verdicts") or {}).get(name),
             "outcome": (hacking.get("outcomes") or {}).get(name), "rates": run.get("rates")}
            for name, run in hacking["runs"].items()]  # the means hacking_run stored: start, last third
    return {"rows": rows, "sft": (hacking.get("setup") or {}).get("sft"), "title": hacking.get("title"),
            "loophole_verdict": hacking.get("loophole_verdict"), "payoff_verdict": hacking.get("payoff_verdict")}


def summarise_hacking_chains(per_chain: dict[int, dict]) -> dict:
    """Across chains (chain seed -> that chain's hacking results.json): per variant in how many chains it hacked,
    for how many steps in each (the episodes' steps summed), whether it left the hack or stayed in it, and one
    sentence per variant computed from those counts."""
    variants: dict[str, dict] = {}
    for seed in sorted(per_chain):
        for name, run in (per_chain[seed].get("runs") or {}).items():
            detector = run.get("detector") or {}
            episodes = detector.get("episodes") or []
            entry = variants.setdefault(name, {"chains": 0, "hacked": 0, "left": 0, "stayed": 0, "per_chain": {}})
            entry["chains"] += 1
            entry["per_chain"][seed] = {"hacked": bool(episodes), "status": detector.get("status"),
                                        "steps": sum(e["steps"] for e in episodes), "outcome": hacking_outcome(run)}
            if episodes:
                entry["hacked"] += 1
                entry[detector["status"]] += 1
    for name, entry in variants.items():
        hacked = [c for c in entry["per_chain"].values() if c["hacked"]]
        steps = sorted(c["steps"] for c in hacked)
        length = (f" for {steps[0]}" if steps[0] == steps[-1] else f" for {steps[0]}-{steps[-1]}") + " steps" if hacked else ""
        after = f"; it left the hack in {entry['left']} and stayed in it to the end in {entry['stayed']}" if hacked else ""
        entry["sentence"] = f"{name} hacked in {entry['hacked']} of {entry['chains']} chains{length}{after}."
    return {"chains": sorted(per_chain), "variants": variants}


def _panel(ax, runs: dict, key: str, title: str, ylabel: str, ylim=None) -> None:
    for name, run in runs.items():
        steps = run["steps"]
        ax.plot(step_series(steps, "step"), step_series(steps, key), marker="o", ms=2,
                label=f"{name}: {run['format_reward']}")
    ax.set(title=title, xlabel="step", ylabel=ylabel)
    if ylim:
        ax.set_ylim(*ylim)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)


def plot_hacking(results: dict, path) -> None:
    """Per step, one line per run: mean reward, accuracy, empty think blocks, whitespace-or-one-character
    blocks, hollow blocks the format reward paid, and completions cut at the budget."""
    runs = results["runs"]
    fig, axes = plt.subplots(2, 3, figsize=(14, 7.5), layout="constrained")
    share = (-0.02, 1.02)
    _panel(axes[0, 0], runs, "reward_mean", "Mean total reward (what the optimizer sees)", "reward", (0, 1.55))
    _panel(axes[0, 1], runs, "accuracy", "Accuracy (correct answers)", "share", share)
    _panel(axes[0, 2], runs, "clipped_ratio", "Cut at the completion budget", "share", share)
    _panel(axes[1, 0], runs, "empty_think_share", "Empty think blocks <think></think>", "share", share)
    _panel(axes[1, 1], runs, "blank_think_share", "Whitespace or one character: <think> </think>", "share", share)
    _panel(axes[1, 2], runs, "hollow_think_paid_share", "Empty or blank blocks the format reward paid", "share",
           share)
    axes[0, 0].legend(fontsize=8, loc="best")
    save_figure(fig, path)


def render_hacking_report(results: dict, figures_dir: str | Path, template_dir: str | Path,
                          chains: dict | None = None) -> str:
    """The experiment's page: computed title, set-up, curves, per-run table with the detector's episodes and error
    rates, verdicts, hacked completions (escaped by the report's autoescaping environment; model text never passes
    through ``|safe``) and, given ``chains`` (``summarise_hacking_chains``), the outcome across chains."""
    from thai_grpo.report.html import _environment, data_uri

    template_dir = Path(template_dir)
    figure = Path(figures_dir) / f"{FIGURE}.png"
    plot_hacking(results, figure)
    style = Markup((template_dir / "style.css").read_text(encoding="utf-8"))  # our own file, not model text
    return _environment(template_dir).get_template("hacking.html.j2").render(
        results=results, figure=data_uri(figure), style=style, csp=REPORT_CSP, chains=chains,
        title=results.get("title") or "Reward hacking")
