"""Evaluation: held-out scores of the trained models and the statistics behind each comparison (the optional studies'
are in ``thai_grpo_studies``). May import ``models``, ``data`` and ``core`` only."""
