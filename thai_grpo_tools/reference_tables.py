"""The tables of README.md and docs/ (``make docs``), rendered from the reference summaries of
``thai_grpo_tools.reference``, and the markers they live between (``<!-- table:NAME -->`` ... ``<!-- /table:NAME -->``).

Every test carries its verdict under the declared plan (``plan_words``' vocabulary) and its family.

``render_tables`` gives every table by name; ``replace_tables`` writes them into a text; ``stale_tables`` names the
ones a text holds that differ (a number edited by hand, or summaries newer than the docs)."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

from thai_grpo.evaluation.plan import VERDICTS
from thai_grpo.report.plan_words import FAMILY_NAMES, VERDICT_WORDS, fmt_p
from thai_grpo_tools.reference import PARTS, chain_rows, provenance, spread

LABELS = {"base": "base (no adapter)", "sft": "SFT", "grpo": "GRPO", "dr_grpo": "Dr.GRPO", "rloo": "RLOO",
          "dpo": "DPO", "ppo": "PPO (reward model)", "ppo_verifier": "PPO (verifier)"}


def fmt(value, digits: int = 3, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def fmt_number(value) -> str:
    """Counts as they are, other numbers to 3 decimals."""
    return str(value) if isinstance(value, int) else fmt(value)


def fmt_interval(record: dict, key: str = "estimate", signed: bool = False, digits: int = 3) -> str:
    return (f"{fmt(record[key], digits, signed)} [{fmt(record['low'], digits, signed)}, "
            f"{fmt(record['high'], digits, signed)}]")


def test_p(test: dict, key: str = "p_holm") -> str:
    return fmt_p(test[key], bool(test.get("p_at_floor")))


def verdict_cell(test: dict) -> str:
    """'higher (primary comparison)'."""
    return f"{VERDICT_WORDS[test['verdict']]} ({FAMILY_NAMES.get(test['family'], test['family'])})"


def fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, rest = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"


def label(model: str) -> str:
    return LABELS.get(model, model)


def pair_label(pair: str) -> str:
    """'dr_grpo - grpo' -> 'Dr.GRPO - GRPO'."""
    return " - ".join(label(m) for m in pair.split(" - "))


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def _missing(part: str) -> str:
    return f"*Not in the reference run yet: `{PARTS[part][1]}`, then `make docs-reference`, puts it here.*"


def table_headline(ref: dict) -> str:
    main = ref["main"]
    rows = []
    tests = [t["pass@1"] for t in main["vs_sft"].values() if t.get("pass@1")]
    for name, m in main["models"].items():
        test = main["vs_sft"].get(name, {}).get("pass@1")
        rows.append([label(name), fmt_interval(m["pass@1"]), fmt(m["pass@n"]["estimate"]), fmt(m["greedy"]["estimate"]),
                     fmt_interval(test, "diff", True) if test else "", test_p(test) if test else "",
                     verdict_cell(test) if test else ""])
    k = next(iter(main["models"].values()))["pass@n"]["k"]
    head = ["model", "pass@1 [95% over problems]", f"pass@{k}", "greedy", "pass@1 - SFT [95% paired]",
            "p (adjusted in its family)", "verdict (family; the declared plan)"]
    return f"{provenance(main['source'])}:\n\n" + _table(head, rows)


def elsewhere_cost(cost: dict | None) -> str:
    """A wall time measured on another CPU, with the commit it ran (older records did not keep theirs)."""
    if cost is None:
        return "-"
    return f"{fmt_seconds(cost['wall_seconds'])} ({cost.get('commit') or 'an earlier commit, not recorded'})"


def table_costs(ref: dict, elsewhere: dict) -> str:
    """Wall time of each command on the reference run's CPU and on the CPUs of elsewhere.json's ``costs``."""
    main = ref["main"]["source"]
    kept = elsewhere.get("costs", [])
    others = list(dict.fromkeys(c["cpu"] for c in kept))
    rows = []
    for part, (_, command) in PARTS.items():
        src = (ref.get(part) or {}).get("source")
        own = "not run yet" if not src else fmt_seconds(src["wall_seconds"]) if src["wall_seconds"] else \
            f"{fmt_seconds(src['jobs_seconds'])} of jobs" if src.get("jobs_seconds") else "not measured"
        measured = {c["cpu"]: c for c in kept if c["part"] == part}
        rows.append([f"`{command}`", own, *(elsewhere_cost(measured.get(cpu)) for cpu in others)])
    commands: dict[str, list[str]] = {}  # one note, once, for every command it describes
    for part, summary in ref.items():
        if summary["source"].get("note"):
            commands.setdefault(summary["source"]["note"], []).append(PARTS[part][1])
    notes = [f"{', '.join(names)}: {note}" for note, names in commands.items()]
    return _table(["command", f"{main['cpu']}, {main['cores']} cores (reference run)", *others], rows) + \
        "".join(f"\n\n*{note}*" for note in notes)


def table_pairs(ref: dict) -> str:
    main = ref["main"]
    tests = {pair: t["pass@1"] for pair, t in main["pairs"].items() if t["pass@1"] and "base" not in pair}
    rows = [[pair_label(pair), fmt_interval(t, "diff", True), test_p(t), verdict_cell(t)] for pair, t in tests.items()]
    head = ["pair (pass@1)", "difference [95% paired]", "p (adjusted in its family)",
            "verdict (family; the declared plan)"]
    return f"{provenance(main['source'])}:\n\n" + _table(head, rows)


def table_kl(ref: dict) -> str:
    main, kl = ref["main"], ref["main"].get("kl_real")
    if not kl:
        return "*The reference run has no k1/k3 study.*"
    rows = [[name.replace("_minus_", " - "), fmt_interval(kl[name], "mean", "minus" in name, 4),
             fmt(kl[name].get("bootstrap_se"), 4), fmt(kl.get(f"exact_se_{name}"), 4) if name in ("k1", "k3") else ""]
            for name in ("exact", "k1", "k3", "k1_minus_exact", "k3_minus_exact")]
    unit = kl.get("interval_unit", "completions")
    of = f"{kl['completions']} completions" + (f" of {kl['problems']} problems" if kl.get("problems") else "")
    caveat = ("" if unit == "problems" else "\n\n*These intervals resample completions, not problems: where the KL "
              "varies by problem they are too narrow. `make docs-reference` on a new run gives them over problems.*")
    return (f"{provenance(main['source'])}; {kl['tokens']} tokens of {of}; "
            f"k3 has the lower exact variance at {kl['share_k3_lower_variance']:.0%} of the positions:\n\n"
            + _table(["per token", f"mean [95% over {unit}]", "bootstrap SE", "exact SE (full distributions)"],
                     rows) + caveat)


def table_ppo(ref: dict) -> str:
    main = ref["main"]
    rm, ppo = main.get("reward_model"), main["models"].get("ppo")
    if not rm or not ppo:
        return "*The reference run has no PPO row.*"
    test = main["vs_sft"]["ppo"]["pass@1"]
    run = main["training"].get("ppo", {})
    def share(part):
        return f"{fmt(rm[part]['accuracy'], 2)} of {rm[part]['pairs']}"

    rows = [["reward model: share of its training pairs ordered right", share("train")],
            ["reward model: share of held-out pairs ordered right", share("heldout")],
            ["PPO rollout accuracy, first -> last third", " -> ".join(fmt(v, 2) for v in run.get("accuracy", []))],
            ["PPO held-out pass@1 - SFT [95% paired]",
             f"{fmt_interval(test, 'diff', True)}, adjusted p {test_p(test)}, {verdict_cell(test)}"]]
    return f"{provenance(main['source'])}:\n\n" + _table(["", "value"], rows)


CHAIN_COLUMNS = {"SFT": "main.models.sft.pass@1.estimate", "GRPO": "main.models.grpo.pass@1.estimate",
                 "GRPO - SFT": "main.vs_sft.grpo.pass@1.diff", "Dr.GRPO - GRPO": "main.pairs.dr_grpo - grpo.pass@1.diff",
                 "PPO - SFT": "main.vs_sft.ppo.pass@1.diff"}


def table_chains(ref: dict, elsewhere: dict) -> str:
    """One row per whole chain with pass@1 values (a run kept only for its pass@k or hacking numbers has none here;
    the spread table reads it), and each column's range over the chains."""
    chains = chain_rows(ref, elsewhere)
    rows = [[c["cpu"], f"`{c['command']}`", c.get("note", ""),
             *(fmt(c["values"].get(key), signed=" - " in name) for name, key in CHAIN_COLUMNS.items())]
            for c in chains if any(key in c["values"] for key in CHAIN_COLUMNS.values())]
    widths = spread(chains)
    rows.append(["range", "", "", *(fmt((widths.get(key) or {}).get("range")) for key in CHAIN_COLUMNS.values())])
    return "pass@1 on the 200 held-out problems:\n\n" + _table(["CPU", "command", "run", *CHAIN_COLUMNS], rows)


