"""Many-to-one comparisons of training runs paired by seed: every method against one baseline (``grpo``), with the
variance pooled over the methods and Dunnett's simultaneous p-values.

Data: X[m, s, p], method m trained at seed s, scored on held-out problem p. Runs at the same training seed share their
sampling seed (``core.seeds.sampling_seed``), so seed is a block: a randomized-block layout (methods x seeds) with
problems crossed, and a seed's own effect (and its seed x problem effect) cancels from every contrast. Model, method
fixed, seed and problem random:

    X[m, s, p] = mu_m + beta_s + pi_p + (beta pi)_sp + g_ms + h_mp + e_msp,
    g ~ N(0, s2_seed) (method x seed), h ~ N(0, s2_problem) (method x problem), e ~ N(0, s2_residual).

Mean squares of the method x seed, method x problem and method x seed x problem interactions (degrees of freedom
(M-1)(S-1), (M-1)(P-1), (M-1)(S-1)(P-1)) have expectations s2_residual + P s2_seed, s2_residual + S s2_problem and
s2_residual. The contrast Xm.. - Xbaseline.. has variance 2 (s2_seed / S + s2_problem / P + s2_residual / (S P)),
the same combination of mean squares as the crossed analysis of two models (``crossed``: with M = 2 it is exactly
that analysis of the seeds x problems matrix of differences), here pooled over all M methods, with Satterthwaite's
degrees of freedom. With one value per run (P = 1: per-run means) it is the textbook randomized-block analysis:
the residual mean square of the two-way layout on (M-1)(S-1) degrees of freedom.

Dunnett (1955): the M - 1 contrasts share the baseline, so their t statistics are correlated, rho = 1/2 for equal
sizes; the single-step adjusted p of contrast j is P(max_i |T_i| >= |t_j|) with T multivariate t (``dunnett_p``), and
the simultaneous intervals use the critical value c with P(max_i |T_i| < c) = confidence (``dunnett_critical``).
scipy.stats.dunnett does the same for unpaired one-way samples; its multivariate-t CDF is randomized quasi-Monte
Carlo, so every call here takes a fixed seed.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, stats

from thai_grpo.evaluation.plan import SECONDARY, decide, holm_family
from thai_grpo.evaluation.scoring import tost
from thai_grpo_studies.crossed import mean_variance, t_test

MANY_TO_ONE = "many_to_one"  # the plan's family of the studies' contrasts against one baseline
MVT_SEED = 12345  # seed of the multivariate-t CDF's quasi-Monte Carlo points: the p-values are reproducible


def check_layout(matrices: dict[str, np.ndarray], baseline: str) -> np.ndarray:
    """The methods x seeds x problems array (``matrices`` order); ValueError naming the fix unless every method has
    the same seeds x problems shape, at least 2 seeds and the baseline is there."""
    if baseline not in matrices:
        raise ValueError(f"a many-to-one comparison needs the baseline {baseline!r}; got {sorted(matrices)}")
    if len(matrices) < 2:
        raise ValueError(f"a many-to-one comparison needs a method besides {baseline!r}")
    shapes = {name: np.atleast_2d(np.asarray(m, dtype=float)).shape for name, m in matrices.items()}
    if len(set(shapes.values())) != 1:
        raise ValueError(f"every method needs a run at each seed on the same held-out problems; shapes {shapes}")
    stack = np.stack([np.atleast_2d(np.asarray(m, dtype=float)) for m in matrices.values()])
    if not np.isfinite(stack).all():
        raise ValueError("the methods x seeds x problems layout has missing cells: rescore the runs with missing problems")
    if stack.shape[1] < 2:
        raise ValueError(f"a pooled seed variance needs at least 2 training seeds, got {stack.shape[1]}: list more in "
                         "seeds.training")
    return stack


def interaction_mean_squares(stack: np.ndarray) -> dict:
    """Mean squares of the method x seed, method x problem and method x seed x problem interactions of a methods x
    seeds x problems array, in the layout of ``crossed.crossed_mean_squares`` (chain -> seed) so that
    ``crossed.mean_variance`` combines them; with one problem only the method x seed term exists."""
    x = np.asarray(stack, dtype=float)
    methods, seeds, problems = x.shape
    grand = x.mean()
    m, s, p = x.mean(axis=(1, 2)), x.mean(axis=(0, 2)), x.mean(axis=(0, 1))
    ms_, mp, sp = x.mean(axis=2), x.mean(axis=1), x.mean(axis=0)
    g = ms_ - m[:, None] - s[None, :] + grand
    df = {"chain": (methods - 1) * (seeds - 1), "problem": (methods - 1) * (problems - 1),
          "residual": (methods - 1) * (seeds - 1) * (problems - 1)}
    out = {"chain": problems * float(np.sum(g ** 2)) / df["chain"], "df": df, "chains": seeds, "problems": problems,
           "methods": methods}
    if problems == 1:
        return {**out, "problem": 0.0, "residual": 0.0, "df": {**df, "problem": 1, "residual": 1}}
    h = mp - m[:, None] - p[None, :] + grand
    e = x - ms_[:, :, None] - mp[:, None, :] - sp[None, :, :] + m[:, None, None] + s[None, :, None] + p[None, None, :] \
        - grand
    return {**out, "problem": seeds * float(np.sum(h ** 2)) / df["problem"],
            "residual": float(np.sum(e ** 2)) / df["residual"]}


def contrast_variance(mean_squares: dict) -> tuple[float, float]:
    """(Var(Xm.. - Xb..), Satterthwaite degrees of freedom) of a contrast of two methods from the pooled mean squares:
    twice the crossed combination (module docstring); per-run means: 2 MS_method x seed / S on (M-1)(S-1)."""
    if mean_squares["problems"] == 1:
        return 2 * mean_squares["chain"] / mean_squares["chains"], float(mean_squares["df"]["chain"])
    variance, df = mean_variance(mean_squares)
    return 2 * float(variance), float(df)


def many_to_one_correlation(k: int) -> np.ndarray:
    """Correlation of k contrasts against one shared baseline, equal sizes and one pooled variance: 1/2 off the
    diagonal."""
    return np.full((k, k), 0.5) + 0.5 * np.eye(k)


def dunnett_p(t_values, df: float, correlation, seed: int = MVT_SEED) -> np.ndarray:
    """Single-step two-sided adjusted p of each t: P(max_i |T_i| >= |t_j|), T ~ multivariate t(df, correlation)
    (one contrast: Student's two-sided p)."""
    t = np.abs(np.atleast_1d(np.asarray(t_values, dtype=float)))
    correlation = np.atleast_2d(np.asarray(correlation, dtype=float))
    k = correlation.shape[0]
    if k == 1:
        return 2 * stats.t.sf(t, df)
    out = np.empty(t.size)
    for j, value in enumerate(t):
        if not np.isfinite(value):
            out[j] = 0.0
            continue
        mvt = stats.multivariate_t(shape=correlation, df=df, seed=np.random.default_rng(seed))
        out[j] = 1.0 - mvt.cdf(np.full(k, value), lower_limit=np.full(k, -value))
    # The exact value lies between one contrast's p and Bonferroni's k p; the CDF's quasi-Monte Carlo error (~1e-6)
    # can leave that range far in the tail, where 1 - CDF is all error.
    raw = 2 * stats.t.sf(t, df)
    return np.clip(out, raw, np.minimum(1.0, k * raw))


def dunnett_critical(df: float, correlation, confidence: float = 0.95, seed: int = MVT_SEED) -> float:
    """c with P(max_i |T_i| < c) = confidence (the simultaneous intervals' half-width in standard errors)."""
    correlation = np.atleast_2d(np.asarray(correlation, dtype=float))
    if correlation.shape[0] == 1:
        return float(stats.t.ppf(0.5 + confidence / 2, df))
    low = float(stats.t.ppf(0.5 + confidence / 2, df))  # one contrast: the smallest it can be
    high = float(stats.t.ppf(1 - (1 - confidence) / (2 * correlation.shape[0]), df))  # Bonferroni: the largest
    return float(optimize.brentq(lambda c: dunnett_p(c, df, correlation, seed)[0] - (1 - confidence), low * 0.999,
                                 high * 1.001, xtol=1e-4))


def many_to_one(matrices: dict[str, np.ndarray], baseline: str, confidence: float = 0.95,
                margin: float | None = None) -> list[dict]:
    """Every method of ``matrices`` (seeds x problems, same seeds in the same order, same problems) but ``baseline``
    against it: the contrast, its pooled standard error and degrees of freedom (``contrast_variance``), the raw t
    p, Dunnett's adjusted p and simultaneous ``confidence`` interval, and, given ``margin``, the TOST p of
    equivalence (unadjusted)."""
    stack = check_layout(matrices, baseline)
    names = list(matrices)
    ms = interaction_mean_squares(stack)
    variance, df = contrast_variance(ms)
    se = math.sqrt(variance)
    others = [name for name in names if name != baseline]
    correlation = many_to_one_correlation(len(others))
    means = stack.mean(axis=(1, 2))
    estimates = [float(means[names.index(name)] - means[names.index(baseline)]) for name in others]
    raw = [t_test(estimate, variance, df, confidence) for estimate in estimates]
    adjusted = dunnett_p([r["t"] for r in raw], df, correlation) if se > 0 else [r["p_value"] for r in raw]
    critical = dunnett_critical(df, correlation, confidence) if se > 0 else 0.0
    components = {"seed": max(0.0, (ms["chain"] - ms["residual"]) / ms["problems"]) if ms["problems"] > 1
                  else ms["chain"], "problem": max(0.0, (ms["problem"] - ms["residual"]) / ms["chains"]),
                  "residual": ms["residual"]}
    tests = []
    for name, estimate, r, p_adjusted in zip(others, estimates, raw, adjusted):
        tests.append({"a": name, "b": baseline, "mean_diff": estimate, "se": se, "df": df, "t": r["t"],
                      "p_value": r["p_value"], "p_adjusted": float(p_adjusted),
                      "ci_low": estimate - critical * se, "ci_high": estimate + critical * se,
                      "critical_value": critical, "components": components, "seeds": int(stack.shape[1]),
                      "problems": int(stack.shape[2]),
                      **({"tost_p": tost(estimate, se, df, margin), "margin": margin} if margin else {}),
                      "method": f"pooled many-to-one against {baseline} (seed as block, problems crossed), "
                                f"Dunnett over {len(others)} contrasts"})
    return tests


def apply_many_to_one(tests: list[dict], plan: dict, metric: str) -> list[dict]:
    """Many-to-one tests (``many_to_one``: Dunnett-adjusted ``p_adjusted``) with the plan applied: the
    confirmatory metric's contrasts are the family ``many_to_one``, another metric's are ``secondary``; TOST p
    Holm-adjusted over the contrasts; verdicts as ``decide``."""
    family = MANY_TO_ONE if metric == plan["metric"] else SECONDARY
    out = []
    for test, tost_p in zip(tests, holm_family(tests, "tost_p")):
        verdict = decide(test["mean_diff"], test["p_adjusted"], tost_p, True, plan["alpha"])
        out.append({**test, "metric": metric, "family": family, "family_size": len(tests), "p_holm": test["p_adjusted"],
                    "tost_p_holm": tost_p, "tested": True, "gate": None, "alpha": plan["alpha"],
                    "correction": f"Dunnett over {len(tests)} contrast{'s' if len(tests) != 1 else ''}",
                    "verdict": verdict, "supported": verdict in ("higher", "lower")})
    return out
