"""The generated blocks of README.md and docs/ (``<!-- table:NAME -->`` ... ``<!-- /table:NAME -->``), rendered from
the reference summaries: each block is one function in ``TABLES``, rows of values formatted into a markdown table."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

from thai_grpo.evaluation.plan import VERDICTS
from thai_grpo.report.plan_words import FAMILY_NAMES, VERDICT_WORDS, fmt_p
from thai_grpo_tools.memory_plan import markdown_table, real_config, stage_plans
from thai_grpo_tools.reference import PARTS, REPO, chain_rows, provenance, spread
from thai_grpo_tools.rehearse_full import table as gpu_check_table
from thai_grpo_tools.time_plan import tables as time_plan_tables

LABELS = {"base": "base (no adapter)", "sft": "SFT", "grpo": "GRPO", "dr_grpo": "Dr.GRPO", "rloo": "RLOO",
          "dpo": "DPO", "ppo": "PPO (reward model)", "ppo_verifier": "PPO (verifier)"}
P_FAMILY, VERDICT_PLAN = "p (adjusted in its family)", "verdict (family; the declared plan)"
NO_KL = "*The reference run has no k1/k3 study.*"
TABLES = {}


def fmt(value, digits: int = 3, signed: bool = False) -> str:
    return "-" if value is None else f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def fmt_interval(record: dict, key: str = "estimate", signed: bool = False, digits: int = 3) -> str:
    return (f"{fmt(record[key], digits, signed)} [{fmt(record['low'], digits, signed)}, "
            f"{fmt(record['high'], digits, signed)}]")


def diff(test: dict) -> str:
    return fmt_interval(test, "diff", True)


def test_p(test: dict) -> str:
    return fmt_p(test["p_holm"], bool(test.get("p_at_floor")))


def verdict_cell(test: dict) -> str:
    """'higher (primary comparison)'."""
    return f"{VERDICT_WORDS[test['verdict']]} ({FAMILY_NAMES.get(test['family'], test['family'])})"


def fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, rest = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if hours else f"{minutes} min {rest} s" if minutes else f"{rest} s"


def label(model: str) -> str:
    return LABELS.get(model, model)


def pair_label(pair: str) -> str:
    """'dr_grpo - grpo' -> 'Dr.GRPO - GRPO'."""
    return " - ".join(label(m) for m in pair.replace("_vs_", " - ").split(" - "))


def grid(head: list[str], rows: list[list[str]]) -> str:
    """A markdown table."""
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
                      *("| " + " | ".join(row) + " |" for row in rows)])


def titled(source: dict, body: str, after: str = "") -> str:
    return f"{provenance(source)}{after}:\n\n{body}"


def missing(part: str) -> str:
    return f"*Not in the reference run yet: `{PARTS[part][1]}`, then `make docs-reference`, puts it here.*"


def table(name: str, *parts: str):
    """Registers a block's renderer (ref, elsewhere) -> markdown; where the reference lacks one of ``parts`` the block
    says how to make the first such."""
    def register(render):
        def checked(ref: dict, elsewhere: dict | None = None) -> str:
            lacking = next((part for part in parts if not ref.get(part)), None)
            return missing(lacking) if lacking else render(ref, elsewhere or {})
        TABLES[name] = checked
        return checked
    return register


@table("headline")
def table_headline(ref, _):
    main, rows = ref["main"], []
    for name, m in main["models"].items():
        t = main["vs_sft"].get(name, {}).get("pass@1")
        rows.append([label(name), fmt_interval(m["pass@1"]), fmt(m["pass@n"]["estimate"]), fmt(m["greedy"]["estimate"]),
                     *([diff(t), test_p(t), verdict_cell(t)] if t else ["", "", ""])])
    k = next(iter(main["models"].values()))["pass@n"]["k"]
    return titled(main["source"], grid(["model", "pass@1 [95% over problems]", f"pass@{k}", "greedy",
                                        "pass@1 - SFT [95% paired]", P_FAMILY, VERDICT_PLAN], rows))


@table("costs")
def table_costs(ref, elsewhere):
    """Wall time of each command on the reference run's CPU and on the CPUs of elsewhere.json's ``costs``."""
    main, kept = ref["main"]["source"], elsewhere.get("costs", [])
    others = list(dict.fromkeys(c["cpu"] for c in kept))

    def there(cost):
        return "-" if cost is None else \
            f"{fmt_seconds(cost['wall_seconds'])} ({cost.get('commit') or 'an earlier commit, not recorded'})"

    rows = []
    for part, (_, command) in PARTS.items():
        src = (ref.get(part) or {}).get("source")
        own = "not run yet" if not src else fmt_seconds(src["wall_seconds"]) if src["wall_seconds"] else \
            f"{fmt_seconds(src['jobs_seconds'])} of jobs" if src.get("jobs_seconds") else "not measured"
        measured = {c["cpu"]: c for c in kept if c["part"] == part}
        rows.append([f"`{command}`", own, *(there(measured.get(cpu)) for cpu in others)])
    notes: dict[str, list[str]] = {}  # one note, once, for every command it describes
    for part, summary in ref.items():
        if summary["source"].get("note"):
            notes.setdefault(summary["source"]["note"], []).append(PARTS[part][1])
    return grid(["command", f"{main['cpu']}, {main['cores']} cores (reference run)", *others], rows) + \
        "".join(f"\n\n*{', '.join(names)}: {note}*" for note, names in notes.items())


@table("pairs")
def table_pairs(ref, _):
    rows = [[pair_label(pair), diff(t["pass@1"]), test_p(t["pass@1"]), verdict_cell(t["pass@1"])]
            for pair, t in ref["main"]["pairs"].items() if t["pass@1"] and "base" not in pair]
    return titled(ref["main"]["source"], grid(["pair (pass@1)", "difference [95% paired]", P_FAMILY, VERDICT_PLAN],
                                              rows))


@table("kl")
def table_kl(ref, _):
    kl = ref["main"].get("kl_real")
    if not kl:
        return NO_KL
    rows = [[name.replace("_minus_", " - "), fmt_interval(kl[name], "mean", "minus" in name, 4),
             fmt(kl[name].get("bootstrap_se"), 4), fmt(kl.get(f"exact_se_{name}"), 4) if name in ("k1", "k3") else ""]
            for name in ("exact", "k1", "k3", "k1_minus_exact", "k3_minus_exact")]
    unit = kl.get("interval_unit", "completions")
    of = f"{kl['completions']} completions" + (f" of {kl['problems']} problems" if kl.get("problems") else "")
    caveat = ("" if unit == "problems" else "\n\n*These intervals resample completions, not problems: where the KL "
              "varies by problem they are too narrow. `make docs-reference` on a new run gives them over problems.*")
    return titled(ref["main"]["source"], grid(["per token", f"mean [95% over {unit}]", "bootstrap SE",
                                               "exact SE (full distributions)"], rows),
                  f"; {kl['tokens']} tokens of {of}; k3 has the lower exact variance at "
                  f"{kl['share_k3_lower_variance']:.0%} of the positions") + caveat


@table("ppo")
def table_ppo(ref, _):
    main = ref["main"]
    rm = main.get("reward_model")
    if not rm or "ppo" not in main["models"]:
        return "*The reference run has no PPO row.*"
    t, run = main["vs_sft"]["ppo"]["pass@1"], main["training"].get("ppo", {})
    rows = [[f"reward model: share of {what} pairs ordered right", f"{fmt(rm[part]['accuracy'], 2)} of "
             f"{rm[part]['pairs']}"] for part, what in (("train", "its training"), ("heldout", "held-out"))]
    rows += [["PPO rollout accuracy, first -> last third", " -> ".join(fmt(v, 2) for v in run.get("accuracy", []))],
             ["PPO held-out pass@1 - SFT [95% paired]", f"{diff(t)}, adjusted p {test_p(t)}, {verdict_cell(t)}"]]
    return titled(main["source"], grid(["", "value"], rows))


CHAIN_COLUMNS = {"SFT": "main.models.sft.pass@1.estimate", "GRPO": "main.models.grpo.pass@1.estimate",
                 "GRPO - SFT": "main.vs_sft.grpo.pass@1.diff", "Dr.GRPO - GRPO": "main.pairs.dr_grpo - grpo.pass@1.diff",
                 "PPO - SFT": "main.vs_sft.ppo.pass@1.diff"}


@table("chains")
def table_chains(ref, elsewhere):
    """One row per whole chain with pass@1 values, and each column's range over the chains."""
    chains = chain_rows(ref, elsewhere)
    rows = [[c["cpu"], f"`{c['command']}`", c.get("note", ""),
             *(fmt(c["values"].get(key), signed=" - " in name) for name, key in CHAIN_COLUMNS.items())]
            for c in chains if any(key in c["values"] for key in CHAIN_COLUMNS.values())]
    widths = spread(chains)
    rows.append(["range", "", "", *(fmt((widths.get(key) or {}).get("range")) for key in CHAIN_COLUMNS.values())])
    return "pass@1 on the 200 held-out problems:\n\n" + grid(["CPU", "command", "run", *CHAIN_COLUMNS], rows)