def table_spread(ref: dict, elsewhere: dict) -> str:
    rows = [[pretty_key(key), str(s["chains"]), fmt_number(s["min"]), fmt_number(s["max"]), fmt_number(s["range"])]
            for key, s in spread(chain_rows(ref, elsewhere)).items()]
    return _table(["quantity", "chains", "min", "max", "range (the spread make compare uses)"], rows)


def table_stages(ref: dict) -> str:
    main = ref["main"]
    stages = main["stage_seconds"]
    if main["source"]["wall_seconds"] is None:
        return f"*Not measured in the reference run: {main['source'].get('note') or 'no wall time recorded'}.*"
    rows = [[f"`{stage}`", f"{seconds:.0f}"] for stage, seconds in sorted(stages.items(), key=lambda kv: -kv[1])]
    rows.append(["all jobs (sum)", f"{sum(stages.values()):.0f}"])
    return f"{provenance(main['source'])}:\n\n" + _table(["stage (rule-wildcard)", "seconds"], rows)


def _cell(text: str) -> str:
    """Text for a markdown table cell: its lines joined by <br>, pipes escaped."""
    return "<br>".join(line.replace("|", "\\|") for line in text.strip().splitlines())


def table_example(ref: dict) -> str:
    """One held-out problem of the reference run with SFT's and GRPO's greedy answers and their reward breakdown."""
    main = ref["main"]
    example = main.get("example")
    if not example:
        return _missing("main")
    names = list(example["greedy"])
    rows = [["answer", *(_cell(example["greedy"][m]["text"]) for m in names)]]
    rows += [[part, *(f"{example['greedy'][m][part]:.1f}" for m in names)] for part in ("correct", "format", "thai",
                                                                                         "total")]
    return (f"{provenance(main['source'])}, held-out problem {example['index'] + 1} (gold answer {example['gold']}):\n\n"
            f"> {example['question']}\n\n" + _table(["", *(f"{label(m)} (greedy)" for m in names)], rows))


