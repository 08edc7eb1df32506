"""Same certificate whichever executor runs the partitions; nothing lost or double-counted."""

from __future__ import annotations

import pytest

from tests.causal_nets import random_network
from verifier.causal import CausalSettings, build_problem, certify_causal_fairness
from verifier.executor import DaskExecutor, make_executor

SETTINGS = CausalSettings(max_unstable=6, timeout_s=600.0, target_width=0.02, chunk_size=8)
"""Every run ends at the target width (about 12 s on a 2-worker pool); the budget is only a
backstop, so that no executor's run is cut by the machine's load."""


def _run(executor) -> dict:
    network = random_network(4, [6, 6], seed=6)
    problem = build_problem(network, ["x3"], onehot_groups=[["x1", "x2"]], split_values=[0.5])
    try:
        certificate = certify_causal_fairness(problem, SETTINGS, executor)
    finally:
        executor.shutdown()
    details = certificate.details
    return {
        "verdict": certificate.verdict,
        "bounds": certificate.bounds["biased_share"],
        "fair": details["fair_fraction"],
        "excluded": details["excluded_fraction"],
        "witnessed": details["witnessed_fraction"],
        "refining": details["refining_fraction"],
        "counts": details["partition_counts"],
        "regions": details["regions"],
        "witnesses": details["witnesses"],
    }


def test_local_process_and_dask_agree() -> None:
    local = _run(make_executor("local"))
    process = _run(make_executor("process", workers=2))
    assert process == local
    try:
        dask = DaskExecutor(None, workers=2)
    except Exception as error:  # a cluster that cannot start here is an environment problem
        pytest.skip(f"no local dask cluster: {error}")
    assert _run(dask) == local
    low, high = local["bounds"]
    # the statuses tile the query: partitions a witnessed ancestor was still refining when the
    # target width was reached count as refining
    assert (local["fair"] + low + local["witnessed"] + local["refining"] + local["excluded"]
            == pytest.approx(1.0))
    assert high == pytest.approx(1.0 - local["fair"])
    assert local["counts"]["fair"] > 0 and local["verdict"] == "biased"


@pytest.mark.parametrize(("hidden", "expected"), [
    ([5, 5, 5, 5], 2048),      # Libra's German/COMPAS networks
    ([40] * 32, 256),          # Adult RQ4 1280
    ([80, 80], 2048),
    ([200, 200], 512),         # 327,680 / 400 = 819 -> 512
    ([4096], 256),             # never below the smallest chunk
])
def test_the_default_chunk_is_sized_to_the_network(hidden: list[int], expected: int) -> None:
    network = random_network(3, hidden, seed=0)
    assert CausalSettings().chunk_size_for(network) == expected
    assert CausalSettings(chunk_size=8).chunk_size_for(network) == 8


def test_the_certificate_records_the_chunk_size_used() -> None:
    network = random_network(3, [6, 6], seed=3)
    problem = build_problem(network, ["x2"], split_values=[0.5])
    certificate = certify_causal_fairness(
        problem, CausalSettings(max_unstable=6, timeout_s=30.0, target_width=0.1))
    assert certificate.settings["chunk_size"] == 2048