@table("spread")
def table_spread(ref, elsewhere):
    def number(value):
        return str(value) if isinstance(value, int) else fmt(value)

    rows = [[pretty_key(key), str(s["chains"]), *(number(s[k]) for k in ("min", "max", "range"))]
            for key, s in spread(chain_rows(ref, elsewhere)).items()]
    return grid(["quantity", "chains", "min", "max", "range (the spread make compare uses)"], rows)


@table("stages")
def table_stages(ref, _):
    main = ref["main"]
    stages = main["stage_seconds"]
    if main["source"]["wall_seconds"] is None:
        return f"*Not measured in the reference run: {main['source'].get('note') or 'no wall time recorded'}.*"
    rows = [[f"`{stage}`", f"{seconds:.0f}"] for stage, seconds in sorted(stages.items(), key=lambda kv: -kv[1])]
    return titled(main["source"], grid(["stage (rule-wildcard)", "seconds"],
                                       rows + [["all jobs (sum)", f"{sum(stages.values()):.0f}"]]))


@table("example")
def table_example(ref, _):
    """One held-out problem with SFT's and GRPO's greedy answers and their reward breakdown."""
    example = ref["main"].get("example")
    if not example:
        return missing("main")
    greedy = example["greedy"]
    rows = [["answer", *("<br>".join(line.replace("|", "\\|") for line in a["text"].strip().splitlines())
                         for a in greedy.values())]]
    rows += [[part, *(f"{a[part]:.1f}" for a in greedy.values())] for part in ("correct", "format", "thai", "total")]
    return titled(ref["main"]["source"], f"> {example['question']}\n\n"
                  + grid(["", *(f"{label(m)} (greedy)" for m in greedy)], rows),
                  f", held-out problem {example['index'] + 1} (gold answer {example['gold']})")