def table_run_times(ref: dict, elsewhere: dict) -> str:
    """When `make run` shows the headline and when it ends, per CPU: measured runs only, each with its commit."""
    main = ref["main"]["source"]
    rows = []
    if main.get("wall_seconds"):
        rows.append([f"{main['cpu']}, {main['cores']} cores", fmt_seconds(main.get("headline_seconds")),
                     fmt_seconds(main["wall_seconds"]), main["commit"], main.get("note") or "measured"])
    for cost in elsewhere.get("costs", []):
        if cost["part"] == "main" and cost.get("commit"):  # a run of known code only
            rows.append([cost["cpu"], fmt_seconds(cost.get("headline_seconds")), fmt_seconds(cost["wall_seconds"]),
                         cost.get("commit", "-"), cost.get("note") or "measured"])
    if not rows:
        return _missing("main")
    return _table(["CPU", "headline ready (after the jobs start)", "whole run (`time make run`, venv included)",
                   "commit", "how"], rows)


def table_bench_steps(ref: dict) -> str:
    """`make bench`'s split of one step of each method (and of held-out sampling) into its parts, in seconds."""
    if "bench" not in ref:
        return _missing("bench")
    bench = ref["bench"]
    rows = []
    for name, step in bench["steps"].items():
        seconds = step["seconds"]
        parts = [f"{part} {value:.2f}" for part, value in seconds.items() if part != "total" and value]
        rows.append([name, f"{seconds['total']:.2f}", "; ".join(parts)])
    return f"{provenance(bench['source'])}:\n\n" + _table(["step", "seconds", "parts (seconds)"], rows)


def table_projection(ref: dict) -> str:
    """`make bench`'s projection of the reference run onto other CPUs (2 cores, Snakemake's schedule replayed)."""
    if "bench" not in ref or not ref["bench"].get("other_cpus"):
        return _missing("bench")
    bench = ref["bench"]
    rows = [[row["cpu"], row["model"], fmt_seconds(row["headline_s"]), fmt_seconds(row["jobs_s"])]
            for row in bench["other_cpus"]]
    return (f"{provenance(bench['source'])}, from the last run's stage times:\n\n"
            + _table(["CPU", "stage model", "headline ready", "all jobs (add the venv build)"], rows))


def table_departures(ref: dict) -> str:
    """Where the reference run (the offline default) departs from the chapter's experiment, and why: the run card's
    table (thai_grpo.analyses.chapter), as the trainers received each setting."""
    main = ref["main"]
    departures = main.get("chapter_departures")
    if departures is None:
        return _missing("main")
    rows = [[f"`{d['key']}`", f"`{d['chapter']}`", f"`{d['value']}`", d.get("reason") or ""] for d in departures]
    return f"{provenance(main['source'])}:\n\n" + _table(["setting", "the chapter", "offline default", "why"], rows)


