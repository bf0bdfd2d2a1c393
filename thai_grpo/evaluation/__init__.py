"""Evaluation: scoring the trained models on held-out problems, and the statistics behind each comparison.

pass@1, pass@k and paired tests with TOST equivalence (``scoring``) under the declared analysis plan (``plan``: the
primary comparison, gated families, Holm, verdicts), the polish-or-create test (``narrowing``), the unbiased pass@k
estimator (``passk``), bootstrap intervals (``intervals``), held-out sampling through vLLM (``vllm_sampling``) and
per-token log-probabilities for the real KL (``token_logprobs``). The optional studies' statistics live in
``thai_grpo_studies``. It may import ``models``, ``data`` and ``core``, never ``methods`` or ``report``.
"""