@table("run-times")
def table_run_times(ref, elsewhere):
    """When `make run` shows the headline and when it ends, per CPU: measured runs of known code only."""
    main = ref["main"]["source"]
    runs = [{**main, "cpu": f"{main['cpu']}, {main['cores']} cores"}] if main.get("wall_seconds") else []
    runs += [c for c in elsewhere.get("costs", []) if c["part"] == "main" and c.get("commit")]
    rows = [[r["cpu"], fmt_seconds(r.get("headline_seconds")), fmt_seconds(r["wall_seconds"]), r["commit"],
             r.get("note") or "measured"] for r in runs]
    return grid(["CPU", "headline ready (after the jobs start)", "whole run (`time make run`, venv included)",
                 "commit", "how"], rows) if rows else missing("main")


@table("bench-steps", "bench")
def table_bench_steps(ref, _):
    """`make bench`'s split of one step of each method (and of held-out sampling) into its parts, in seconds."""
    rows = [[name, f"{step['seconds']['total']:.2f}", "; ".join(f"{part} {value:.2f}" for part, value in
                                                               step["seconds"].items() if part != "total" and value)]
            for name, step in ref["bench"]["steps"].items()]
    return titled(ref["bench"]["source"], grid(["step", "seconds", "parts (seconds)"], rows))