def table_passk(ref: dict) -> str:
    passk = ref.get("passk")
    if not passk:
        return _missing("passk")
    n = passk["n"]
    rows = [[label(m), *(fmt_interval(v[f"k={k}"]) for k in (1, 8, n))] for m, v in passk["models"].items()]
    for name, c in passk["comparisons"].items():
        after, before = name.split("_vs_")
        rows.append([f"{label(after)} - {label(before)}", *(fmt_interval(c[f"k={k}"], signed=True) for k in (1, 8, n))])
    out = _table(["pass@k [95% over problems]", "k = 1", "k = 8", f"k = {n}"], rows)
    c = passk["comparisons"].get("grpo_vs_sft")
    if c:
        def at(k):
            return f"k = {k}" if k else f"no k up to {n}"
        out += (f"\n\nGRPO - SFT: the band first holds 0 at {at(c['first_k_includes_zero'])}; the point estimates "
                f"cross at {at(c['first_k_sign_flip'])}; SFT ahead with the band clear of 0 at k = {c['k_reversed']}. "
                f"Problems GRPO solved at least once and SFT never did (created): {c['created']}; the reverse (lost): "
                f"{c['lost']}; both: {c['both']}; neither: {c['neither']}.")
    return f"{provenance(passk['source'])}, {passk['problems']} problems x {n} samples:\n\n" + out


def table_seeds(ref: dict) -> str:
    seeds = ref.get("seeds")
    if not seeds:
        return _missing("seeds")
    order = [str(s) for s in seeds["seeds"]]
    rows = [[label(m), *(fmt(v["per_seed"].get(s)) for s in order), f"{fmt(v['mean'])} [{fmt(v['t_low'])}, "
             f"{fmt(v['t_high'])}]", f"[{fmt(v['crossed_low'])}, {fmt(v['crossed_high'])}]", fmt(100 * v["sd"], 1),
             fmt(100 * v["resampling_sd"], 1), fmt(100 * v["within_run_se"], 1)] for m, v in seeds["methods"].items()]
    table = _table(["method", *(f"seed {s}" for s in order), "mean [t 95% over seeds]",
                    "crossed 95% (seeds and problems)", "seed SD (points)", "re-sampling SD", "within-run SE"], rows)
    pairs = _table(["contrast", "difference [simultaneous 95%]", "p (Dunnett-adjusted)", "verdict"],
                   [[pair_label(p), fmt_interval(v, "diff", True), fmt_p(v["p_holm"]), VERDICT_WORDS[v["verdict"]]]
                    for p, v in seeds["pairs"].items()])
    family = next((v["family_text"] for v in seeds["pairs"].values()), "")
    return f"{provenance(seeds['source'])}:\n\n{table}\n\n{pairs}" + (f"\n\nFamily: {family}." if family else "")


def table_hacking(ref: dict) -> str:
    hacking = ref.get("hacking")
    if not hacking:
        return _missing("hacking")

    def move(run, key, share=False):
        start, last = run[key]["start"], run[key]["last_third"]
        show = (lambda v: "-" if v is None else f"{v:.0%}") if share else (lambda v: fmt(v, 2))
        return f"{show(start)} -> {show(last)}"

    rows = [[f"`{name}`", move(r, "reward_mean"), move(r, "accuracy"), move(r, "empty_think_share", True),
             f"{r['empty_peak']:.0%} (step {r['empty_peak_step']})", move(r, "hollow_think_paid_share", True),
             move(r, "clipped_ratio", True), r.get("outcome") or ("flagged" if r["flagged"] else "quiet")]
            for name, r in hacking["runs"].items()]
    return (f"{provenance(hacking['source'])}; step 1 -> mean of the last third of the steps:\n\n"
            + _table(["run", "mean reward", "accuracy", "empty think", "empty think, peak", "paid, no reasoning",
                      "cut at budget", "detector (sliding window)"], rows))


def table_chain_study(ref: dict) -> str:
    study = ref.get("chain_study")
    if not study:
        return _missing("chain_study")
    order = [str(s) for s in study["seeds"]]
    rows = [[label(m), *(f"{fmt(v['pass1'].get(s))}" + (f" ({fmt(v['gain'].get(s), signed=True)})" if "gain" in v else "")
                         for s in order),
             f"{fmt(v['gain_mean']['diff'], signed=True)} [{fmt(v['gain_mean']['low'], signed=True)}, "
             f"{fmt(v['gain_mean']['high'], signed=True)}]" if "gain_mean" in v else ""]
            for m, v in study["models"].items()]
    table = _table(["model", *(f"chain {s}: pass@1 (- SFT)" for s in order),
                    "mean gain over SFT [crossed 95%: chains and problems]"], rows)
    pairs = _table(["pair", "difference [crossed 95%]", "df", "p (adjusted in its family)", "family", "verdict"],
                   [[pair_label(p), fmt_interval(v, "diff", True), fmt(v["df"], 1),
                     test_p(v), v["family_text"], VERDICT_WORDS[v["verdict"]]]
                    for p, v in study["pairs"].items()])
    power = "; ".join(f"{FAMILY_NAMES.get(family, family)}: "
                      f"{f['chains_needed'] if f['chains_needed'] else 'more held-out problems than'} chains for "
                      f"{100 * f['effect']:.0f} points at level {fmt_p(f['alpha'])}"
                      for family, f in (study.get("power") or {}).items())
    hacking = "".join(f"\n- {sentence}" for sentence in study.get("hacking", {}).values())
    return (f"{provenance(study['source'])}:\n\n{table}\n\n{pairs}"
            + (f"\n\nChains each family needs for 80% power (from these components): {power}." if power else "")
            + (f"\n\nReward hacking at the same chain seeds:{hacking}" if hacking else ""))


