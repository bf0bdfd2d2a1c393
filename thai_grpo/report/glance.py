"""The report's first screen: the headline, each model's gain over the plan's reference and the health flags, all from
``comparison.pairwise`` and the runs' health records, so that it and the statistics note cannot disagree."""

from __future__ import annotations

from thai_grpo.evaluation.plan import VERDICTS, analysis_plan
from thai_grpo.report import run_words
from thai_grpo.report.plan_words import METRIC_NAMES, family_text, verdict_word
from thai_grpo.report.verdicts import bound, pair_test

NO_TEST = "no paired test"
FAMILY_SHORT = {"primary": "primary", "vs_sft": "vs SFT", "methods": "between methods", "secondary": "secondary",
                "many_to_one": "vs baseline"}


def plan_of(results: dict) -> dict:
    """The plan results.json was tested under: the comparison's record, else its config's ``analysis``."""
    return (results.get("comparison") or {}).get("plan") or analysis_plan(results.get("config"))


def comparison_names(results: dict) -> dict[str, str]:
    """{model or variant: its method's name in the comparison} ("grpo" -> "GRPO", "base" -> "Base (no adapter)")."""
    rows = (results.get("comparison") or {}).get("methods") or []
    return {row["model"]: row["method"] for row in rows if row.get("model") and row.get("method")}


def model_names(results: dict) -> dict[str, str]:
    """{model: its comparison name, else its own} of the evaluated models, ``eval.models`` order then any other."""
    named, evals = comparison_names(results), results.get("eval") or {}
    listed = ((results.get("config") or {}).get("eval") or {}).get("models") or []
    return {model: named.get(model, model) for model in dict.fromkeys([*listed, *evals]) if model in evals}


def prose_names(results: dict) -> dict[str, str]:
    """``comparison_names`` as prose uses them: "grpo" -> "GRPO", "dr_grpo" -> "Dr.GRPO", and "base" as it is."""
    return {**comparison_names(results), "base": "base"}


def gain_row(test: dict | None, model: str, name: str) -> dict:
    """One row of the gains figure: ``model`` - reference from its pairwise test, with the plan's verdict and family."""
    decided = bool(test) and test.get("verdict") in VERDICTS
    row = {"model": model, "name": name, "mean_diff": None, "ci_low": None, "ci_high": None, "verdict": None,
           "word": NO_TEST, "family": None, "family_short": None, "family_text": None,
           "supported": False, "interval_text": None}
    if test:
        row.update(mean_diff=test["mean_diff"], ci_low=test["ci_low"], ci_high=test["ci_high"])
        row["interval_text"] = f"{bound(test['mean_diff'])} [{bound(test['ci_low'])}, {bound(test['ci_high'])}]"
    if decided:
        row.update(verdict=test["verdict"], word=verdict_word(test), family=test.get("family"),
                   family_short=FAMILY_SHORT.get(test.get("family"), test.get("family")),
                   family_text=family_text(test), supported=bool(test.get("supported")))
    elif test:
        row["word"] = "no verdict recorded"
    return row


def gain_rows(results: dict) -> list[dict]:
    """``gain_row`` of every compared model but the plan's reference, in ``eval.models`` order ([] without it)."""
    plan, names = plan_of(results), model_names(results)
    reference, metric = plan["reference"], plan["metric"]
    pairwise = (results.get("comparison") or {}).get("pairwise") or []
    if reference not in names:
        return []
    return [gain_row(pair_test(pairwise, model, reference, metric), model, name)
            for model, name in names.items() if model != reference]


def headline(results: dict) -> dict | None:
    """The plan's primary comparison a - b (GRPO - SFT) for the top of the page; None unless both were evaluated."""
    plan, names, evals = plan_of(results), model_names(results), results.get("eval") or {}
    a, b = plan["primary"]
    if a not in names or b not in names:
        return None
    metric = plan["metric"]
    test = pair_test((results.get("comparison") or {}).get("pairwise") or [], a, b, metric)
    score = {m: ((evals[m].get(metric) or {}).get("estimate") if metric.startswith("pass@") else None) for m in (a, b)}
    return {**gain_row(test, a, names[a]), "a": a, "b": b, "a_name": names[a], "b_name": names[b], "metric": metric,
            "metric_name": METRIC_NAMES.get(metric, metric), "tested": bool(test), "scores": score,
            "problems": evals[a].get("num_problems"), "samples": evals[a].get("n_samples"),
            "signed": {key: bound(test[key]) for key in ("mean_diff", "ci_low", "ci_high")} if test else None}


def _flags(name: str, health: dict | None) -> dict:
    health = health or {}
    flags = {"truncation": bool(health.get("truncation_failed")), "hacking": bool(health.get("hacking_suspect")),
             "updates": bool(health.get("updates_lost"))}
    return {"name": name, **flags, "flagged": any(flags.values())}


def _has_rollouts(run: dict) -> bool:
    """Whether a run sampled completions while training (what the health checks read): DPO did not."""
    return any("completion_length_mean" in step or "clipped_ratio" in step for step in run.get("steps") or [])


def health_summary(results: dict, main_health: dict) -> dict:
    """Health flags of the main run, other models that sampled while training or lost updates, PPO's reward model."""
    names, runs = model_names(results), results.get("runs") or {}
    main = (results.get("train") or {}).get("variant") or "grpo"
    checked = [m for m in names if m != main and m in runs
               and (_has_rollouts(runs[m]) or (runs[m].get("health") or {}).get("updates_lost"))]
    others = [_flags(names[m], runs[m].get("health")) for m in checked]
    reward_model = ((results.get("run") or {}).get("updates") or {}).get("reward_model") or {}
    if any(reward_model.values()):  # PPO's reward model: a training stage without a row of its own
        others.append(_flags("PPO's reward model", {"updates_lost": True}))
    flagged = [o for o in others if o["flagged"]]
    return {"main": _flags(names.get(main, main), main_health), "others": others, "flagged": flagged}


def first_screen(results: dict, main_health: dict) -> dict:
    """Everything the first screen shows: the lead, the headline, the gains figure's rows and captions, the flags."""
    plan, names = plan_of(results), model_names(results)
    rows, reference = gain_rows(results), names.get(plan["reference"], plan["reference"])
    metric = METRIC_NAMES.get(plan["metric"], plan["metric"])
    problems = next((e.get("num_problems") for e in (results.get("eval") or {}).values() if isinstance(e, dict)), None)
    return {"lead": run_words.lead(results), "caveat": run_words.caveat(results), "headline": headline(results),
            "gains": rows, "metric": metric, "reference": reference, "problems": problems,
            "health": health_summary(results, main_health)}
