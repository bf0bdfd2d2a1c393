"""The HTML report: one self-contained file built from results.json, the sample files and the figures.

Model text is untrusted. The Jinja2 environment autoescapes everything, model text never passes
through `|safe`, and a Content-Security-Policy lets only the calculator script (pinned by its sha256)
run, so an escaping slip still could not execute a completion. Figures are embedded as base64 data
URIs and CSS/JS are inlined: opening the page makes no network request.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

from jinja2 import ChainableUndefined, Environment, FileSystemLoader, select_autoescape
from jinja2.exceptions import UndefinedError
from markupsafe import Markup

from thai_grpo import figures as fig
from thai_grpo.io import atomic_write_text, read_jsonl

DEFAULT_TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "report"
TEMPLATE_NAME = "template.html.j2"
SECTIONS = [
    ("run-card", "1. Run card"),
    ("training", "2. Training curves"),
    ("advantages", "3. Figure 5.1: group-relative advantages"),
    ("calculator", "4. Interactive advantage calculator"),
    ("grpo-vs-ppo", "5. Figure 5.2: what GRPO removes from PPO"),
    ("kl", "6. Figure 5.3: k1 vs k3 KL estimators"),
    ("heldout", "7. Held-out results"),
    ("comparison", "8. Comparison across methods"),
    ("statistics", "9. Statistics note"),
    ("samples", "10. Samples"),
]
NOT_RUN = "not run"
SAMPLE_PROBLEMS, SAMPLE_COMPLETIONS = 3, 2


# --------------------------------------------------------------------------- figures
def solve_rate_pair(eval_results: dict) -> tuple[str, str] | None:
    """(before, after) model names for the solve-rate scatter: SFT (else base) vs GRPO, if both exist."""
    before = next((m for m in ("sft", "base") if m in eval_results), None)
    return (before, "grpo") if before and "grpo" in eval_results else None


def make_figures(results: dict, out_dir: str | Path) -> dict[str, Path]:
    """Draw every figure that `results` has data for into `out_dir`; returns {name: png path}.

    Figures whose data is missing (no kl_real, no GRPO eval, ...) are left out; the report shows
    "not run" in their place.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    train, evals = results.get("train") or {}, results.get("eval") or {}
    paths: dict[str, Path] = {}

    def draw(name: str, plot, *args) -> None:
        paths[name] = out / f"{name}.png"
        plot(*args, paths[name])

    if train.get("steps"):
        draw("training_curves", fig.plot_training_curves, train["steps"])
    if train.get("example_groups"):
        draw("group_advantages", fig.plot_group_advantages, train["example_groups"])
    draw("grpo_vs_ppo", fig.plot_grpo_vs_ppo)
    draw("k1_vs_k3_synthetic", fig.plot_k1_vs_k3_synthetic)
    kl_real = results.get("kl_real") or {}
    if kl_real.get("logp_policy"):
        draw("k1_vs_k3_real", fig.plot_k1_vs_k3_real, kl_real["logp_policy"], kl_real["logp_ref"])
    if evals:
        draw("pass_at_k", fig.plot_pass_at_k, evals)
    pair = solve_rate_pair(evals)
    if pair:
        before, after = evals[pair[0]], evals[pair[1]]
        paths["solve_rate_scatter"] = out / "solve_rate_scatter.png"
        fig.plot_solve_rate_scatter(before["per_problem_correct"], after["per_problem_correct"],
                                    after["n_samples"], paths["solve_rate_scatter"], labels=pair)
    return paths


def data_uri(path: str | Path) -> str:
    """A PNG file as a `data:image/png;base64,...` URI."""
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


# --------------------------------------------------------------------------- formatting filters
def _number(value: Any) -> float | None:
    """float(value), or None for None, undefined template values and non-numbers."""
    try:
        return None if value is None or isinstance(value, bool) else float(value)
    except (TypeError, ValueError, UndefinedError):
        return None