def _change(field: str, values: list) -> str:
    return f"`{field}` {values[0]} -> {values[1]}"


def table_losses(ref: dict) -> str:
    """Per loss variant: what it changes, its confirmatory metric per training seed and its mean with the crossed
    interval, its difference from the baseline with Dunnett's simultaneous interval, p and verdict; its other metrics'
    differences and verdicts (secondary families); the runs the health detector flagged."""
    losses = ref.get("losses")
    if not losses:
        return _missing("losses")
    metric, baseline, order = losses["metric"], losses["baseline"], [str(s) for s in losses["seeds"]]
    rows = []
    for name, v in losses["variants"].items():
        test = losses["versus"][metric].get(name)
        rows.append([f"`{name}`", "; ".join(_change(f, c) for f, c in v["changes"].items()) or "(the baseline)",
                     *(fmt(v["per_seed"].get(s)) for s in order),
                     f"{fmt(v['mean'])} [{fmt(v['crossed_low'])}, {fmt(v['crossed_high'])}]",
                     fmt_interval(test, "diff", True) if test else "", fmt_p(test["p_holm"]) if test else "",
                     VERDICT_WORDS[test["verdict"]] if test else "", ", ".join(v["flagged"]) or "none"])
    head = ["variant", f"what it changes against `{baseline}`", *(f"seed {s}" for s in order),
            "mean [crossed 95%: seeds and problems]", f"- {baseline} [simultaneous 95%]", "p (Dunnett-adjusted)",
            "verdict", "runs flagged"]
    secondary = [m for m in losses["metrics"] if m != metric]
    others = _table(["variant", *(f"{m} - {baseline} [simultaneous 95%]: verdict" for m in secondary)],
                    [[f"`{name}`", *(f"{fmt_interval(losses['versus'][m][name], 'diff', True)}: "
                                     f"{VERDICT_WORDS[losses['versus'][m][name]['verdict']]}" for m in secondary)]
                     for name in losses["versus"][metric]])
    family = next((t["family_text"] for t in losses["versus"][metric].values()), "")
    power = losses.get("power") or {}
    need = (f" The family would need {power['seeds_needed']} seeds to detect {100 * power['effect']:.0f} points at 80% "
            f"power (power now {fmt(power['power_now'], 2)})." if power.get("seeds_needed") else "")
    return (f"{provenance(losses['source'])}; {metric} on {losses['problems']} held-out problems x {losses['samples']} "
            f"samples, {len(order)} training seeds per variant:\n\n{_table(head, rows)}\n\nFamily: {family}.{need}"
            + (f"\n\nThe other metrics (secondary families, outside the plan's gate):\n\n{others}" if secondary else ""))


def _points(value: float) -> str:
    return f"{100 * value:.1f}"


def _crossed(v: dict) -> str:
    """'+0.238 [+0.153, +0.323], 4.5 df, p 0.0011: **higher**' (p adjusted in its family)."""
    return f"{fmt_interval(v, 'diff', True)}, {fmt(v['df'], 1)} df, p {test_p(v)}: **{VERDICT_WORDS[v['verdict']]}**"