@table("projection", "bench")
def table_projection(ref, _):
    """`make bench`'s projection of the reference run onto other CPUs."""
    bench = ref["bench"]
    if not bench.get("other_cpus"):
        return missing("bench")
    rows = [[row["cpu"], row["model"], fmt_seconds(row["headline_s"]), fmt_seconds(row["jobs_s"])]
            for row in bench["other_cpus"]]
    return titled(bench["source"], grid(["CPU", "stage model", "headline ready", "all jobs (add the venv build)"], rows),
                  ", from the last run's stage times")


@table("passk", "passk")
def table_passk(ref, _):
    passk = ref["passk"]
    n = passk["n"]
    rows = [[label(m), *(fmt_interval(v[f"k={k}"]) for k in (1, 8, n))] for m, v in passk["models"].items()]
    rows += [[pair_label(name), *(fmt_interval(c[f"k={k}"], signed=True) for k in (1, 8, n))]
             for name, c in passk["comparisons"].items()]
    out = grid(["pass@k [95% over problems]", "k = 1", "k = 8", f"k = {n}"], rows)
    c = passk["comparisons"].get("grpo_vs_sft")
    if c:
        def at(k):
            return f"k = {k}" if k else f"no k up to {n}"
        out += (f"\n\nGRPO - SFT: the band first holds 0 at {at(c['first_k_includes_zero'])}; the point estimates "
                f"cross at {at(c['first_k_sign_flip'])}; SFT ahead with the band clear of 0 at k = {c['k_reversed']}. "
                f"Problems GRPO solved at least once and SFT never did (created): {c['created']}; the reverse (lost): "
                f"{c['lost']}; both: {c['both']}; neither: {c['neither']}.")
    return titled(passk["source"], out, f", {passk['problems']} problems x {n} samples")


def contrasts(tests: dict, name: str, p: str) -> str:
    """The seed and loss studies' contrasts against their baseline: difference, simultaneous interval, p, verdict."""
    return grid([name, "difference [simultaneous 95%]", p, "verdict"],
                [[pair_label(c), diff(v), fmt_p(v["p_holm"]), VERDICT_WORDS[v["verdict"]]] for c, v in tests.items()])


def family_of(tests: dict) -> str:
    return next((t["family_text"] for t in tests.values()), "")


@table("seeds", "seeds")
def table_seeds(ref, _):
    seeds = ref["seeds"]
    order = [str(s) for s in seeds["seeds"]]
    rows = [[label(m), *(fmt(v["per_seed"].get(s)) for s in order), f"{fmt(v['mean'])} [{fmt(v['t_low'])}, "
             f"{fmt(v['t_high'])}]", f"[{fmt(v['crossed_low'])}, {fmt(v['crossed_high'])}]",
             *(fmt(100 * v[k], 1) for k in ("sd", "resampling_sd", "within_run_se"))] for m, v in seeds["methods"].items()]
    family = family_of(seeds["pairs"])
    return titled(seeds["source"], grid(["method", *(f"seed {s}" for s in order), "mean [t 95% over seeds]",
                                         "crossed 95% (seeds and problems)", "seed SD (points)", "re-sampling SD",
                                         "within-run SE"], rows)
                  + "\n\n" + contrasts(seeds["pairs"], "contrast", "p (Dunnett-adjusted)")
                  + (f"\n\nFamily: {family}." if family else ""))


