"""Evaluation: scoring the trained models on held-out problems, and the statistics behind each comparison.

pass@1, pass@k and paired tests with Holm's adjustment (``scoring``), the unbiased pass@k estimator (``passk``),
bootstrap intervals (``intervals``), the large-k study (``large_k``), between-seed intervals (``seed_stats``),
held-out sampling through vLLM (``vllm_sampling``) and per-token log-probabilities for the real KL
(``token_logprobs``). It may import ``models``, ``data`` and ``core``, never ``methods`` or ``report``.
"""