def table_chain_verdicts(ref: dict) -> str:
    """What the chain study decides under the declared plan, family by family, in the order the plan tests them: the
    primary comparison, the pairs against SFT, the pairs between methods (how many resolve, and which)."""
    study = ref.get("chain_study")
    if not study:
        return _missing("chain_study")
    pairs = study["pairs"]
    by_family = {family: {p: v for p, v in pairs.items() if v["family"] == family}
                 for family in ("primary", "vs_sft", "methods")}
    chains = len(study["seeds"])
    lines = [f"{provenance(study['source'])}; {chains} chains (seeds {', '.join(str(s) for s in study['seeds'])}), "
             "pass@1, the crossed analysis of chains and problems:", ""]
    for pair, v in by_family["primary"].items():
        gains = study["models"].get(pair.split(" - ")[0], {}).get("gain", {})
        above = sum(g > 0 for g in gains.values())
        lines.append(f"- **Primary comparison, {pair_label(pair)}** ({v['family_text']}): {_crossed(v)}. Per chain: "
                     f"{', '.join(fmt(g, signed=True) for g in gains.values())} ({above} of {len(gains)} above 0).")
    for family in ("vs_sft", "methods"):
        tests = by_family[family]
        if not tests:
            continue
        resolved = {p: v for p, v in tests.items() if v["verdict"] in VERDICTS[:3]}  # higher, lower, equivalent
        untested = [p for p, v in tests.items() if v["verdict"] == "not_tested"]
        text = next(iter(tests.values()))["family_text"]
        name = FAMILY_NAMES[family]
        head = f"- **{name[0].upper()}{name[1:]}** ({text}): resolved {len(resolved)} of {len(tests)}"
        if len(untested) == len(tests):
            lines.append(f"{head}; none was tested: the family before it did not reject every pair.")
            continue
        lines.append(f"{head}.")
        lines += [f"  - {pair_label(p)}: {_crossed(v)}" for p, v in tests.items()]
    return "\n".join(lines)


def table_variance_sources(ref: dict) -> str:
    """Per method, how far pass@1 moves with the whole chain (chain study: SD over chains), with the training seed on
    one chain (seed study: SD over seeds) and with a new draw of samples from one model (re-sampling SD)."""
    study, seeds = ref.get("chain_study"), ref.get("seeds")
    if not study or not seeds:
        return _missing("chain_study" if not study else "seeds")
    rows, ratios = [], {}
    for model, entry in study["models"].items():
        chain_sd = statistics.stdev(entry["pass1"].values())
        seed = seeds["methods"].get(model)
        row = [label(model), _points(chain_sd), _points(seed["sd"]) if seed else "-",
               _points(seed["resampling_sd"]) if seed else "-"]
        if seed and seed["sd"] > 0:
            ratios[model] = chain_sd / seed["sd"]
        rows.append(row)
    head = ["model", f"SD over {len(study['seeds'])} chains (points of pass@1)",
            f"SD over {len(seeds['seeds'])} training seeds, one chain", "re-sampling SD (one model sampled again)"]
    said = "; ".join(f"{label(m)} {r:.1f}x" for m, r in ratios.items())
    larger = sum(r > 1 for r in ratios.values())
    return (f"{provenance(study['source'])} and {provenance(seeds['source'])}:\n\n{_table(head, rows)}\n\n"
            f"SD over chains / SD over training seeds: {said}. The chain moves pass@1 more than the training seed for "
            f"{larger} of the {len(ratios)} methods both studies trained.")


def table_headline_detail(ref: dict) -> str:
    """GRPO on the reference chain: pass@1, pass@k and greedy accuracy before (SFT) and after, with the paired
    differences and verdicts, and its training curves' first and last thirds."""
    main = ref["main"]
    sft, grpo = main["models"]["sft"], main["models"]["grpo"]
    tests, run = main["vs_sft"]["grpo"], main["training"]["grpo"]
    k = grpo["pass@n"]["k"]

    def verdict(test):
        return f"{fmt_interval(test, 'diff', True)}, {verdict_cell(test)}"

    return (f"{provenance(main['source'])}:\n\n"
            f"- pass@1: SFT {fmt(sft['pass@1']['estimate'])} -> GRPO {fmt(grpo['pass@1']['estimate'])} "
            f"({verdict(tests['pass@1'])}).\n"
            f"- pass@{k}: SFT {fmt(sft['pass@n']['estimate'])} -> GRPO {fmt(grpo['pass@n']['estimate'])}.\n"
            f"- greedy accuracy: SFT {fmt(sft['greedy']['estimate'])} -> GRPO {fmt(grpo['greedy']['estimate'])} "
            f"({verdict(tests['greedy'])}).\n"
            f"- training, first -> last third of its {run['steps']} steps: rollout accuracy "
            f"{' -> '.join(fmt(v, 2) for v in run['accuracy'])}, KL to the reference per token "
            f"{' -> '.join(fmt(v, 3) for v in run['kl'])}.")


def table_kl_finding(ref: dict) -> str:
    """k1 and k3 against the exact KL on the reference run's tokens: k3's exact standard error against k1's and
    against what a bootstrap sees, and whether each estimator's interval holds the truth."""
    kl = ref["main"].get("kl_real")
    if not kl:
        return "*The reference run has no k1/k3 study.*"

    def holds(name):
        v = kl[name]
        return "holds 0: agrees with the exact KL" if v["low"] <= 0 <= v["high"] else "excludes 0: misses the exact KL"

    ratio = kl["exact_se_k3"] / kl["exact_se_k1"]
    return (f"{provenance(ref['main']['source'])}: k3's exact standard error is {ratio:.1f} times k1's "
            f"({fmt(kl['exact_se_k3'], 4)} against {fmt(kl['exact_se_k1'], 4)}); the bootstrap over "
            f"{kl.get('interval_unit', 'completions')} saw {fmt(kl['k3']['bootstrap_se'], 4)} for k3 and "
            f"{fmt(kl['k1']['bootstrap_se'], 4)} for k1. k3 - exact "
            f"{fmt_interval(kl['k3_minus_exact'], 'mean', True, 4)} {holds('k3_minus_exact')}; k1 - exact "
            f"{fmt_interval(kl['k1_minus_exact'], 'mean', True, 4)} {holds('k1_minus_exact')}. k3 has the lower exact "
            f"variance at {kl['share_k3_lower_variance']:.0%} of the positions.")


