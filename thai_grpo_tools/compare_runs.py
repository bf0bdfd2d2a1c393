"""`make compare BEFORE=DIR`: two of your own runs, each model's held-out pass@1 before and after (paired by problem),
the paired bootstrap over problems with p Holm-adjusted over the models, and the config keys that differ.

    cp -r results results-before     # keep a run, change a knob, run again, then:
    make compare BEFORE=results-before
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from thai_grpo.core.io import read_json, read_jsonl, write_json
from thai_grpo.evaluation.plan import analysis_plan, holm_adjust
from thai_grpo.evaluation.scoring import paired_test, per_problem_values

ABSENT = "(absent)"


class RunMismatch(ValueError):
    """A refusal in one line, naming the fix: a folder that is not a finished run, or two runs on other problems."""


def load_run(path: str | Path) -> dict:
    """A finished run's path, commit, config, held-out ids, and per model its ids, correct counts and samples."""
    path = Path(path).resolve()
    if (path / "results" / "results.json").is_file() and not (path / "results.json").is_file():
        raise RunMismatch(f"{path} holds a run in results/ (`cp -r results DIR` into an existing DIR copies inside "
                          f"it): name {path / 'results'}")
    if not (path / "results.json").is_file():
        raise RunMismatch(f"{path} is not a finished run (no results.json): finish it with `make run`, or name the "
                          f"folder `cp -r results` made")
    if not (path / "data" / "heldout.jsonl").is_file():
        raise RunMismatch(f"{path} is not a finished run (no data/heldout.jsonl): copy the whole results/ folder")
    results = read_json(path / "results.json")
    heldout = [row["id"] for row in read_jsonl(path / "data" / "heldout.jsonl")]
    models = {}
    for name, scores in (results.get("eval") or {}).items():
        samples = path / "eval" / name / "samples.jsonl"
        ids = [record["id"] for record in read_jsonl(samples)] if samples.is_file() else heldout
        counts = scores["per_problem_correct"]
        if len(ids) != len(counts):
            raise RunMismatch(f"{path}: {name} has {len(counts)} scored problems and {len(ids)} held-out ids: "
                              f"the run did not finish; rerun it with `make run`")
        models[name] = {"ids": ids, "per_problem_correct": counts, "n_samples": scores["n_samples"]}
    if not models:
        raise RunMismatch(f"{path}: results.json scores no model: rerun it with `make run`")
    commit = (results.get("run") or {}).get("commit")  # the run card's: a copied run's checkout is not its commit
    return {"path": str(path), "commit": str(commit) if commit else None, "config": results.get("config") or {},
            "heldout": heldout, "models": models}


def flatten(tree: dict, prefix: str = "") -> dict:
    """{"a.b.c": value} for every leaf of nested dicts; a list or an empty dict is one leaf, compared whole."""
    out = {}
    for key, value in tree.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and value:
            out.update(flatten(value, dotted))
        else:
            out[dotted] = value
    return out


def config_differences(before: dict, after: dict) -> list[dict]:
    """Every dotted config key whose value differs, sorted: {"key", "before", "after"} (``ABSENT``: not in a run)."""
    flat_before, flat_after = flatten(before), flatten(after)
    keys = sorted(set(flat_before) | set(flat_after))
    return [{"key": key, "before": flat_before.get(key, ABSENT), "after": flat_after.get(key, ABSENT)}
            for key in keys if flat_before.get(key, ABSENT) != flat_after.get(key, ABSENT)]


def check_same_problems(before: dict, after: dict, differences: list[dict]) -> None:
    """RunMismatch unless both runs held out the same problems (as sets of ids), naming the data keys that differ."""
    ids_before, ids_after = set(before["heldout"]), set(after["heldout"])
    if ids_before == ids_after:
        return
    data_keys = [d["key"] for d in differences if d["key"].startswith("data.")]
    cause = f" ({', '.join(data_keys)} differ)" if data_keys else ""
    raise RunMismatch(f"the held-out sets differ: {len(ids_before)} problems before, {len(ids_after)} after, "
                      f"{len(ids_before & ids_after)} in common{cause}: compare two runs of the same data settings")


def paired_scores(name: str, before: dict, after: dict) -> tuple[dict, dict]:
    """Model ``name``'s before and after scores, the after counts put in the before run's problem order (by id)."""
    position = {problem: i for i, problem in enumerate(after["ids"])}
    if set(position) != set(before["ids"]):
        raise RunMismatch(f"{name} was scored on other problems in the two runs (eval/{name}/samples.jsonl): rerun "
                          f"it with `make run`")
    after_counts = [after["per_problem_correct"][position[problem]] for problem in before["ids"]]
    return ({"per_problem_correct": before["per_problem_correct"], "n_samples": before["n_samples"]},
            {"per_problem_correct": after_counts, "n_samples": after["n_samples"]})


