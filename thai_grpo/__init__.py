"""GRPO with code-graded rewards on Thai grade-school math: the logic behind the Snakemake pipeline.

One subpackage per stage of the pipeline, in the order the Snakefile runs them: ``data`` (problems, prompts,
training texts), ``models`` (the base, its SFT adapter, sampling), ``methods`` (GRPO, RLOO, DPO, PPO),
``evaluation`` (held-out scores and their statistics) and ``report`` (results.json, figures, the HTML pages), over
``jobs`` (the machinery of a job: devices, threads, memory, its start and end) and ``core``, the helpers they all
share. Imports only point down: report -> methods | evaluation -> models -> data | jobs -> core (methods and
evaluation never import each other); `lint-imports` checks it and that there are no circles.
"""
