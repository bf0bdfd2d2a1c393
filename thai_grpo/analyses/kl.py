"""Per-token KL estimators (Schulman, "Approximating KL divergence") and the k1-vs-k3 study on real tokens.

For y ~ pi, d = log pi_ref(y) - log pi(y), x = exp(d):  k1 = -d (can be < 0),  k3 = (x - 1) - log x = expm1(d) - d
(>= 0, lower variance when close); both unbiased: E_{y~pi}[k] = KL(pi || pi_ref). k3 is GRPO's (``core.references.k3``).
"""

from __future__ import annotations

import numpy as np
from scipy.special import rel_entr

from thai_grpo.core.references import k3 as k3_of_tensors


def k1(logp_policy: np.ndarray, logp_ref: np.ndarray) -> np.ndarray:
    """k1 = log pi(y) - log pi_ref(y), elementwise."""
    return np.asarray(logp_policy, dtype=float) - np.asarray(logp_ref, dtype=float)


def k3(logp_policy: np.ndarray, logp_ref: np.ndarray) -> np.ndarray:
    """k3 = (x - 1) - log x with x = exp(logp_ref - logp_policy) (``core.references.k3``), clipped at 0."""
    return np.maximum(k3_of_tensors(logp_policy, logp_ref), 0.0)


def running_mean(values: np.ndarray) -> np.ndarray:
    """Cumulative mean: m_t = (1/t) sum_{s<=t} v_s, t = 1..n."""
    values = np.asarray(values, dtype=float)
    return np.cumsum(values) / np.arange(1, values.size + 1)


def true_kl(p: np.ndarray, q: np.ndarray) -> float:
    """KL(p || q) = sum_{y: p(y) > 0} p(y) log(p(y) / q(y)) for categorical distributions."""
    return float(np.sum(rel_entr(np.asarray(p, dtype=float), np.asarray(q, dtype=float))))


def sample_kl_estimates(p: np.ndarray, q: np.ndarray, n: int, rng: np.random.Generator) -> dict:
    """Draw n tokens y ~ p; return {"tokens", "k1", "k3" (arrays of length n), "true_kl"} for KL(p || q)."""
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    tokens = rng.choice(p.size, size=n, p=p)
    logp, logq = np.log(p[tokens]), np.log(q[tokens])
    return {"tokens": tokens, "k1": k1(logp, logq), "k3": k3(logp, logq), "true_kl": true_kl(p, q)}


# Decades of the exact per-position KL that bin the real tokens (the first and last bins are open-ended).
REGIME_EDGES = (0.0, 1e-3, 1e-2, 1e-1, 1.0, np.inf)


def cluster_bootstrap_draws(columns: dict[str, np.ndarray], lengths: list[int], clusters: list, n_boot: int = 10_000,
                            seed: int = 0, batch: int = 1000) -> dict[str, np.ndarray]:
    """Bootstrap draws of each column's token mean, resampling whole clusters (one label per completion, its problem):
    sum_c r_b(c) S_c / sum_c r_b(c) N_c. All columns share the resamples (paired intervals for differences)."""
    lengths = np.asarray(lengths, dtype=int)
    if lengths.size < 2 or np.any(lengths < 1):
        raise ValueError(f"a bootstrap over completions needs >= 2 non-empty completions, got lengths {lengths[:5]}")
    if len(clusters) != lengths.size:
        raise ValueError(f"{len(clusters)} cluster labels for {lengths.size} completions: give one label per "
                         "completion (its problem id)")
    labels, cluster_of = np.unique(np.asarray(clusters), return_inverse=True)
    if labels.size < 2:
        raise ValueError("a bootstrap over problems needs >= 2 problems, got 1")
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    tokens = np.bincount(cluster_of, weights=lengths, minlength=labels.size)
    sums = {name: np.bincount(cluster_of, weights=np.add.reduceat(np.asarray(values, dtype=float), starts),
                              minlength=labels.size) for name, values in columns.items()}
    rng = np.random.default_rng(seed)
    draws = {name: [] for name in columns}
    for done in range(0, n_boot, batch):
        index = rng.integers(0, labels.size, size=(min(batch, n_boot - done), labels.size))
        drawn_tokens = tokens[index].sum(axis=1)
        for name, per_cluster in sums.items():
            draws[name].append(per_cluster[index].sum(axis=1) / drawn_tokens)
    return {name: np.concatenate(parts) for name, parts in draws.items()}


