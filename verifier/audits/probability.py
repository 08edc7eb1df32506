"""PV audits of a specification over probabilities (a YAML/JSON document, see
:func:`verifier.spec.specification_from_dict`), and the PV runner every PV audit shares."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from verifier.audits.coded_values import spec_in_codes
from verifier.audits.population_fit import check_population_fits
from verifier.certificate import Certificate
from verifier.spec import Specification, specification_from_dict

if TYPE_CHECKING:
    from verifier.network import Network
    from verifier.pv import PVProgress, PVSettings

Progress = Callable[["PVProgress"], None]


def run_specification(
    network: Network, population: Any, spec: Specification, settings: PVSettings,
    progress: Progress | None = None,
) -> Certificate:
    """PV on a ready specification (its events in the data's units, written in the
    population's codes by :func:`spec_in_codes`); the certificate also records the settings
    and names the split rule and bound method that ran. A network with a classifier head is
    read through :func:`spec_network`."""
    from verifier.pv import population_domain, verify

    spec = spec_in_codes(spec, population)
    masses, domain = population_domain(population)
    result = verify(spec_network(network, spec), spec, masses, domain, settings, progress,
                    getattr(population, "prob_excess_lower", None))
    certificate = result.to_certificate()
    certificate.settings = {
        "batch_size": settings.batch_size, "rounds_in_flight": settings.rounds_in_flight,
        "max_open_boxes": settings.max_open_boxes,
        "method": settings.method, "split": settings.split,
        "timeout_s": settings.timeout_s, "precision": settings.precision,
        "enumerate_points": settings.enumerate_points,
        "linear_credit": settings.linear_credit, "selection": settings.selection,
        "executor": settings.executor,
        "workers": settings.workers,
    }
    return certificate


def spec_network(network: Network, spec: Specification) -> Network:
    """The network whose outputs ``spec``'s events read.

    A specification written over the two classes of a single-output network (over the outputs
    of its :meth:`~verifier.network.Network.as_classifier` view, as demographic parity is) runs
    on that view. Otherwise, without a head: the network. With a classifier head, events that
    only order two outputs (``y.a > y.b``; every class event,
    :func:`verifier.spec.class_event`) hold exactly where they hold on the logits, since each
    head is strictly increasing in that order (real arithmetic): the logits are read, and PV
    bounds them. An event on output values (``y0 > 0.7``, ``y0 + x1 > 0``) would be changed by
    the head and is refused naming the head and the event.

    Raises:
        NetworkError: an event reads output values through a head.
        SpecError: the events read another number of outputs than the network has.
    """
    from verifier.network import head_error
    from verifier.spec import SpecError, atoms_of

    atoms = [(term, atom) for term in spec.probabilities.values()
             for event in (term.event, term.condition) if event is not None
             for atom in atoms_of(event)]
    arity = {len(atom.output_coeffs) for _, atom in atoms}
    if arity == {2} and network.output_size == 1:
        return network.as_classifier()
    if arity - {network.output_size}:
        raise SpecError(
            f"the specification's events read {sorted(arity)} outputs, the network has "
            f"{network.output_size}"
        )
    if network.head == "none":
        return network
    for term, atom in atoms:
        if atom.reads_outputs and not atom.orders_two_outputs:
            raise head_error(network.head, f"the event {term.describe()}")
    return network.logits()


def probability_audit(
    network: Network, population: Any, specification: dict[str, Any], *,
    timeout_s: float | None = 60.0, precision: float | None = None,
    progress: Progress | None = None, settings: PVSettings | None = None,
) -> Certificate:
    """Certify a specification given in its dict form (see
    :func:`verifier.spec.specification_from_dict`)."""
    from verifier.pv import PVSettings

    names = check_population_fits(network, population)
    spec = specification_from_dict(specification, names)
    chosen = settings or PVSettings(timeout_s=timeout_s, precision=precision)
    return run_specification(network, population, spec, chosen, progress)
