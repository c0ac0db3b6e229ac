"""L4 calibration: under the null (a correct device), a family's p-values are uniform and its false fails
stay within the family budget. ``specsim calibrate`` pools them over fresh suite seeds."""

from __future__ import annotations


def calibrated_p_values(results) -> list[float]:
    """The p-values that should be U(0,1) under the null: single asymptotic CR tests with >= 2 cells
    (``stats.gof_test``'s ``df`` in ``extra``; where a check names its ``test``, a Cressie-Read one).

    A one-cell test (p = 1 by construction), the DKWM bound (conservative
    by design) and a check reporting the smallest p of several tests (no
    ``df``) are not meant to be uniform.
    """
    return [r.p_value for r in results if r.p_value is not None and r.extra.get("df", 0) >= 1
            and "Cressie" in r.extra.get("test", "Cressie")]


def summary(results_by_seed: dict, alpha_family: float) -> dict:
    """KS of the pooled p-values against U(0,1), the fractions below 0.01..0.5, failing checks per seed."""
    import numpy as np
    from scipy import stats as st
    p = np.array([x for rs in results_by_seed.values() for x in calibrated_p_values(rs)])
    ks = st.kstest(p, "uniform")
    fails = {s: sum(r.status == "fail" for r in rs) for s, rs in results_by_seed.items()}
    return {"seeds": len(results_by_seed), "p_values": int(p.size), "ks_statistic": float(ks.statistic),
            "ks_p_value": float(ks.pvalue), "fraction_below": {str(a): float(np.mean(p <= a)) for a in (0.01, 0.05, 0.1, 0.5)},
            "failing_checks": int(sum(fails.values())), "seeds_with_a_failure": int(sum(f > 0 for f in fails.values())),
            "expected_seeds_with_a_failure_at_most": len(results_by_seed) * alpha_family,
            "smallest_p_per_seed": {str(s): float(min(calibrated_p_values(rs), default=1.0))
                                    for s, rs in results_by_seed.items()}}
