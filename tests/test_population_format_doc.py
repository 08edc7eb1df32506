"""docs/population-format.md: every JSON example is a valid population model of total mass
1, and the examples cover every distribution kind the format has."""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path

import numpy as np
import pytest

from verifier.population import PopulationModel
from verifier.population.union import AnyDistribution

DOC = Path(__file__).resolve().parents[1] / "docs" / "population-format.md"
EXAMPLES = re.findall(r"```json\n(.*?)```", DOC.read_text(), flags=re.DOTALL)




@pytest.mark.parametrize("text", EXAMPLES)
def test_example_is_a_valid_model(text: str) -> None:
    model = PopulationModel.model_validate(json.loads(text))
    everything = model.prob_boxes(np.full(model.dimension, -np.inf),
                                  np.full(model.dimension, np.inf))[0]
    assert everything == pytest.approx(1.0, abs=1e-12)


def test_examples_cover_every_distribution_kind() -> None:
    union = typing.get_args(AnyDistribution)[0]
    every = {member.model_fields["kind"].default for member in typing.get_args(union)}
    shown = {json.loads(text)["distribution"]["kind"] for text in EXAMPLES}
    for text in EXAMPLES:
        for factor in json.loads(text)["distribution"].get("factors", []):
            shown.add(factor["distribution"]["kind"])
    assert shown == every