@table("hacking", "hacking")
def table_hacking(ref, _):
    def move(run, key, share=False):
        show = (lambda v: "-" if v is None else f"{v:.0%}") if share else (lambda v: fmt(v, 2))
        return f"{show(run[key]['start'])} -> {show(run[key]['last_third'])}"

    rows = [[f"`{name}`", move(r, "reward_mean"), move(r, "accuracy"), move(r, "empty_think_share", True),
             f"{r['empty_peak']:.0%} (step {r['empty_peak_step']})", move(r, "hollow_think_paid_share", True),
             move(r, "clipped_ratio", True), r.get("outcome") or ("flagged" if r["flagged"] else "quiet")]
            for name, r in ref["hacking"]["runs"].items()]
    return titled(ref["hacking"]["source"], grid(["run", "mean reward", "accuracy", "empty think", "empty think, peak",
                                                  "paid, no reasoning", "cut at budget", "detector (sliding window)"],
                                                 rows), "; step 1 -> mean of the last third of the steps")


@table("chain-study", "chain_study")
def table_chain_study(ref, _):
    study = ref["chain_study"]
    order = [str(s) for s in study["seeds"]]
    rows = [[label(m), *(fmt(v["pass1"].get(s)) + (f" ({fmt(v['gain'].get(s), signed=True)})" if "gain" in v else "")
                         for s in order),
             fmt_interval(v["gain_mean"], "diff", True) if "gain_mean" in v else ""] for m, v in study["models"].items()]
    pairs = grid(["pair", "difference [crossed 95%]", "df", P_FAMILY, "family", "verdict"],
                 [[pair_label(p), diff(v), fmt(v["df"], 1), test_p(v), v["family_text"], VERDICT_WORDS[v["verdict"]]]
                  for p, v in study["pairs"].items()])
    power = "; ".join(f"{FAMILY_NAMES.get(family, family)}: "
                      f"{f['chains_needed'] if f['chains_needed'] else 'more held-out problems than'} chains for "
                      f"{100 * f['effect']:.0f} points at level {fmt_p(f['alpha'])}"
                      for family, f in (study.get("power") or {}).items())
    hacking = "".join(f"\n- {sentence}" for sentence in study.get("hacking", {}).values())
    return (titled(study["source"], grid(["model", *(f"chain {s}: pass@1 (- SFT)" for s in order),
                                          "mean gain over SFT [crossed 95%: chains and problems]"], rows))
            + f"\n\n{pairs}"
            + (f"\n\nChains each family needs for 80% power (from these components): {power}." if power else "")
            + (f"\n\nReward hacking at the same chain seeds:{hacking}" if hacking else ""))


@table("losses", "losses")
def table_losses(ref, _):
    """Per loss variant: what it changes, its confirmatory metric per seed, its mean and its contrast with the
    baseline; its other metrics' contrasts (secondary families); the runs the health detector flagged."""
    losses = ref["losses"]
    metric, baseline, order = losses["metric"], losses["baseline"], [str(s) for s in losses["seeds"]]
    rows = []
    for name, v in losses["variants"].items():
        t = losses["versus"][metric].get(name)
        rows.append([f"`{name}`", "; ".join(f"`{f}` {c[0]} -> {c[1]}" for f, c in v["changes"].items())
                     or "(the baseline)", *(fmt(v["per_seed"].get(s)) for s in order),
                     f"{fmt(v['mean'])} [{fmt(v['crossed_low'])}, {fmt(v['crossed_high'])}]",
                     *([diff(t), fmt_p(t["p_holm"]), VERDICT_WORDS[t["verdict"]]] if t else ["", "", ""]),
                     ", ".join(v["flagged"]) or "none"])
    head = ["variant", f"what it changes against `{baseline}`", *(f"seed {s}" for s in order),
            "mean [crossed 95%: seeds and problems]", f"- {baseline} [simultaneous 95%]", "p (Dunnett-adjusted)",
            "verdict", "runs flagged"]
    secondary = [m for m in losses["metrics"] if m != metric]
    others = grid(["variant", *(f"{m} - {baseline} [simultaneous 95%]: verdict" for m in secondary)],
                  [[f"`{name}`", *(f"{diff(losses['versus'][m][name])}: {VERDICT_WORDS[losses['versus'][m][name]['verdict']]}"
                                   for m in secondary)] for name in losses["versus"][metric]])
    power = losses.get("power") or {}
    need = (f" The family would need {power['seeds_needed']} seeds to detect {100 * power['effect']:.0f} points at 80% "
            f"power (power now {fmt(power['power_now'], 2)})." if power.get("seeds_needed") else "")
    return (titled(losses["source"], f"{grid(head, rows)}\n\nFamily: {family_of(losses['versus'][metric])}.{need}",
                   f"; {metric} on {losses['problems']} held-out problems x {losses['samples']} samples, "
                   f"{len(order)} training seeds per variant")
            + (f"\n\nThe other metrics (secondary families, outside the plan's gate):\n\n{others}" if secondary else ""))