def table_ppo_scores(ref: dict) -> str:
    """The pitfalls run's PPO with the learned reward model, PPO scored by the verifier and GRPO: pass@1 and the
    difference from SFT with its verdict."""
    pitfalls = ref.get("pitfalls")
    if not pitfalls:
        return _missing("pitfalls")
    rows = [[label(m), fmt_interval(pitfalls["models"][m]["pass@1"]),
             f"{fmt_interval(t, 'diff', True)}, p {test_p(t)}, {verdict_cell(t)}"]
            for m in ("ppo", "ppo_verifier", "grpo") if m in pitfalls["models"]
            for t in [pitfalls["vs_sft"][m]["pass@1"]]]
    return f"{provenance(pitfalls['source'])}:\n\n" + _table(["model", "pass@1 [95%]", "- SFT [95% paired]"], rows)


def table_tokenizer(elsewhere: dict) -> str:
    """The tokenizer experiment kept in elsewhere.json: the same data, steps and seeds under each pre-tokenisation."""
    record = elsewhere.get("tokenizer")
    if not record:
        return "*No tokenizer experiment recorded.*"
    rows = [[f"`{words}`", fmt(v["tokens_per_text"], 1) if v.get("tokens_per_text") else "-",
             f"{v['facts_recalled']:.0%}", fmt(v["sft_greedy_unseen"], 2)] for words, v in record["runs"].items()]
    return (f"{record['how']} ({record['cpu']}):\n\n"
            + _table(["`base.tokenizer.words`", "tokens per text (relative)", "arithmetic facts the base recalls",
                      "SFT greedy accuracy, unseen skeletons"], rows))


def table_pitfalls(ref: dict) -> str:
    pitfalls = ref.get("pitfalls")
    if not pitfalls:
        return _missing("pitfalls")
    rows = [[label(m), fmt_interval(v["pass@1"]), fmt(v["greedy"]["estimate"]),
             fmt_interval(pitfalls["vs_sft"][m]["pass@1"], "diff", True) if m in pitfalls["vs_sft"] else ""]
            for m, v in pitfalls["models"].items()]
    return f"{provenance(pitfalls['source'])}:\n\n" + _table(["model", "pass@1", "greedy", "pass@1 - SFT"], rows)


def table_memory_plan(root: Path) -> str:
    """`make memory-plan`'s table: each stage of the real config's run planned on a 16 GB T4, computed from the
    config files under ``root`` (thai_grpo_tools.stage_plans), not measured."""
    from thai_grpo_tools.stage_plans import markdown_table, real_config, stage_plans

    return markdown_table(stage_plans(real_config(root)))


def time_tables(root: Path) -> dict[str, str]:
    """docs/real-run.md's time check (the cost model against the `make gpu-check` records in
    docs/reference/gpu_check*.json and the chapter's T4 times) and time plan (the real run per card), from the config
    files under ``root`` (thai_grpo_tools.time_plan)."""
    import json

    from thai_grpo_tools.stage_plans import real_config
    from thai_grpo_tools.time_plan import tables

    records = [json.loads(path.read_text(encoding="utf-8"))
               for path in sorted((root / "docs" / "reference").glob("gpu_check*.json"))]
    return tables(real_config(root), records)


