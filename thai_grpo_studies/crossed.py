"""Chains and problems in one variance: a crossed random-effects analysis of a chains x problems matrix of paired
differences.

D[c, p] = value of model a minus value of model b on held-out problem p in chain c (both models of chain c, the same
problems in every chain). Model (balanced, crossed, one value per cell):

    D[c, p] = mu + a_c + b_p + e_cp,   a ~ N(0, s2_chain), b ~ N(0, s2_problem), e ~ N(0, s2_residual), independent.

Mean squares of the two-way layout without replication (C chains, P problems, Dc. / D.p / D.. the row, column and
grand means) and their expectations:

    MS_chain    = P sum_c (Dc. - D..)^2 / (C - 1)                     E = s2_residual + P s2_chain
    MS_problem  = C sum_p (D.p - D..)^2 / (P - 1)                     E = s2_residual + C s2_problem
    MS_residual = sum_cp (D_cp - Dc. - D.p + D..)^2 / ((C-1)(P-1))    E = s2_residual

Method of moments (ANOVA) components, each truncated at 0: s2_chain = (MS_chain - MS_residual) / P, s2_problem =
(MS_problem - MS_residual) / C, s2_residual = MS_residual. The variance of the mean difference,

    Var(D..) = s2_chain / C + s2_problem / P + s2_residual / (C P),

is with these estimates a combination sum_i k_i MS_i / (C P) of the mean squares: k = (1, 1, -1) when neither
component is truncated, (0, 1, 0) when s2_chain is, (1, 0, 0) when s2_problem is, (0, 0, 1) when both are (truncation
only ever raises the estimate). Its degrees of freedom are Satterthwaite's, and the test of mu = 0 is Student's t
on them. A t over the C chain means alone treats the problems as fixed (all chains share them: the problem term
s2_problem / P does not shrink with more chains); a bootstrap over chains and problems shrinks the chain term by
(C - 1) / C and has only C(2C - 1, C) distinct chain draws. This analysis counts both terms once.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

#: Cells of a difference matrix closer than this to each other count as equal (pass@1 moves in steps of 1 / (n P)).
CONSTANT_ATOL = 1e-12


def check_matrix(differences, unit: str = "chains", setting: str = "chains.seeds") -> np.ndarray:
    """The ``unit`` x problems matrix as floats; ValueError (one line, naming the fix) unless it is 2-D, complete and
    has at least 2 of each."""
    matrix = np.asarray(differences, dtype=float)
    if matrix.ndim != 2:
        raise ValueError(f"a crossed analysis needs a {unit} x problems matrix, got an array of shape {matrix.shape}")
    missing = int(np.count_nonzero(~np.isfinite(matrix)))
    if missing:
        raise ValueError(f"the {unit} x problems matrix has {missing} missing cell(s): every one of the {unit} must be "
                         "scored on every held-out problem; rescore the ones with missing problems")
    if matrix.shape[0] < 2:
        raise ValueError(f"a crossed analysis needs at least 2 {unit}, got {matrix.shape[0]}: list more in {setting}")
    if matrix.shape[1] < 2:
        raise ValueError(f"a crossed analysis needs at least 2 held-out problems, got {matrix.shape[1]}")
    return matrix


def crossed_mean_squares(differences) -> dict:
    """The three mean squares of the chains x problems layout and their degrees of freedom (module docstring).
    ``differences`` may stack matrices on leading axes (simulations): the mean squares are then arrays."""
    d = np.asarray(differences, dtype=float)
    check_matrix(d.reshape(-1, *d.shape[-2:])[0] if d.ndim > 2 else d)
    if d.ndim > 2 and not np.isfinite(d).all():
        raise ValueError("a stacked chains x problems array has missing cells: every cell must be finite")
    chains, problems = d.shape[-2:]
    grand, rows, columns = d.mean(axis=(-2, -1)), d.mean(axis=-1), d.mean(axis=-2)
    residual = d - rows[..., :, None] - columns[..., None, :] + grand[..., None, None]
    df = {"chain": chains - 1, "problem": problems - 1, "residual": (chains - 1) * (problems - 1)}
    return {"chain": problems * np.sum((rows - grand[..., None]) ** 2, axis=-1) / df["chain"],
            "problem": chains * np.sum((columns - grand[..., None]) ** 2, axis=-1) / df["problem"],
            "residual": np.sum(residual ** 2, axis=(-2, -1)) / df["residual"], "mean": grand, "df": df,
            "chains": chains, "problems": problems}


def crossed_components(mean_squares: dict) -> dict:
    """Method-of-moments variance components {chain, problem, residual}, each truncated at 0."""
    ms, chains, problems = mean_squares, mean_squares["chains"], mean_squares["problems"]
    return {"chain": np.maximum(0.0, (ms["chain"] - ms["residual"]) / problems),
            "problem": np.maximum(0.0, (ms["problem"] - ms["residual"]) / chains),
            "residual": np.maximum(0.0, ms["residual"])}


def variance_coefficients(mean_squares: dict) -> dict:
    """k_i of Var(D..) = sum_i k_i MS_i / (C P) with the truncated components (module docstring): 1 for a kept
    component's own mean square, -1 for the residual's when both are kept, 1 for it when neither is."""
    chain_kept = np.asarray(mean_squares["chain"] > mean_squares["residual"], dtype=float)
    problem_kept = np.asarray(mean_squares["problem"] > mean_squares["residual"], dtype=float)
    return {"chain": chain_kept, "problem": problem_kept,
            "residual": (1.0 - chain_kept) * (1.0 - problem_kept) - chain_kept * problem_kept}


def satterthwaite_df(coefficients, mean_squares, dfs):
    """Satterthwaite (1946): nu = (sum_i k_i MS_i)^2 / sum_i (k_i MS_i)^2 / df_i, the degrees of freedom of the
    chi-square that matches the first two moments of the combination; inf when it is 0 (nothing varies). The last
    axis of ``coefficients`` and ``mean_squares`` runs over the mean squares."""
    terms = np.asarray(coefficients, dtype=float) * np.asarray(mean_squares, dtype=float)
    denominator = np.sum(terms ** 2 / np.asarray(dfs, dtype=float), axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(denominator > 0, np.sum(terms, axis=-1) ** 2 / denominator, np.inf)
    return float(df) if np.ndim(df) == 0 else df


NAMES = ("chain", "problem", "residual")


def mean_variance(mean_squares: dict):
    """(Var(D..), its Satterthwaite degrees of freedom) from the mean squares (module docstring)."""
    k = variance_coefficients(mean_squares)
    cells = mean_squares["chains"] * mean_squares["problems"]
    coefficients = np.stack(np.broadcast_arrays(*(k[n] for n in NAMES)), axis=-1)
    squares = np.stack(np.broadcast_arrays(*(mean_squares[n] for n in NAMES)), axis=-1)
    variance = np.maximum(np.sum(coefficients * squares, axis=-1) / cells, 0.0)
    df = satterthwaite_df(coefficients, squares, [mean_squares["df"][n] for n in NAMES])
    return variance, df


def t_test(estimate, variance, df, confidence: float = 0.95) -> dict:
    """Two-sided Student's t test of estimate = 0 with its interval: t = estimate / sqrt(variance) on ``df``
    degrees of freedom; at variance 0, p = 1 for an estimate of 0 and 0 otherwise (the limit t -> inf). Arrays
    broadcast (one test per element)."""
    estimate, se = np.asarray(estimate, dtype=float), np.sqrt(np.asarray(variance, dtype=float))
    df = np.asarray(df, dtype=float)
    degenerate = se <= CONSTANT_ATOL
    safe = np.where(degenerate, 1.0, se)
    with np.errstate(invalid="ignore"):
        t = np.where(degenerate, np.where(np.abs(estimate) <= CONSTANT_ATOL, 0.0, np.sign(estimate) * np.inf),
                     estimate / safe)
    p = np.where(degenerate, np.where(np.abs(estimate) <= CONSTANT_ATOL, 1.0, 0.0), 2 * stats.t.sf(np.abs(t), df))
    half = np.where(degenerate, 0.0, stats.t.ppf(0.5 + confidence / 2, df) * se)
    out = {"mean_diff": estimate, "se": se, "df": df, "t": t, "p_value": p, "ci_low": estimate - half,
           "ci_high": estimate + half}
    return {key: float(value) for key, value in out.items()} if np.ndim(p) == 0 else out


def crossed_t_test(differences, confidence: float = 0.95) -> dict:
    """The crossed analysis of one chains x problems matrix of paired differences: the mean difference, its standard
    error from the three variance components, Satterthwaite's degrees of freedom, the t test's two-sided p and the
    ``confidence`` interval; with the mean squares and components it came from."""
    ms = crossed_mean_squares(check_matrix(differences))
    variance, df = mean_variance(ms)
    test = t_test(ms["mean"], variance, df, confidence)
    return {**test, "components": {n: float(v) for n, v in crossed_components(ms).items()},
            "mean_squares": {n: float(ms[n]) for n in NAMES}, "chains": ms["chains"], "problems": ms["problems"],
            "method": "crossed random effects (chain, problem), Satterthwaite t"}


def crossed_t_tests(stacked, confidence: float = 0.95) -> dict:
    """``crossed_t_test`` of every matrix of a stack (..., chains, problems), as arrays (simulations)."""
    ms = crossed_mean_squares(stacked)
    variance, df = mean_variance(ms)
    return t_test(ms["mean"], variance, df, confidence)
