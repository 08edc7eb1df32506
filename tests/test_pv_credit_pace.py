"""Linear credit on the heaviest boxes only when it costs more than its share of the CPU
(:class:`verifier.pv.pace.CostPace`): the count it allows, and PV's intervals against exact
enumeration when it bites."""

from __future__ import annotations

import math

import pytest
from adult_engine import assert_reports_hold_the_exact_value, needs_census

from benchmarks.adult_instances import build_instance
from verifier.errors import CertgateInputError
from verifier.pv import PVSettings
from verifier.pv.pace import COST_DECAY, CostPace


def test_every_box_is_credited_before_a_measurement_or_with_the_whole_share() -> None:
    assert CostPace(0.5).allowed_count(100) == 100
    whole = CostPace(1.0)
    whole.observe(step_s=9.0, stepped=10, other_s=1.0, boxes=10)
    assert whole.allowed_count(100) == 100


@pytest.mark.parametrize("share", [0.25, 0.5, 0.75])
@pytest.mark.parametrize("ratio", [0.5, 2.0, 9.0, 100.0])
def test_the_count_keeps_the_credit_within_its_share_of_the_cpu(share: float,
                                                                  ratio: float) -> None:
    """Credit costing ``ratio`` times the rest per box: on ``n`` boxes, ``k`` credited ones
    cost ``k·ratio`` against ``n`` for the rest, a share of at most ``share`` (all boxes when
    even that stays within it), and at least one box keeps the credit."""
    pace = CostPace(share)
    pace.observe(step_s=ratio * 0.01 * 50, stepped=50, other_s=0.01 * 200, boxes=200)
    count = pace.allowed_count(1000)
    assert 1 <= count <= 1000
    if count < 1000:
        spent = count * ratio / (count * ratio + 1000)
        assert spent <= share + 1.0 / 1000
        assert (count + 1) * ratio / ((count + 1) * ratio + 1000) > share - 1.0 / 1000
    else:
        assert ratio / (ratio + 1.0) <= share


def test_recent_measurements_weigh_most() -> None:
    """Credit that grew cheap (smaller boxes, fewer population cells) is given to more boxes
    again within a few rounds."""
    pace = CostPace(0.5)
    pace.observe(step_s=100.0, stepped=100, other_s=10.0, boxes=100)
    costly = pace.allowed_count(1000)
    for _ in range(math.ceil(math.log(1e-3) / math.log(COST_DECAY))):
        pace.observe(step_s=1.0, stepped=100, other_s=10.0, boxes=100)
    assert costly < 200 and pace.allowed_count(1000) == 1000


@pytest.mark.parametrize("name", ["credit_cost_share", "crown_cost_share"])
def test_the_cost_shares_are_validated(name: str) -> None:
    """Both paced costs (the credit's and CROWN's tightening) take a share in (0, 1]."""
    for share in (0.0, -0.5, 1.5):
        with pytest.raises(CertgateInputError, match=name):
            PVSettings(**{name: share})


@needs_census
@pytest.mark.parametrize("k", [4, 6])
def test_capped_credit_keeps_the_exact_value_in_every_interval(
        k: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a share so small that the credit is cut to a few boxes per round, every interval
    PV reports (anytime and final) holds the exactly enumerated value, each report's intervals
    lie within the previous one's (the best ends seen are kept), and the cut happened."""
    allowed: list[tuple[int, int]] = []
    counted = CostPace.allowed_count

    def spy(self: CostPace, boxes: int) -> int:
        count = counted(self, boxes)
        allowed.append((boxes, count))
        return count

    monkeypatch.setattr(CostPace, "allowed_count", spy)
    instance = build_instance(k, (16,), 7, epochs=1, cache_dir=None)
    assert_reports_hold_the_exact_value(instance, PVSettings(
        timeout_s=30.0, max_boxes=3000, batch_size=128, credit_cost_share=0.02))
    assert any(count < boxes for boxes, count in allowed)