def pct(value: Any, digits: int = 1) -> str:
    """0.4792 -> '47.9%'; None -> 'not run'."""
    number = _number(value)
    return NOT_RUN if number is None else f"{100 * number:.{digits}f}%"


def interval(metric: Any, kind: str = "wilson") -> str:
    """'[38.2, 57.8]' (percent) from metric[kind_low], metric[kind_high]; '' when missing."""
    if not isinstance(metric, dict):
        return ""
    low, high = _number(metric.get(f"{kind}_low")), _number(metric.get(f"{kind}_high"))
    return "" if low is None or high is None else f"[{100 * low:.1f}, {100 * high:.1f}]"


def thousands(value: Any) -> str:
    """262144 -> '262,144'; None -> 'not run'."""
    number = _number(value)
    return NOT_RUN if number is None else f"{int(round(number)):,}"


def duration(seconds: Any) -> str:
    """240.5 -> '4 min 0.5 s'; 1.2 -> '1.2 s'; None -> 'not run'."""
    number = _number(seconds)
    if number is None:
        return NOT_RUN
    minutes, rest = divmod(number, 60)
    hours, minutes = divmod(int(minutes), 60)
    if hours:
        return f"{hours} h {minutes} min {rest:.0f} s"
    return f"{minutes} min {rest:.1f} s" if minutes else f"{rest:.1f} s"


def signed(value: Any, digits: int = 2) -> str:
    """1.5645 -> '+1.56', -0.2 -> '-0.20'; a value that rounds to zero has no sign."""
    number = _number(value)
    if number is None:
        return NOT_RUN
    text = f"{number:.{digits}f}"
    return text.lstrip("-") if float(text) == 0 else (f"+{text}" if number > 0 else text)


# --------------------------------------------------------------------------- context
def _health(train: dict) -> dict:
    """train.health if the pipeline filled it, else the flags recomputed from the steps."""
    if train.get("health"):
        return train["health"]
    steps = train.get("steps") or []
    return {"truncation_failed": fig.truncation_failed(steps), "hacking_suspect": fig.hacking_suspect(steps),
            "messages": ["health flags recomputed by the report: the pipeline recorded none"]}


def _tokens(run: dict) -> dict | None:
    """Generated-token budget: per-step summary, total, and the share of the seed's full-run estimate."""
    tokens = run.get("generated_tokens")
    if not tokens or not tokens.get("per_step"):
        return None
    per_step, estimate = tokens["per_step"], tokens.get("seed_estimate_full_real", 262144)
    total = tokens.get("total", sum(per_step))
    return {"per_step": per_step, "mean": sum(per_step) / len(per_step), "min": min(per_step),
            "max": max(per_step), "total": total, "estimate": estimate, "share": total / estimate}


def _method_rows(results: dict) -> list[dict]:
    """comparison.methods joined with their eval metrics; a row not run or not evaluated says so."""
    evals = results.get("eval") or {}
    rows = []
    for method in (results.get("comparison") or {}).get("methods") or []:
        metrics = evals.get(method.get("model") or "") if method.get("run") else None
        status = None if metrics else ("not run yet" if not method.get("run") else "not evaluated")
        rows.append({**method, "metrics": metrics, "status": status})
    return rows


def _pick_completions(completions: list[dict]) -> list[dict]:
    """Up to SAMPLE_COMPLETIONS completions, one correct and one wrong where the problem has both."""
    right = [c for c in completions if c.get("correct", 0) > 0]
    wrong = [c for c in completions if c.get("correct", 0) <= 0]
    picked = (right[:1] + wrong[:1]) if right and wrong else completions[:SAMPLE_COMPLETIONS]
    return picked[:SAMPLE_COMPLETIONS]


