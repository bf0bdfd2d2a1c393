"""Per-token KL estimators from log-probabilities (Schulman, "Approximating KL divergence").

For a token y ~ pi (policy) and reference pi_ref, with log-ratio
d = log pi_ref(y) - log pi(y) and x = exp(d) = pi_ref(y) / pi(y):

    k1 = -d = log pi(y) - log pi_ref(y)       unbiased for KL(pi || pi_ref), can be < 0
    k3 = (x - 1) - log x = expm1(d) - d       unbiased, always >= 0, lower variance when close

Both satisfy E_{y~pi}[k] = KL(pi || pi_ref) = sum_y pi(y) log(pi(y) / pi_ref(y)).
"""

from __future__ import annotations

import numpy as np


def k1(logp_policy: np.ndarray, logp_ref: np.ndarray) -> np.ndarray:
    """k1 = log pi(y) - log pi_ref(y), elementwise."""
    return np.asarray(logp_policy, dtype=float) - np.asarray(logp_ref, dtype=float)


def k3(logp_policy: np.ndarray, logp_ref: np.ndarray) -> np.ndarray:
    """k3 = (x - 1) - log x with x = exp(logp_ref - logp_policy), elementwise.

    Computed as expm1(d) - d (accurate for small d) and clipped at 0, since
    x - 1 - log x >= 0 holds exactly and only rounding could break it.
    """
    d = np.asarray(logp_ref, dtype=float) - np.asarray(logp_policy, dtype=float)
    return np.maximum(np.expm1(d) - d, 0.0)


def running_mean(values: np.ndarray) -> np.ndarray:
    """Cumulative mean: m_t = (1/t) sum_{s<=t} v_s, t = 1..n."""
    values = np.asarray(values, dtype=float)
    return np.cumsum(values) / np.arange(1, values.size + 1)


def true_kl(p: np.ndarray, q: np.ndarray) -> float:
    """KL(p || q) = sum_{y: p(y) > 0} p(y) log(p(y) / q(y)) for categorical distributions."""
    p = np.asarray(p, dtype=float)
    q = np.asarray(q, dtype=float)
    support = p > 0
    return float(np.sum(p[support] * (np.log(p[support]) - np.log(q[support]))))


def sample_kl_estimates(
    p: np.ndarray, q: np.ndarray, n: int, rng: np.random.Generator
) -> dict[str, np.ndarray | float]:
    """Draw n tokens y ~ p and return per-sample estimators of KL(p || q).

    Returns {"tokens", "k1", "k3", "true_kl"}: k1 and k3 are arrays of length n
    computed from log p(y) (policy) and log q(y) (reference).
    """
    p = np.asarray(p, dtype=float)
    q = np.asarray(q, dtype=float)
    tokens = rng.choice(p.size, size=n, p=p)
    logp, logq = np.log(p[tokens]), np.log(q[tokens])
    return {"tokens": tokens, "k1": k1(logp, logq), "k3": k3(logp, logq), "true_kl": true_kl(p, q)}