def crossed(v: dict) -> str:
    """'+0.238 [+0.153, +0.323], 4.5 df, p 0.0011: **higher**' (p adjusted in its family)."""
    return f"{diff(v)}, {fmt(v['df'], 1)} df, p {test_p(v)}: **{VERDICT_WORDS[v['verdict']]}**"


@table("chain-verdicts", "chain_study")
def table_chain_verdicts(ref, _):
    """What the chain study decides under the declared plan, family by family, in the order the plan tests them."""
    study = ref["chain_study"]
    by_family = {family: {p: v for p, v in study["pairs"].items() if v["family"] == family}
                 for family in ("primary", "vs_sft", "methods")}
    lines = [f"{provenance(study['source'])}; {len(study['seeds'])} chains (seeds "
             f"{', '.join(str(s) for s in study['seeds'])}), pass@1, the crossed analysis of chains and problems:", ""]
    for pair, v in by_family["primary"].items():
        gains = study["models"].get(pair.split(" - ")[0], {}).get("gain", {})
        lines.append(f"- **Primary comparison, {pair_label(pair)}** ({v['family_text']}): {crossed(v)}. Per chain: "
                     f"{', '.join(fmt(g, signed=True) for g in gains.values())} "
                     f"({sum(g > 0 for g in gains.values())} of {len(gains)} above 0).")
    for family in ("vs_sft", "methods"):
        tests = by_family[family]
        if not tests:
            continue
        resolved = sum(v["verdict"] in VERDICTS[:3] for v in tests.values())  # higher, lower, equivalent
        name = FAMILY_NAMES[family]
        head = f"- **{name[0].upper()}{name[1:]}** ({family_of(tests)}): resolved {resolved} of {len(tests)}"
        if all(v["verdict"] == "not_tested" for v in tests.values()):
            lines.append(f"{head}; none was tested: the family before it did not reject every pair.")
        else:
            lines += [f"{head}.", *(f"  - {pair_label(p)}: {crossed(v)}" for p, v in tests.items())]
    return "\n".join(lines)


@table("variance-sources", "chain_study", "seeds")
def table_variance_sources(ref, _):
    """Per method, pass@1's SD over chains, over training seeds on one chain, and over re-sampling one model."""
    study, seeds = ref["chain_study"], ref["seeds"]
    rows, ratios = [], {}
    for model, entry in study["models"].items():
        chain_sd, seed = statistics.stdev(entry["pass1"].values()), seeds["methods"].get(model)
        rows.append([label(model), f"{100 * chain_sd:.1f}",
                     *((f"{100 * seed[k]:.1f}" if seed else "-") for k in ("sd", "resampling_sd"))])
        if seed and seed["sd"] > 0:
            ratios[model] = chain_sd / seed["sd"]
    head = ["model", f"SD over {len(study['seeds'])} chains (points of pass@1)",
            f"SD over {len(seeds['seeds'])} training seeds, one chain", "re-sampling SD (one model sampled again)"]
    return (f"{provenance(study['source'])} and {titled(seeds['source'], grid(head, rows))}\n\n"
            f"SD over chains / SD over training seeds: {'; '.join(f'{label(m)} {r:.1f}x' for m, r in ratios.items())}. "
            f"The chain moves pass@1 more than the training seed for {sum(r > 1 for r in ratios.values())} of the "
            f"{len(ratios)} methods both studies trained.")