def cluster_bootstrap_means(columns: dict[str, np.ndarray], lengths: list[int], clusters: list, n_boot: int = 10_000,
                            seed: int = 0, confidence: float = 0.95, batch: int = 1000) -> dict[str, dict]:
    """Each column's token mean with a percentile bootstrap interval over clusters: {name: {mean, low, high, se}}."""
    draws = cluster_bootstrap_draws(columns, lengths, clusters, n_boot, seed, batch)
    alpha = (1 - confidence) / 2
    result = {}
    for name, values in columns.items():
        low, high = np.quantile(draws[name], [alpha, 1 - alpha])
        result[name] = {"mean": float(np.mean(values)), "low": float(low), "high": float(high),
                        "se": float(draws[name].std(ddof=1))}
    return result


def divergence_regimes(kl_exact, var_k1, var_k3, err_k1, err_k3, edges=REGIME_EDGES) -> list[dict]:
    """The real tokens binned by the exact KL at their position; per bin each estimator's root mean exact variance,
    root mean squared observed error, and the ``winner`` (smaller variance)."""
    kl_exact, var_k1, var_k3 = (np.asarray(v, dtype=float) for v in (kl_exact, var_k1, var_k3))
    err_k1, err_k3 = np.asarray(err_k1, dtype=float), np.asarray(err_k3, dtype=float)
    bins = []
    for low, high in zip(edges[:-1], edges[1:]):
        inside = (kl_exact >= low) & (kl_exact < high)
        if not inside.any():
            continue
        sd1, sd3 = float(np.sqrt(var_k1[inside].mean())), float(np.sqrt(var_k3[inside].mean()))
        bins.append({"low": float(low), "high": float(high), "tokens": int(inside.sum()),
                     "mean_kl": float(kl_exact[inside].mean()), "sd_k1": sd1, "sd_k3": sd3,
                     "rmse_k1": float(np.sqrt(np.mean(err_k1[inside] ** 2))),
                     "rmse_k3": float(np.sqrt(np.mean(err_k3[inside] ** 2))),
                     "winner": "k3" if sd3 < sd1 else "k1"})
    return bins


def real_kl_summary(kl_real: dict, n_boot: int = 10_000, seed: int = 0) -> dict:
    """k1 vs k3 on the run's own tokens: means with intervals over problems, exact standard errors
    (sqrt(sum of per-position variances) / tokens), the regimes and the token with the largest share of the k3 sum."""
    logp, logq = np.asarray(kl_real["logp_policy"], float), np.asarray(kl_real["logp_ref"], float)
    exact = np.asarray(kl_real["kl_exact"], float)
    e1, e3 = k1(logp, logq), k3(logp, logq)
    means = cluster_bootstrap_means({"exact": exact, "k1": e1, "k3": e3, "k1_minus_exact": e1 - exact,
                                     "k3_minus_exact": e3 - exact}, kl_real["completion_lengths"],
                                    kl_real["completion_problems"], n_boot, seed)
    var1, var3 = np.asarray(kl_real["var_k1"], float), np.asarray(kl_real["var_k3"], float)
    top, k3_sum = int(np.argmax(e3)), float(e3.sum())
    return {"tokens": int(exact.size), "completions": len(kl_real["completion_lengths"]),
            "problems": len(set(kl_real["completion_problems"])), "interval_unit": "problems", "means": means,
            "exact_se": {"k1": float(np.sqrt(var1.sum()) / exact.size), "k3": float(np.sqrt(var3.sum()) / exact.size)},
            "share_k3_lower_variance": float(np.mean(var3 < var1)),
            "regimes": divergence_regimes(exact, var1, var3, e1 - exact, e3 - exact),
            "largest_k3": {"index": top, "k3": float(e3[top]),
                           "share_of_k3_sum": float(e3[top]) / k3_sum if k3_sum > 0 else 0.0,
                           "logp_policy": float(logp[top]), "logp_ref": float(logq[top]),
                           "kl_exact": float(exact[top])}}
