"""GRPO with code-graded rewards on Thai grade-school math: the logic behind the Snakemake pipeline.

One subpackage per stage, in the order the Snakefile runs them: ``data``, ``models`` (the base, its SFT adapter,
sampling), ``methods`` (GRPO, RLOO, DPO, PPO), ``evaluation`` and ``report``, over ``jobs`` (a job's devices, threads
and memory) and ``core`` (shared helpers). Imports only point down: report -> methods | evaluation -> models -> data |
jobs -> core (methods and evaluation never import each other); `lint-imports` checks it.
"""