def compare_runs(before: dict, after: dict, n_boot: int | None = None, seed: int | None = None) -> dict:
    """Per model pass@1 before and after, the paired bootstrap of the difference, p Holm-adjusted; the config keys
    that differ."""
    differences = config_differences(before["config"], after["config"])
    check_same_problems(before, after, differences)
    evaluation = after["config"].get("eval") or {}
    n_boot = int(n_boot if n_boot is not None else evaluation.get("bootstrap_samples", 10_000))
    seed = int(seed if seed is not None else evaluation.get("seed", 0))
    alpha = analysis_plan(after["config"])["alpha"]
    names = [m for m in after["models"] if m in before["models"]]
    if not names:
        raise RunMismatch("the two runs score no model in common: add the same models to eval.models in both")
    rows = []
    for name in names:
        scores_before, scores_after = paired_scores(name, before["models"][name], after["models"][name])
        test = paired_test(scores_after, scores_before, "pass@1", n_boot, seed)
        rows.append({"model": name, "problems": len(scores_before["per_problem_correct"]),
                     "n_before": scores_before["n_samples"], "n_after": scores_after["n_samples"],
                     "pass@1_before": float(per_problem_values(scores_before, "pass@1").mean()),
                     "pass@1_after": float(per_problem_values(scores_after, "pass@1").mean()),
                     "identical": scores_before == scores_after, **test})
    for row, adjusted in zip(rows, holm_adjust([row["p_value"] for row in rows])):
        row["p_holm"] = adjusted
        row["moved"] = adjusted < alpha
    return {"before": {key: before[key] for key in ("path", "commit")},
            "after": {key: after[key] for key in ("path", "commit")},
            "problems": len(before["heldout"]),
            "n_resamples": n_boot, "seed": seed, "alpha": alpha, "models": rows,
            "only_before": [m for m in before["models"] if m not in after["models"]],
            "only_after": [m for m in after["models"] if m not in before["models"]],
            "config_differences": differences, "verdict": verdict(rows, alpha)}


def verdict(rows: list[dict], alpha: float) -> str:
    """Which models' pass@1 moved (Holm-adjusted p < alpha) and which did not, or that every count is the same."""
    moved = [f"{r['model']} {r['mean_diff']:+.4f} (Holm p {_p(r)})" for r in rows if r["moved"]]
    still = len(rows) - len(moved)
    if all(r["identical"] for r in rows):
        return "Every model solved each problem exactly as often in both runs."
    if not moved:
        return (f"No model's pass@1 moved beyond what resampling the problems gives (every Holm-adjusted p >= "
                f"{alpha:g}); that is not evidence that the runs are the same.")
    rest = f"; the other {still} did not move beyond the problems' resampling" if still else ""
    return f"pass@1 moved at alpha {alpha:g} (Holm over {len(rows)} models): {', '.join(moved)}{rest}."


def _p(row: dict) -> str:
    """The Holm-adjusted p; at the bootstrap's floor (no resample as extreme) as the upper bound it is."""
    return f"{'<=' if row['p_at_floor'] else ''}{row['p_holm']:.3g}"


def render_text(comparison: dict) -> str:
    """The comparison as the text `make compare BEFORE=DIR` prints."""
    lines = [f"{label + ':':8}{comparison[label]['path']}  ({comparison[label]['commit'] or 'commit not recorded'})"
             for label in ("before", "after")]
    rows = comparison["models"]
    lines += ["", f"held-out pass@1 on the same {comparison['problems']} problems, paired by id; "
              "difference = after - before",
              f"with its 95% paired bootstrap interval over problems (B = {comparison['n_resamples']}, seed "
              f"{comparison['seed']}); p Holm-adjusted over the {len(rows)} models", ""]
    width = max(len("model"), *(len(r["model"]) for r in rows))
    lines.append(f"{'model':<{width}}  {'before':>7}  {'after':>7}  {'difference':>10}  {'95% interval':<18}  "
                 f"{'p (Holm)':>8}")
    for r in rows:
        interval = f"[{r['ci_low']:+.4f}, {r['ci_high']:+.4f}]"
        samples = "" if r["n_before"] == r["n_after"] else f"  (n = {r['n_before']} -> {r['n_after']} samples)"
        lines.append(f"{r['model']:<{width}}  {r['pass@1_before']:>7.4f}  {r['pass@1_after']:>7.4f}  "
                     f"{r['mean_diff']:>+10.4f}  {interval:<18}  {_p(r):>8}{samples}")
    for label in ("only_before", "only_after"):
        if comparison[label]:
            lines.append(f"{label.replace('_', ' ')} (not compared): {', '.join(comparison[label])}")
    if any(r["p_at_floor"] for r in rows):
        lines.append(f"<= : no resample was as extreme as the difference; p is at most this (B = "
                     f"{comparison['n_resamples']}, the after run's eval.bootstrap_samples; "
                     "--resamples N for more)")
    lines += ["", comparison["verdict"], ""]
    differences = comparison["config_differences"]
    if differences:
        lines.append(f"config keys that differ ({len(differences)}, before -> after):")
        lines += [f"  {d['key']}: " + " -> ".join(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
                                                  for v in (d["before"], d["after"])) for d in differences]
    else:
        lines.append("config: identical in both runs (a difference above comes from the code, the machine or the "
                     "libraries, not from a knob)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, required=True, help="the earlier run's results folder")
    parser.add_argument("--after", type=Path, default=Path("results"), help="the later run's (default: results)")
    parser.add_argument("--resamples", type=int, help="bootstrap resamples (default: the after run's "
                                                      "eval.bootstrap_samples)")
    parser.add_argument("--seed", type=int, help="bootstrap seed (default: the after run's eval.seed)")
    parser.add_argument("--json", type=Path, help="also write the comparison as JSON to this file")
    args = parser.parse_args()
    try:
        comparison = compare_runs(load_run(args.before), load_run(args.after), args.resamples, args.seed)
    except RunMismatch as refused:
        sys.exit(f"compare: {refused}")
    print(render_text(comparison))
    if args.json:
        write_json(args.json, comparison)


if __name__ == "__main__":
    main()