@table("headline-detail")
def table_headline_detail(ref, _):
    """GRPO against SFT on the reference chain, and its training curves' first and last thirds."""
    main = ref["main"]
    sft, grpo = main["models"]["sft"], main["models"]["grpo"]
    tests, run = main["vs_sft"]["grpo"], main["training"]["grpo"]

    def before_after(metric, key=None):
        return f"SFT {fmt(sft[metric]['estimate'])} -> GRPO {fmt(grpo[metric]['estimate'])}" + \
            (f" ({diff(tests[key])}, {verdict_cell(tests[key])})" if key else "")

    return titled(main["source"], f"- pass@1: {before_after('pass@1', 'pass@1')}.\n"
                  f"- pass@{grpo['pass@n']['k']}: {before_after('pass@n')}.\n"
                  f"- greedy accuracy: {before_after('greedy', 'greedy')}.\n"
                  f"- training, first -> last third of its {run['steps']} steps: rollout accuracy "
                  f"{' -> '.join(fmt(v, 2) for v in run['accuracy'])}, KL to the reference per token "
                  f"{' -> '.join(fmt(v, 3) for v in run['kl'])}.")


@table("kl-finding")
def table_kl_finding(ref, _):
    """k1 and k3 against the exact KL: their exact and bootstrap standard errors, and whether each interval holds it."""
    kl = ref["main"].get("kl_real")
    if not kl:
        return NO_KL

    def against(name):
        v = kl[f"{name}_minus_exact"]
        return f"{name} - exact {fmt_interval(v, 'mean', True, 4)} " + \
            ("holds 0: agrees with the exact KL" if v["low"] <= 0 <= v["high"] else "excludes 0: misses the exact KL")

    return (f"{provenance(ref['main']['source'])}: k3's exact standard error is "
            f"{kl['exact_se_k3'] / kl['exact_se_k1']:.1f} times k1's ({fmt(kl['exact_se_k3'], 4)} against "
            f"{fmt(kl['exact_se_k1'], 4)}); the bootstrap over {kl.get('interval_unit', 'completions')} saw "
            f"{fmt(kl['k3']['bootstrap_se'], 4)} for k3 and {fmt(kl['k1']['bootstrap_se'], 4)} for k1. "
            f"{against('k3')}; {against('k1')}. k3 has the lower exact variance at "
            f"{kl['share_k3_lower_variance']:.0%} of the positions.")


@table("ppo-scores", "pitfalls")
def table_ppo_scores(ref, _):
    pitfalls = ref["pitfalls"]
    rows = [[label(m), fmt_interval(pitfalls["models"][m]["pass@1"]), f"{diff(t)}, p {test_p(t)}, {verdict_cell(t)}"]
            for m in ("ppo", "ppo_verifier", "grpo") if m in pitfalls["models"] for t in [pitfalls["vs_sft"][m]["pass@1"]]]
    return titled(pitfalls["source"], grid(["model", "pass@1 [95%]", "- SFT [95% paired]"], rows))


@table("tokenizer")
def table_tokenizer(_, elsewhere):
    """The tokenizer experiment kept in elsewhere.json: the same data, steps and seeds under each pre-tokenisation."""
    record = elsewhere.get("tokenizer")
    if not record:
        return "*No tokenizer experiment recorded.*"
    rows = [[f"`{words}`", fmt(v["tokens_per_text"], 1) if v.get("tokens_per_text") else "-",
             f"{v['facts_recalled']:.0%}", fmt(v["sft_greedy_unseen"], 2)] for words, v in record["runs"].items()]
    return f"{record['how']} ({record['cpu']}):\n\n" + grid(
        ["`base.tokenizer.words`", "tokens per text (relative)", "arithmetic facts the base recalls",
         "SFT greedy accuracy, unseen skeletons"], rows)


