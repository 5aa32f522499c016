"""The simulated coverage of the whole 'best K' procedure (choose on discovery prompts,
report on reserved ones): deterministic, and it grows with the reserved prompts."""
from specproof.analysis.statistics import simulated_selection_coverage


def test_selection_coverage_is_deterministic_in_its_seed():
    assert simulated_selection_coverage(6, 8, 3, 60, seed=3) == simulated_selection_coverage(6, 8, 3, 60, seed=3)


def test_two_reserved_prompts_cannot_carry_a_95_percent_interval_and_thirty_two_nearly_can():
    few = simulated_selection_coverage(4, 2, 3, 200, seed=13)
    many = simulated_selection_coverage(10, 32, 6, 200, seed=13)
    assert few < 0.7 < 0.88 < many
