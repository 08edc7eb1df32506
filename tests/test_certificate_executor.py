"""Certificates round-trip through JSON; every executor runs the same work the same way."""

from __future__ import annotations

import json
import math
import operator

import pytest

from verifier.certificate import Certificate
from verifier.errors import CertgateInputError
from verifier.executor import InProcessExecutor, make_executor


def test_certificate_round_trips_through_json_with_infinities() -> None:
    certificate = Certificate(
        audit="demographic_parity", verdict="satisfied",
        bounds={"value": (0.9, 1.1), "p": (0.0, math.inf)},
        details={"history": [[0.1, [0.5, math.inf]]]}, cost={"elapsed_s": 1.5, "boxes": 10},
    )
    text = certificate.to_json()
    assert "Infinity" not in text and "NaN" not in text
    again = Certificate.from_dict(json.loads(text))
    assert again.bounds == certificate.bounds
    assert again.details["history"] == [[0.1, [0.5, math.inf]]]
    assert again.proven and again.versions["certgate"]


def test_certificates_refuse_unproven_garbage() -> None:
    with pytest.raises(ValueError, match="verdict"):
        Certificate(audit="x", verdict="probably")
    with pytest.raises(ValueError, match="not an interval"):
        Certificate(audit="x", verdict="unknown", bounds={"p": (0.6, 0.4)})
    with pytest.raises(ValueError, match="not an interval"):
        Certificate(audit="x", verdict="unknown", bounds={"p": (math.nan, 0.4)})


@pytest.mark.parametrize("spec", ["local", "process"])
def test_executors_give_the_same_results(spec: str) -> None:
    executor = make_executor(spec, workers=2)
    try:
        results = list(executor.map(operator.mul, range(20), range(20)))
        assert results == [i * i for i in range(20)]
        failing = executor.submit(operator.truediv, 1, 0)
        with pytest.raises(ZeroDivisionError):
            failing.result()
    finally:
        executor.shutdown()


def test_in_process_executor_refuses_work_after_shutdown() -> None:
    executor = InProcessExecutor()
    executor.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        executor.submit(operator.add, 1, 2)


def test_unknown_executor_is_a_clear_error() -> None:
    with pytest.raises(CertgateInputError, match="local, process, dask"):
        make_executor("spark")
