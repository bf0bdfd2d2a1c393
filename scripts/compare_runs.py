"""`make compare BEFORE=DIR`: two of your own runs, each model's held-out pass@1 before and after, the paired
difference with its interval, and the config keys that differ (thai_grpo_tools.compare_runs).

    cp -r results results-before     # keep a run, change a knob, run again, then:
    make compare BEFORE=results-before
"""

import argparse
import sys
from pathlib import Path

from thai_grpo.core.io import write_json
from thai_grpo_tools.compare_runs import RunMismatch, compare_runs, load_run, render_text


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
