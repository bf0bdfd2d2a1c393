"""Evaluation: held-out scores of the trained models and the statistics behind each comparison: ``passk``,
``intervals``, ``scoring`` (scores, paired and TOST tests), ``plan`` (the declared analysis plan and its verdicts),
``narrowing`` (polish or create), ``vllm_sampling`` and ``token_logprobs`` (the real KL's raw material); the optional
studies' statistics are in ``thai_grpo_studies``. May import ``models``, ``data`` and ``core`` only."""
