"""Before and after the change of decision rule, and how many chains each family of the plan needs
(thai_grpo_tools.rule_change).

  published  from docs/reference/chain_study.json and chain_study_main.json (its seed-42 chain); a study summarised
             before the crossed analysis:
             approximated from per-chain values and the main chain's interval over problems)
  study      from a chain study's results/chains/results.json (exact: the crossed analysis it holds)
  seeds      from results/seeds/results.json: each method against grpo, and the seeds the family needs
  losses     from results/losses/results.json: each loss variant against grpo, every metric

published and study print the markdown table (pair, estimate, crossed interval, df, adjusted p, family, verdict,
previous rule, chains for the plan's power) and each family's chain count; seeds and losses the contrasts' table. The
plan is config/config.yaml's analysis: section.
"""

import argparse
from pathlib import Path

import yaml

from thai_grpo.core.io import read_json
from thai_grpo.evaluation.plan import analysis_plan
from thai_grpo_tools import rule_change as rc

REPO = Path(__file__).resolve().parents[1]

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("source", choices=["published", "study", "seeds", "losses"])
parser.add_argument("--reference", type=Path, default=REPO / "docs" / "reference", help="folder of the summaries")
parser.add_argument("--results", type=Path, help="the study's results.json (default: results/<study>/results.json)")
parser.add_argument("--config", type=Path, default=REPO / "config" / "config.yaml")
args = parser.parse_args()
plan = analysis_plan(yaml.safe_load(args.config.read_text(encoding="utf-8")))
folder = {"study": "chains", "seeds": "seeds", "losses": "losses"}.get(args.source)
results = read_json(args.results or REPO / "results" / folder / "results.json") if folder else None
if args.source in ("seeds", "losses"):
    tests = results["pairs"] if args.source == "seeds" else [t for ts in results["versus"].values() for t in ts]
    print(rc.contrast_table(tests))
    power = results.get("power") or {}
    if power.get("contrasts"):
        print(f"\n{power['seeds_needed'] or 'more held-out problems than any number of'} training seeds to detect "
              f"{100 * power['effect']:.1f} points at level {power['alpha']:.3g} ({power['target']:.0%} power); "
              f"{power['seeds']} now give {power['power_now']:.0%}")
else:
    rows = (rc.published_rows(read_json(args.reference / "chain_study.json"),
                              read_json(args.reference / "chain_study_main.json"), plan)
            if args.source == "published" else rc.study_rows(results))
    print(rc.markdown_table(rows))
    print()
    print(rc.needs_text(rc.family_needs(rows), plan["power"]["target"]))
