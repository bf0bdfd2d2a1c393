"""The HTML report, one self-contained file. Model text is untrusted: everything is autoescaped, and the page's
Content-Security-Policy lets only the pinned calculator script run, so an escaping slip cannot run a completion."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

from jinja2 import ChainableUndefined, Environment, FileSystemLoader, select_autoescape
from jinja2.exceptions import UndefinedError
from markupsafe import Markup

from thai_grpo.core.io import atomic_write_text
from thai_grpo.analyses.health import step_means, training_health
from thai_grpo.report import figures as fig
from thai_grpo.report import glance, lessons, run_words
from thai_grpo.evaluation.plan import VERDICTS as VERDICT_KEYS
from thai_grpo.report.plan_words import METRIC_NAMES, family_text, fmt_p, p_text, plan_facts, verdict_word
from thai_grpo.report.results import chapter_token_budget
from thai_grpo.report.verdicts import (health_verdict, kl_takeaway, narrowing_numbers, pair_test, pass_at_k_verdict,
                                      versus_verdict)

DEFAULT_TEMPLATE_DIR = Path(__file__).resolve().parents[2] / "report"
TEMPLATE_NAME = "template.html.j2"
SECTIONS = [  # the chapter's lessons in its order and its pitfalls; then the appendix, the proofs opened on purpose
    ("advantages", "1. Figure 5.1: group-relative advantages, and a calculator"),
    ("groups", "2. Real groups from training, under GRPO and Dr.GRPO"),
    ("training", "3. Training curves and the health of the run"),
    ("grpo-vs-ppo", "4. Figure 5.2: what GRPO removes from PPO"),
    ("kl", "5. Figure 5.3: k1 vs k3 KL estimators"),
    ("polish", "6. Polish versus create"),
    ("methods", "7. Comparison across methods"),
    ("samples", "8. Samples side by side"),
    ("pitfalls", "9. Pitfalls, measured on this run"),
]
APPENDIX = [
    ("headline", "A.1 What happened, method by method"),
    ("statistics", "A.2 Statistics note"),
    ("run-card", "A.3 Run card: settings, departures, time, tokens"),
    ("heldout", "A.4 Held-out results in full"),
    ("comparison", "A.5 Comparison across methods in full"),
    ("kl-detail", "A.6 The KL estimators in detail"),
    ("samples-full", "A.7 Samples in full"),
    ("experiments", "A.8 The optional experiments: pitfall variants, reward hacking, loss family"),
]
PITFALL_TITLES = {"group_size": "Group size G", "temperature": "Sampling temperature",
                  "reward_hacking": "Reward hacking: the lenient format regex",
                  "clipping": "The clip: on-policy steps never clip"}
HACK_EXAMPLES_SHOWN = 5
NOT_RUN = "not run"


def figure_paths(figures: dict[str, Path] | str | Path) -> dict[str, Path]:
    """{name: png} as given, or every `<name>.png` in a figures directory (what `draw_all` wrote)."""
    if isinstance(figures, dict):
        return {name: Path(p) for name, p in figures.items() if p}
    return {p.stem: p for p in sorted(Path(figures).glob("*.png"))}


def data_uri(path: str | Path) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def _number(value: Any) -> float | None:
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


def p_value(value: Any, at_floor: bool = False) -> str:
    """A p-value as ``plan_words.fmt_p`` prints it (0.0479 -> '0.048'; '≤ 0.0015' at a bootstrap's floor)."""
    number = _number(value)
    return NOT_RUN if number is None else fmt_p(number, bool(at_floor))


def signed(value: Any, digits: int = 2) -> str:
    """1.5645 -> '+1.56', -0.2 -> '-0.20'; a value that rounds to zero has no sign."""
    number = _number(value)
    if number is None:
        return NOT_RUN
    text = f"{number:.{digits}f}"
    return text.lstrip("-") if float(text) == 0 else (f"+{text}" if number > 0 else text)


def verdict_class(test: Any) -> str:
    """A verdict's CSS classes: one colour per meaning everywhere, bold where the plan supports the verdict."""
    verdict = (test or {}).get("verdict") if isinstance(test, dict) else None
    return f"verdict {verdict or 'none'}" + (" supported" if isinstance(test, dict) and test.get("supported") else "")


def _health(train: dict) -> dict:
    return train.get("health") or training_health(train.get("steps") or [])


def pass_keys(evals: dict) -> list[str]:
    """The 'pass@k' metrics present in any evaluated model, by increasing k."""
    keys = {key for e in evals.values() if isinstance(e, dict) for key in e if key.startswith("pass@")}
    return sorted(keys, key=lambda key: (not key[5:].isdigit(), int(key[5:]) if key[5:].isdigit() else 0, key))


def _tokens(run: dict) -> dict | None:
    """Generated-token budget: per-step summary, total, and its share of the chapter's full run's ceiling."""
    tokens = run.get("generated_tokens")
    if not tokens or not tokens.get("per_step"):
        return None
    per_step, chapter = tokens["per_step"], tokens.get("chapter_full_run") or chapter_token_budget()
    total = tokens.get("total", sum(per_step))
    return {"per_step": per_step, "mean": sum(per_step) / len(per_step), "min": min(per_step),
            "max": max(per_step), "total": total, "chapter": chapter, "share": total / chapter["tokens"]}


def _method_rows(results: dict) -> list[dict]:
    """comparison.methods with their metrics and tests against SFT; a row not run or evaluated says so."""
    evals, comparison = results.get("eval") or {}, results.get("comparison") or {}
    rows = []
    for method in comparison.get("methods") or []:
        metrics = evals.get(method.get("model") or "") if method.get("run") else None
        status = None if metrics else ("not run yet" if not method.get("run") else "not evaluated")
        vs_sft = {metric: pair_test(comparison.get("pairwise") or [], method.get("model"), "sft", metric)
                  for metric in ("pass@1", "greedy")} if metrics and method.get("model") != "sft" else {}
        rows.append({**method, "metrics": metrics, "status": status, "vs_sft": vs_sft})
    return rows


def _pitfall_run(name: str, run: dict, evals: dict, own_temperature: dict) -> dict:
    """One row of a pitfall table: the run's settings, held-out pass@1, and first-vs-last-third step means."""
    steps = run.get("steps") or []
    means = {key: step_means(steps, key) for key in ("frac_groups_nonzero_std", "accuracy", "reward_mean",
                                                     "empty_think_share")}
    return {"name": name, "settings": run.get("settings") or {}, "pass1": (evals.get(name) or {}).get("pass@1"),
            "pass1_own_temperature": (own_temperature.get(name) or {}).get("pass@1"),
            "steps": len(steps), "means": means, "health": _health(run),
            "hacking_examples": (run.get("empty_think_examples") or [])[:HACK_EXAMPLES_SHOWN]}


def _pitfalls(results: dict) -> dict:
    """The Pitfalls section: per pitfall its figure name and runs (reference run first); empty when not built."""
    runs, evals = results.get("runs") or {}, results.get("eval") or {}
    sets = {}
    for pitfall, names in (results.get("pitfalls") or {}).items():
        rows = [_pitfall_run(n, runs[n], evals, results.get("eval_own_temperature") or {}) for n in names if n in runs]
        if len(rows) > 1:
            sets[pitfall] = {"title": PITFALL_TITLES.get(pitfall, pitfall),
                             "figure": lessons.PITFALL_FIGURES.get(pitfall), "runs": rows}
    hacking = sets.get("reward_hacking", {}).get("runs", [])
    lenient = [r for r in hacking if "format_lenient" in (r["settings"].get("rewards") or [])]
    return {"sets": sets, "lenient_runs": lenient}


def _headline(results: dict, health: dict) -> dict | None:
    """What happened, method by method: each method's pass@1 and tests against SFT, and the health flags."""
    evals, pairwise = results.get("eval") or {}, (results.get("comparison") or {}).get("pairwise") or []
    if "sft" not in evals or len(evals) < 2:
        return None
    names = {m.get("model"): m.get("method") for m in (results.get("comparison") or {}).get("methods") or []
             if m.get("model") in evals}  # the comparison's methods, in its order; else every evaluated model
    lines = []
    for model in names or evals:
        name = names.get(model) or model
        tests = {metric: pair_test(pairwise, model, "sft", metric) for metric in ("pass@1", "greedy")}
        lines.append({"model": model, "name": name, "pass1": evals[model].get("pass@1"),
                      "verdicts": [versus_verdict(t, name, names.get("sft") or "SFT", model != "base")
                                   for t in tests.values() if t and t.get("verdict") in VERDICT_KEYS]})
    return {"lines": lines, "health_verdict": health_verdict(health), "problems": evals["sft"].get("num_problems"),
            "samples": evals["sft"].get("n_samples")}


def _pairwise(results: dict) -> dict[str, dict]:
    """comparison.pairwise by metric, each test with its p-values as text, its family's words and its verdict word."""
    pairwise = (results.get("comparison") or {}).get("pairwise") or []
    grouped: dict[str, dict] = {}
    for test in pairwise:
        if "verdict" not in test:
            continue
        group = grouped.setdefault(test["metric"], {"name": METRIC_NAMES.get(test["metric"], test["metric"]),
                                                    "tests": []})
        group["tests"].append({**test, "p_text": p_text(test), "word": verdict_word(test),
                               "family_text": family_text(test),
                               "p_holm_text": fmt_p(test["p_holm"], test.get("p_at_floor"))})
    return grouped


def _study_pairs(tests: list[dict], name) -> list[dict]:
    """A study's decided pairs with their names, verdict word, adjusted p and stored sentence (or a short one)."""
    return [{**t, "a_name": name(t["a"]), "b_name": name(t["b"]), "word": verdict_word(t),
             "family_text": family_text(t), "p_holm_text": fmt_p(t["p_holm"], t.get("p_at_floor")),
             "sentence": t.get("sentence") or f"{name(t['a'])} - {name(t['b'])}: {verdict_word(t)}"}
            for t in tests if t.get("verdict") in VERDICT_KEYS]


def _seed_study(results: dict, name) -> dict | None:
    """results.json ``seed_study`` with comparison names, pair sentences and per-model verdicts; None when not built."""
    study = results.get("seed_study")
    if not study:
        return None
    pairs = _study_pairs(study.get("pairs") or [], name)
    beside = {variant: [f"vs {name(t['b'] if t['a'] == variant else t['a'])}: {t['word']}"
                        for t in pairs if variant in (t["a"], t["b"])] for variant in study.get("methods") or {}}
    methods = [{"variant": v, "name": name(v), **m} for v, m in (study.get("methods") or {}).items()]
    return {**study, "methods": methods, "pairs": pairs, "beside": beside}


def _chain_study(results: dict, name) -> dict | None:
    """results.json ``chain_study`` with comparison names, pair sentences and the headline's sentence, or None."""
    study = results.get("chain_study")
    if not study:
        return None
    pairs = {metric: _study_pairs(tests, name) for metric, tests in (study.get("pairs") or {}).items()}
    headline = next((t["sentence"] for t in pairs.get("pass@1", []) if (t["a"], t["b"]) == ("grpo", "sft")), None)
    models = [{"model": m, "name": name(m), **entry} for m, entry in (study.get("models") or {}).items()]
    return {**study, "chains": len(study.get("seeds") or []), "models": models, "pairs": pairs, "headline": headline}


def _extra_sets(results: dict) -> list[dict]:
    """results.json ``extra_sets`` as report tables, each with its pass@k keys; [] when none is configured."""
    return [{"name": name, "title": x.get("title") or name, "source": x.get("source") or {},
             "data": x.get("data") or {}, "evals": x.get("eval") or {}, "pass_keys": pass_keys(x.get("eval") or {}),
             "paired": x.get("paired_tests") or {}}
            for name, x in (results.get("extra_sets") or {}).items()]


def build_context(results: dict, samples_by_model: dict, figures: dict[str, Path] | Path) -> dict:
    """Everything the template reads, with missing optional parts as None."""
    run, train, evals = results.get("run") or {}, results.get("train") or {}, results.get("eval") or {}
    pair = fig.solve_rate_pair(evals)
    transitions = fig.solve_rate_transitions(*(evals[m]["per_problem_correct"] for m in pair)) if pair else None
    benchmarks = run.get("benchmarks") or {}
    keys = pass_keys(evals)
    health = _health(train)
    kl_summary = (results.get("kl_real") or {}).get("summary")
    takeaway = kl_takeaway(kl_summary) if kl_summary else None
    passk = results.get("passk") if (results.get("passk") or {}).get("curves") else None
    narrowing = (results.get("comparison") or {}).get("narrowing") or {}
    samples = lessons.samples_shown(samples_by_model)
    methods = _method_rows(results)
    groups_stored = lessons.stored_groups(results)
    prose = glance.prose_names(results)
    names = {model: model for model in evals} | prose
    pair_names = (names[pair[0]], names[pair[1]]) if pair else None
    tested_narrowing = bool(pair) and (narrowing.get("weaker"), narrowing.get("stronger")) == pair
    return {
        "glance": glance.first_screen(results, health),
        "words": run_words.report_words(results),
        "headline": _headline(results, health),
        "pairwise": _pairwise(results),
        "plan": plan_facts(glance.plan_of(results)),
        "name_of": names,
        "pass_at_k_verdict": pass_at_k_verdict(evals[pair[0]], evals[pair[1]], pair_names,
                                               narrowing if tested_narrowing else None) if pair else None,
        "narrowing_numbers": narrowing_numbers(narrowing, pair_names) if tested_narrowing else None,
        "sections": SECTIONS,
        "appendix": APPENDIX,
        "titles": dict(SECTIONS + APPENDIX),
        "slip_rate": lessons.sft_slip_rate(results.get("config") or {}),
        "elapsed": _number(run.get("elapsed_seconds")),  # first job start to last job end
        "groups_stored": groups_stored,
        "same_group_pairs": lessons.same_group_pairs(groups_stored),
        "advantage_lesson": lessons.advantage_lesson((train.get("example_groups") or {}).get("mixed")),
        "curve_lesson": lessons.curve_lesson(train.get("steps") or []),
        "ppo_lesson": lessons.ppo_lesson(results),
        "kl_takeaway": takeaway,
        "kl_lesson": lessons.kl_lesson(results, takeaway),
        "dr_grpo_lesson": lessons.dr_grpo_lesson(results, next(iter(lessons.same_group_pairs(groups_stored)), None)),
        "reward_floor": lessons.reward_floor(train.get("steps") or [], groups_stored),
        "length_lesson": lessons.length_lesson(results),
        "clip_lesson": lessons.clip_lesson(results),
        "cost_lesson": lessons.cost_lesson(results, methods),
        "health_numbers": lessons.health_numbers(train.get("steps") or [], health),
        "pitfall_numbers": train.get("pitfalls"),
        "grpo_config": (results.get("config") or {}).get("grpo") or {},
        "config_json": json.dumps(results.get("config") or {}, indent=2, ensure_ascii=False, sort_keys=True),
        "run": run,
        "benchmarks": benchmarks,
        "benchmark_total": sum(benchmarks.values()) if benchmarks else None,
        "tokens": _tokens(run),
        "health": health,
        "figures": {name: data_uri(p) for name, p in figure_paths(figures).items() if p.is_file()},
        "has_kl_real": bool((results.get("kl_real") or {}).get("logp_policy")),
        "training_kl_name": run_words.training_kl_name(results.get("config")),
        "sft_kl_words": run_words.sft_kl_words(results.get("config")),
        "kl_summary": kl_summary,
        "passk": passk,
        "passk_verdict": (passk or {}).get("verdict"),
        "passk_ks": [k for k in (1, 2, 4, 8, 16, 32, 64, 128, 256) if passk and k <= passk["n_samples"]],
        "evals": evals,
        "pass_keys": keys,
        "compare_keys": [keys[0], keys[-1]] if len(keys) > 1 else ["pass@1", "pass@8"],
        "n_samples": next((e.get("n_samples") for e in evals.values() if isinstance(e, dict)), None),
        "pair": pair,
        "transitions": transitions,
        "methods": methods,
        "preference_pairs": results.get("preference_pairs"),
        "reward_model": results.get("reward_model"),
        "ppo_health": {name: _health(run) for name, run in (results.get("runs") or {}).items()
                       if run.get("method") == "ppo"},
        "pitfalls": _pitfalls(results),
        "extra_sets": _extra_sets(results),
        "seed_study": _seed_study(results, lambda variant: prose.get(variant, variant)),
        "chain_study": _chain_study(results, lambda variant: prose.get(variant, variant)),
        "studies_from_other_settings": results.get("studies_from_other_settings") or [],
        "hacking": (results.get("hacking") or {}).get("report"),  # the rows the study stored for this report
        "losses": (results.get("losses") or {}).get("report"),
        "samples": samples,
        "side_by_side": lessons.side_by_side(samples),
    }


def _environment(template_dir: Path) -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(template_dir)),
        autoescape=select_autoescape(enabled_extensions=("html", "j2"), default_for_string=True, default=True),
        undefined=ChainableUndefined,  # optional parts of results.json may be missing
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(pct=pct, interval=interval, thousands=thousands, duration=duration, signed=signed,
                       p_value=p_value, verdict_word=verdict_word, verdict_class=verdict_class)
    return env


def _csp(script: str) -> str:
    """Content-Security-Policy: no network, data: images, inline CSS, and only this exact script."""
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
            f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'")


def render_report(results: dict, samples_by_model: dict[str, list[dict]], figures: dict[str, Path] | Path,
                  template_dir: Path = DEFAULT_TEMPLATE_DIR) -> str:
    """The report as one HTML string; ``figures``: {name: PNG path}, or the directory they were drawn into."""
    template_dir = Path(template_dir)
    script = (template_dir / "calculator.js").read_text(encoding="utf-8")
    style = (template_dir / "style.css").read_text(encoding="utf-8")
    context = build_context(results, samples_by_model, figures)
    # Our own static files, not model text: the only Markup in the page.
    context.update(script=Markup(script), style=Markup(style), csp=_csp(script))
    return _environment(template_dir).get_template(TEMPLATE_NAME).render(**context)


def write_report(results: dict, samples_by_model: dict[str, list[dict]], figures: dict[str, Path] | Path,
                 template_dir: Path, out_path: str | Path) -> Path:
    atomic_write_text(Path(out_path), render_report(results, samples_by_model, figures, template_dir))
    return Path(out_path)