def _samples(samples_by_model: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """The first SAMPLE_PROBLEMS problems of every model with their chosen completions."""
    return {model: [{**p, "shown": _pick_completions(p.get("completions") or [])}
                    for p in problems[:SAMPLE_PROBLEMS]]
            for model, problems in samples_by_model.items()}


def build_context(results: dict, samples_by_model: dict, figures: dict[str, Path]) -> dict:
    """Everything the template reads, with missing optional parts as None."""
    run, train, evals = results.get("run") or {}, results.get("train") or {}, results.get("eval") or {}
    pair = solve_rate_pair(evals)
    transitions = None
    if pair:
        transitions = fig.solve_rate_transitions(evals[pair[0]]["per_problem_correct"],
                                                 evals[pair[1]]["per_problem_correct"])
    benchmarks = run.get("benchmarks") or {}
    return {
        "sections": SECTIONS,
        "config_json": json.dumps(results.get("config") or {}, indent=2, ensure_ascii=False, sort_keys=True),
        "run": run,
        "benchmarks": benchmarks,
        "benchmark_total": sum(benchmarks.values()) if benchmarks else None,
        "tokens": _tokens(run),
        "steps": train.get("steps") or [],
        "health": _health(train),
        "groups": train.get("example_groups") or {},
        "figures": {name: data_uri(p) for name, p in figures.items() if p and Path(p).is_file()},
        "has_kl_real": bool((results.get("kl_real") or {}).get("logp_policy")),
        "evals": evals,
        "pair": pair,
        "transitions": transitions,
        "methods": _method_rows(results),
        "paired_tests": (results.get("comparison") or {}).get("paired_tests") or {},
        "samples": _samples(samples_by_model),
    }


# --------------------------------------------------------------------------- rendering
def _environment(template_dir: Path) -> Environment:
    """Autoescaping Jinja2 environment with the report's formatting filters."""
    env = Environment(
        loader=FileSystemLoader(str(template_dir)),
        autoescape=select_autoescape(enabled_extensions=("html", "j2"), default_for_string=True, default=True),
        undefined=ChainableUndefined,  # optional parts of results.json may be missing
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(pct=pct, interval=interval, thousands=thousands, duration=duration, signed=signed)
    return env


def _csp(script: str) -> str:
    """Content-Security-Policy: no network, data: images, inline CSS, and only this exact script."""
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
            f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'")


def render_report(results: dict, samples_by_model: dict[str, list[dict]], figures: dict[str, Path],
                  template_dir: Path = DEFAULT_TEMPLATE_DIR) -> str:
    """The report as one HTML string (inline CSS, inline calculator JS, figures as data URIs)."""
    template_dir = Path(template_dir)
    script = (template_dir / "calculator.js").read_text(encoding="utf-8")
    style = (template_dir / "style.css").read_text(encoding="utf-8")
    context = build_context(results, samples_by_model, figures)
    # Our own static files, not model text: the only Markup in the page.
    context.update(script=Markup(script), style=Markup(style), csp=_csp(script))
    return _environment(template_dir).get_template(TEMPLATE_NAME).render(**context)


def write_report(results: dict, samples_by_model: dict[str, list[dict]], figures: dict[str, Path],
                 template_dir: Path, out_path: str | Path) -> Path:
    """Render and write the report atomically (temporary file in the same directory, then os.replace)."""
    out_path = Path(out_path)
    atomic_write_text(out_path, render_report(results, samples_by_model, figures, template_dir))
    out_path.chmod(0o644)  # the temporary file is created private; a report is meant to be shared
    return out_path


def load_samples(paths_by_model: dict[str, str | Path]) -> dict[str, list[dict]]:
    """{model: samples.jsonl path} -> {model: list of problem records}."""
    return {model: read_jsonl(path) for model, path in paths_by_model.items()}


def build_report(results_path: str | Path, samples_paths: dict[str, str | Path], out_path: str | Path,
                 figures_dir: str | Path, template_dir: str | Path = DEFAULT_TEMPLATE_DIR) -> Path:
    """The whole step for a Snakemake script: read inputs, draw figures, write the page."""
    results = json.loads(Path(results_path).read_text(encoding="utf-8"))
    figures = make_figures(results, figures_dir)
    return write_report(results, load_samples(samples_paths), figures, Path(template_dir), out_path)
