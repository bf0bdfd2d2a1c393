"""Before and after the change of decision rule, and how many chains each family of the plan needs
(thai_grpo.report.rule_change).

  published  from docs/reference/chain_study.json and main.json (a study summarised before the crossed analysis:
             approximated from per-chain values and the main chain's interval over problems)
  study      from a chain study's results/chains/results.json (exact: the crossed analysis it holds)

Both print the markdown table (pair, estimate, crossed interval, df, adjusted p, family, verdict, previous rule, chains
for the plan's power) and each family's chain count. The plan is config/config.yaml's analysis: section.
"""

import argparse
from pathlib import Path

import yaml

from thai_grpo.core.io import read_json
from thai_grpo.evaluation.plan import analysis_plan
from thai_grpo.report import rule_change as rc

REPO = Path(__file__).resolve().parents[1]

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("source", choices=["published", "study"])
parser.add_argument("--reference", type=Path, default=REPO / "docs" / "reference", help="folder of the summaries")
parser.add_argument("--results", type=Path, default=REPO / "results" / "chains" / "results.json")
parser.add_argument("--config", type=Path, default=REPO / "config" / "config.yaml")
args = parser.parse_args()
plan = analysis_plan(yaml.safe_load(args.config.read_text(encoding="utf-8")))
if args.source == "published":
    rows = rc.published_rows(read_json(args.reference / "chain_study.json"), read_json(args.reference / "main.json"),
                             plan)
else:
    rows = rc.study_rows(read_json(args.results))
print(rc.markdown_table(rows))
print()
print(rc.needs_text(rc.family_needs(rows), plan["power"]["target"]))
