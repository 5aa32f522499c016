"""The headline 'best fixed K' states one estimator: its point and its interval come from
the same geometric-mean row (a pooled S beside a geometric-mean CI mixed two)."""
from types import SimpleNamespace

from specproof.publish.numbers import best_fixed


def _row(config, k, gmean, lo, hi, policy="fixed", temperature=0.0, workload="all"):
    return {"pair": "t+d", "config": config, "k": k, "policy": policy, "temperature": temperature,
            "workload": workload, "gmean_speedup": gmean, "ci_low": lo, "ci_high": hi}


def test_best_fixed_k_reports_the_geometric_mean_whose_interval_it_prints():
    a = SimpleNamespace(speedups=[
        _row("K4", 4, 0.83, 0.80, 0.85), _row("K6", 6, 0.86, 0.82, 0.89),
        _row("K6", 6, 0.99, 0.90, 1.10, workload="code"),           # a workload row: not 'all'
        _row("K8-adaptive", 8, 1.20, 1.1, 1.3, policy="adaptive"),  # not a fixed K
        _row("K4-T1", 4, 1.50, 1.4, 1.6, temperature=1.0)])          # not greedy
    assert best_fixed(a) == {"t+d": {"k": 6, "speedup": 0.86, "ci_low": 0.82, "ci_high": 0.89, "config": "K6"}}