def table_gpu_check(root: Path) -> str:
    """The `make gpu-check` records kept in docs/reference/gpu_check*.json (they calibrate the time plan): for
    each, where it ran, then each stage's peak memory beside the plan and its seconds per step, as the check printed
    them (thai_grpo_tools.rehearsal_full.table)."""
    import json

    from thai_grpo_tools.rehearsal_full import table

    blocks = []
    for path in sorted((root / "docs" / "reference").glob("gpu_check*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        weights = f", {record['weights']}" if record.get("weights") else ""
        blocks.append(f"`{path.name}`: {record['machine']}, preset {record['preset']}, {record['precision']}{weights}, "
                      f"{record['wall_s']:.0f} s in all:\n\n"
                      + table(record["stages"], record.get("memory", "torch.cuda.max_memory_allocated")))
    return "\n\n".join(blocks) or "No `make gpu-check` record is kept here yet."


def render_tables(ref: dict, elsewhere: dict, root: Path = Path(__file__).resolve().parents[1]) -> dict[str, str]:
    """Every generated table by name, from the reference summaries ``ref`` ({part: summary}) and ``elsewhere``."""
    return {"headline": table_headline(ref), "costs": table_costs(ref, elsewhere), "pairs": table_pairs(ref),
            "kl": table_kl(ref), "ppo": table_ppo(ref), "chains": table_chains(ref, elsewhere),
            "spread": table_spread(ref, elsewhere), "stages": table_stages(ref),
            "passk": table_passk(ref), "seeds": table_seeds(ref), "hacking": table_hacking(ref),
            "pitfalls": table_pitfalls(ref), "losses": table_losses(ref), "chain-study": table_chain_study(ref),
            "departures": table_departures(ref), "example": table_example(ref),
            "run-times": table_run_times(ref, elsewhere), "bench-steps": table_bench_steps(ref),
            "projection": table_projection(ref), "memory-plan": table_memory_plan(root),
            **time_tables(root), "gpu-check": table_gpu_check(root),
            "chain-verdicts": table_chain_verdicts(ref), "variance-sources": table_variance_sources(ref),
            "headline-detail": table_headline_detail(ref), "kl-finding": table_kl_finding(ref),
            "ppo-scores": table_ppo_scores(ref), "tokenizer": table_tokenizer(elsewhere)}


BLOCK = re.compile(r"<!-- table:(?P<name>[\w-]+) -->\n(?P<body>.*?)\n?<!-- /table:(?P=name) -->", re.S)


def table_blocks(text: str) -> dict[str, str]:
    """{name: body} of every generated block in a markdown text; an opening marker without its closing one is an
    error (the block would silently stop being generated)."""
    blocks = {m["name"]: m["body"] for m in BLOCK.finditer(text)}
    unclosed = [name for name in re.findall(r"<!-- table:([\w-]+) -->", text) if name not in blocks]
    if unclosed:
        raise ValueError(f"<!-- table:{unclosed[0]} --> has no <!-- /table:{unclosed[0]} --> after it: close it")
    return blocks


def replace_tables(text: str, tables: dict[str, str]) -> str:
    """``text`` with the body of each ``<!-- table:NAME -->`` block replaced by ``tables[NAME]``; a block naming no
    table is an error (a typo would otherwise freeze a hand-written table)."""
    table_blocks(text)

    def fill(m):
        if m["name"] not in tables:
            raise KeyError(f"no generated table named {m['name']!r}: one of {sorted(tables)}")
        return f"<!-- table:{m['name']} -->\n{tables[m['name']]}\n<!-- /table:{m['name']} -->"
    return BLOCK.sub(fill, text)


def stale_tables(text: str, tables: dict[str, str]) -> list[str]:
    """Names of the blocks whose body differs from what ``render_tables`` gives (a number edited by hand, or
    reference summaries newer than the docs)."""
    return [name for name, body in table_blocks(text).items() if tables.get(name) != body]


def pretty_key(key: str) -> str:
    """A flat summary key in words: 'main.models.sft.pass@1.estimate' -> 'SFT pass@1', 'main.vs_sft.grpo.pass@1.diff'
    -> 'GRPO - SFT, pass@1', 'passk.comparisons.grpo_vs_sft.k=64.estimate' -> 'passk: GRPO - SFT at k = 64'."""
    part, *rest = key.removesuffix(".estimate").split(".")
    if part == "main" and rest[0] == "models":
        return f"{label(rest[1])} {rest[2].replace('pass@n', 'pass@8')}"
    if part == "main" and rest[0] == "vs_sft":
        return f"{label(rest[1])} - SFT, {rest[2]}"
    if part == "main" and rest[0] == "pairs":
        return f"{pair_label(rest[1])}, {rest[2]}"
    if part == "passk" and rest[0] == "comparisons":
        after, before = rest[1].split("_vs_")
        what = rest[2].replace("k=", "at k = ") if rest[2].startswith("k=") else rest[2]
        return f"passk: {label(after)} - {label(before)} {what}"
    if part == "passk" and rest[0] == "models":
        return f"passk: {label(rest[1])} pass@{rest[2][2:]}"
    if part == "seeds" and rest[0] == "methods":
        return f"seeds: {label(rest[1])} {' '.join(rest[2:])} pass@1"
    if part == "hacking" and rest[0] == "runs":
        return f"hacking: {rest[1]} {rest[2].replace('_', ' ')}, {rest[3].replace('_', ' ')}"
    return f"{part}: " + " ".join(r.replace("_", " ") for r in rest)
