"""Every convergence chart draws something: the chart of a run whose only report is its
final interval (a causal audit after 20 s), of an undecided audit with a half-unbounded and
with an unbounded interval, and of a full history. Drawn data is recognised in the rendered
PNG by the bound colours, which nothing else on the chart uses; the same chart type with the
data's colours absent (a blank figure of the same size) is the negative control."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.image import imread

from pipeline_steps.report import (
    LOWER_COLOUR,
    UPPER_COLOUR,
    convergence_figure,
    figure_png,
)
from tests.test_pipeline_report import sample_certificate
from verifier.audits import CausalFairnessSettings, DemographicParitySettings
from verifier.certificate import Certificate

DP = DemographicParitySettings(kind="demographic_parity", protected="sex", privileged=1,
                            favorable_class=1, gamma=0.8)
CAUSAL = CausalFairnessSettings(kind="causal_fairness", protected=["s"], max_biased_share=0.05)


def rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


def pixels(png: bytes, colour: str) -> int:
    image = np.rint(imread(io.BytesIO(png))[..., :3] * 255).astype(np.int16)
    return int(np.all(image == np.array(rgb(colour), dtype=np.int16), axis=-1).sum())


def certificate(bounds: tuple[float, float], history: list | None, verdict: str,
                elapsed: float, quantity: str = "value") -> Certificate:
    details = {} if history is None else {"history": history}
    return Certificate(audit="a", verdict=verdict, bounds={quantity: bounds}, details=details,
                       cost={"elapsed_s": elapsed})


CASES = {
    "final interval only, after 20 s": (CAUSAL, certificate(
        (0.01, 0.03), None, "satisfied", 20.0, CAUSAL.requirement.quantity)),
    "undecided, upper side unbounded": (DP, certificate((0.7, math.inf), None, "unknown", 3.0)),
    "undecided, no finite bound": (DP, certificate((-math.inf, math.inf),
                                                   [[1.0, [-math.inf, math.inf]]], "unknown",
                                                   2.0)),
    "full history": (DP, sample_certificate()),
}


@pytest.mark.parametrize("case", CASES)
def test_chart_draws_bounds(case: str) -> None:
    settings, cert = CASES[case]
    figure = convergence_figure("a", settings.requirement, cert)
    png = figure_png(figure)
    # The legend alone holds about 50 pixels of each colour (the old charts of the first
    # three cases drew nothing more: 50-52 of each); drawn bounds add far more.
    assert pixels(png, UPPER_COLOUR) > 200, "upper bound / final interval not drawn"
    assert pixels(png, LOWER_COLOUR) > 80, "lower bound (or its unbounded marker) not drawn"
    assert figure.axes[0].get_xlim()[0] == 0.0


def test_negative_control_blank_chart_has_none_of_the_colours() -> None:
    figure = Figure(figsize=(6.4, 3.6), dpi=100)
    figure.add_subplot().set_title("a")
    png = figure_png(figure)
    assert pixels(png, UPPER_COLOUR) == 0 and pixels(png, LOWER_COLOUR) == 0