@table("pitfalls", "pitfalls")
def table_pitfalls(ref, _):
    pitfalls = ref["pitfalls"]
    rows = [[label(m), fmt_interval(v["pass@1"]), fmt(v["greedy"]["estimate"]),
             diff(pitfalls["vs_sft"][m]["pass@1"]) if m in pitfalls["vs_sft"] else ""]
            for m, v in pitfalls["models"].items()]
    return titled(pitfalls["source"], grid(["model", "pass@1", "greedy", "pass@1 - SFT"], rows))


def render_tables(ref: dict, elsewhere: dict, root: Path = REPO) -> dict[str, str]:
    """Every generated block by name: ``TABLES`` from the summaries, the memory plan, time plan and `make gpu-check`
    records (docs/reference/gpu_check*.json) from the config and records under ``root``."""
    paths = sorted((root / "docs" / "reference").glob("gpu_check*.json"))
    records = [json.loads(path.read_text(encoding="utf-8")) for path in paths]
    checks = [f"`{path.name}`: {r['machine']}, preset {r['preset']}, {r['precision']}"
              f"{', ' + r['weights'] if r.get('weights') else ''}, {r['wall_s']:.0f} s in all:\n\n"
              + gpu_check_table(r["stages"], r.get("memory", "torch.cuda.max_memory_allocated"))
              for path, r in zip(paths, records)]
    return {**{name: render(ref, elsewhere) for name, render in TABLES.items()},
            "memory-plan": markdown_table(stage_plans(real_config(root))), **time_plan_tables(real_config(root), records),
            "gpu-check": "\n\n".join(checks) or "No `make gpu-check` record is kept here yet."}


BLOCK = re.compile(r"<!-- table:(?P<name>[\w-]+) -->\n(?P<body>.*?)\n?<!-- /table:(?P=name) -->", re.S)


def table_blocks(text: str) -> dict[str, str]:
    """{name: body} of every generated block in a markdown text; an opening marker never closed is an error."""
    blocks = {m["name"]: m["body"] for m in BLOCK.finditer(text)}
    unclosed = [name for name in re.findall(r"<!-- table:([\w-]+) -->", text) if name not in blocks]
    if unclosed:
        raise ValueError(f"<!-- table:{unclosed[0]} --> has no <!-- /table:{unclosed[0]} --> after it: close it")
    return blocks


def replace_tables(text: str, tables: dict[str, str]) -> str:
    """``text`` with each block's body replaced by ``tables[NAME]``; a block naming no table is an error."""
    table_blocks(text)

    def fill(m):
        if m["name"] not in tables:
            raise KeyError(f"no generated table named {m['name']!r}: one of {sorted(tables)}")
        return f"<!-- table:{m['name']} -->\n{tables[m['name']]}\n<!-- /table:{m['name']} -->"
    return BLOCK.sub(fill, text)


def stale_tables(text: str, tables: dict[str, str]) -> list[str]:
    """Names of the blocks whose body differs from ``tables``."""
    return [name for name, body in table_blocks(text).items() if tables.get(name) != body]


def pretty_key(key: str) -> str:
    """A flat summary key in words: 'main.models.sft.pass@1.estimate' -> 'SFT pass@1'."""
    part, *rest = key.removesuffix(".estimate").split(".")
    words = {("main", "models"): lambda: f"{label(rest[1])} {rest[2].replace('pass@n', 'pass@8')}",
             ("main", "vs_sft"): lambda: f"{label(rest[1])} - SFT, {rest[2]}",
             ("main", "pairs"): lambda: f"{pair_label(rest[1])}, {rest[2]}",
             ("passk", "comparisons"): lambda: f"passk: {pair_label(rest[1])} " + re.sub(r"^k=", "at k = ", rest[2]),
             ("passk", "models"): lambda: f"passk: {label(rest[1])} pass@{rest[2][2:]}",
             ("seeds", "methods"): lambda: f"seeds: {label(rest[1])} {' '.join(rest[2:])} pass@1",
             ("hacking", "runs"): lambda: f"hacking: {rest[1]} {rest[2].replace('_', ' ')}, {rest[3].replace('_', ' ')}"}
    return words.get((part, rest[0]), lambda: f"{part}: " + " ".join(r.replace("_", " ") for r in rest))()
