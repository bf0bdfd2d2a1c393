"""The optional studies' statistics (seeds, chains, losses, reward hacking, pass@k at large k): what only the study
rules' scripts import. It may import ``thai_grpo``, never ``thai_grpo_tools``; the pipeline never imports it."""
