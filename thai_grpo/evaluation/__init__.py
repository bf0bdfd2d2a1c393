"""Evaluation: scoring the trained models on held-out problems, and the statistics behind each comparison.

pass@1, pass@k and paired tests (``scoring``) under the declared analysis plan (``plan``: the primary comparison,
gated families, Holm, verdicts), the crossed chains x problems analysis (``crossed``), the pooled many-to-one design
with Dunnett and TOST (``many_to_one``), power and chain counts (``power``), the polish-or-create test
(``narrowing``), the unbiased pass@k estimator (``passk``), bootstrap intervals (``intervals``), the large-k study
(``large_k``), the seed, loss and chain studies (``seed_stats``, ``loss_stats``, ``chain_stats``),
held-out sampling through vLLM (``vllm_sampling``) and per-token log-probabilities for the real KL
(``token_logprobs``). It may import ``models``, ``data`` and ``core``, never ``methods`` or ``report``.
"""
