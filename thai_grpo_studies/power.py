"""How many chains (or training seeds) a comparison needs: the power of the crossed t test (``crossed``) from its
variance components.

With components s2_chain, s2_problem, s2_residual of a paired difference and C chains of P problems, the expected mean
squares are E[MS_chain] = s2_residual + P s2_chain, E[MS_problem] = s2_residual + C s2_problem, E[MS_residual] =
s2_residual, the variance of the mean difference V(C) = s2_chain / C + s2_problem / P + s2_residual / (C P), and its
Satterthwaite degrees of freedom nu(C) come from the expected mean squares (``crossed.satterthwaite_df``). The power
to detect a true difference delta in a two-sided test at level alpha is that of a noncentral t:

    power = P(|T'| > t_{1 - alpha/2, nu}),  T' ~ t(nu, noncentrality delta / sqrt(V(C))).

The problem term s2_problem / P does not shrink with more chains: when delta / sqrt(s2_problem / P) is too small, no
number of chains is enough and ``units_needed`` says so (None). A family corrected by Holm is sized at its first step,
alpha / m (Bonferroni's level: the hardest pair of the family must pass it when it has the smallest p). For the seed
and loss studies' contrasts (``many_to_one``) the variance is twice the pooled one (``contrast = 2``) and the level
alpha / k (Bonferroni over k contrasts, slightly conservative against Dunnett's).

From the published summaries (per-chain differences and one chain's paired interval over problems) the components are
bounded by ``components_from_summary``: the spread of the per-chain differences holds s2_chain + s2_residual / P, and
one chain's squared standard error over problems (s2_problem + s2_residual) / P; counting all of the latter as problem
variance (s2_residual = 0) is the conservative reading, since the problem term is the one more chains cannot shrink.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import stats

from thai_grpo_studies.crossed import satterthwaite_df

MOST_UNITS = 100  # units_needed looks no further (a study of more chains than this is not one this machine runs)


def expected_variance(components: dict, units: int, problems: int, contrast: float = 1.0) -> tuple[float, float]:
    """(V(units), nu(units)) of the mean difference from the components (module docstring); ``contrast`` multiplies
    the variance (2 for a pooled contrast of two methods)."""
    chain, problem, residual = (float(components[k]) for k in ("chain", "problem", "residual"))
    squares = [residual + problems * chain, residual + units * problem, residual]
    dfs = [units - 1, problems - 1, (units - 1) * (problems - 1)]
    variance = chain / units + problem / problems + residual / (units * problems)
    return contrast * variance, satterthwaite_df([1.0, 1.0, -1.0], squares, dfs)


def crossed_power(components: dict, units: int, problems: int, effect: float, alpha: float = 0.05,
                  contrast: float = 1.0) -> float:
    """Power of the two-sided crossed t test at level ``alpha`` for a true difference ``effect`` with ``units``
    chains (or seeds) of ``problems`` problems (module docstring)."""
    if units < 2:
        raise ValueError(f"a crossed test needs at least 2 chains or seeds, got {units}")
    variance, df = expected_variance(components, units, problems, contrast)
    if variance <= 0:
        return 1.0 if effect != 0 else alpha
    critical = stats.t.ppf(1 - alpha / 2, df)
    noncentrality = abs(effect) / math.sqrt(variance)
    power = stats.nct.sf(critical, df, noncentrality) + stats.nct.cdf(-critical, df, noncentrality)
    if not np.isfinite(power):  # scipy's noncentral t fails far in the tail (noncentrality ~ 8 and more): power ~ 1
        power = stats.norm.sf(critical - noncentrality) + stats.norm.cdf(-critical - noncentrality)
    return float(min(1.0, power))


def units_needed(components: dict, problems: int, effect: float, alpha: float = 0.05, target: float = 0.8,
                 contrast: float = 1.0, most: int = MOST_UNITS) -> int | None:
    """The fewest chains (seeds) >= 2 whose power reaches ``target``; None when even ``most`` do not (the problem
    term alone is too large for ``effect``: more held-out problems are needed, not more chains)."""
    for units in range(2, most + 1):
        if crossed_power(components, units, problems, effect, alpha, contrast) >= target:
            return units
    return None


def components_from_summary(per_chain: Sequence[float], problem_se: float, problems: int) -> dict:
    """Conservative components from published numbers (module docstring): s2_chain = the variance (ddof 1) of the
    per-chain differences, s2_problem = problems x problem_se^2 (one chain's standard error over its ``problems``
    problems), s2_residual = 0."""
    values = np.asarray(per_chain, dtype=float)
    if values.size < 2:
        raise ValueError(f"a between-chain variance needs at least 2 chains, got {values.size}")
    return {"chain": float(values.var(ddof=1)), "problem": problems * float(problem_se) ** 2, "residual": 0.0}


def family_alpha(family: str, size: int, alpha: float) -> float:
    """The level a pair of ``family`` is sized for in a power calculation: alpha for the primary, alpha / size for a
    Holm or Dunnett family (its first step: Bonferroni's level)."""
    return alpha if family == "primary" else alpha / max(size, 1)
