"""`make bench-sampling`: held-out sampling before and after the decode loop, timed on this CPU
(thai_grpo_tools.sampling_bench), printed and written to results/sampling_bench/bench.json.

    python tools/sampling_bench.py [--problems N] [--repeats R] [--threads T] [--max-new-tokens M]
                                     [--num-samples S] [--standins DIR] [--out FILE]

The stand-ins are built in DIR the first time (default results/sampling_bench/standins) and reused after.
"""

import argparse
import json
import os
from pathlib import Path

# OpenMP threads waiting for work sleep instead of spinning (as the test suite runs them): on a machine other jobs
# share, a spinning thread takes a core from them and the timings from both. Set before torch loads OpenMP.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from thai_grpo_tools.sampling_bench import measure  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--problems", type=int, default=16, help="held-out problems per run (default 16)")
parser.add_argument("--repeats", type=int, default=3, help="runs of each path, interleaved (default 3)")
parser.add_argument("--threads", type=int, default=1, help="torch threads, as a sampling job gets (default 1)")
parser.add_argument("--max-new-tokens", type=int, help="completion budget (default: the real config's)")
parser.add_argument("--num-samples", type=int, help="samples per problem (default: the real config's)")
parser.add_argument("--standins", type=Path, default=Path("results/sampling_bench/standins"))
parser.add_argument("--out", type=Path, default=Path("results/sampling_bench/bench.json"))
args = parser.parse_args()
settings = {key: value for key, value in (("max_new_tokens", args.max_new_tokens),
                                          ("num_samples", args.num_samples)) if value is not None}
result = measure(args.standins, args.problems, args.repeats, args.threads, settings)
args.out.parent.mkdir(parents=True, exist_ok=True)
args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
print(f"written to {args.out}")
