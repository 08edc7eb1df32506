"""The checks ``population validate`` and ``population fit`` make of a written population
model file: schema, distributions, total mass 1, and the binding to a network by name."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from pipeline_steps.cli.inputs import read_network
from verifier.population import check_matches_network, load_population
from verifier.population.errors import PopulationError

MASS_TOLERANCE = 1e-9


def validated_file(path: str) -> tuple[Any, float]:
    """The population model in ``path`` and its total mass, after checking the schema, the
    distributions and that the total mass is 1 (within :data:`MASS_TOLERANCE`)."""
    model = load_population(path)
    total = float(model.prob_boxes(np.full(model.dimension, -np.inf),
                                   np.full(model.dimension, np.inf))[0])
    if abs(total - 1.0) > MASS_TOLERANCE:
        raise PopulationError(f"{path}: the total probability is {total!r}, not 1")
    return model, total


def check_binding(args: argparse.Namespace, model: Any) -> str:
    """Check ``model`` against ``--model`` by name (:mod:`verifier.audits.binding`); a network
    that records no input names and gets none can only be checked for its column count.
    Returns what was checked."""
    from verifier.audits.binding import (
        anonymous_inputs,
        bound_names,
        parse_input_names,
        unread_by_names,
    )

    network = read_network(args.model)
    given = parse_input_names(args.input_names)
    if given is None and anonymous_inputs(network):
        check_matches_network(model, network.input_size, None)
        return "column count matches (the network records no input names) of network"
    names = bound_names(network, given, f"--model {args.model}")
    unread = unread_by_names(model, names)
    check_matches_network(model, network.input_size + len(unread), [*names, *unread])
    return "matches network"
