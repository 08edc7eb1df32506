"""High-level audits: a network, a population model and settings in, a certificate out.

These are the entry points the pipeline steps and the CLI call. Each checks that the
population model fits the network (column count, and names when both carry them) before any
work, runs PV, and returns a :class:`~verifier.certificate.Certificate` whose verdict is
proven or ``unknown``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from verifier.certificate import Certificate
from verifier.errors import CertgateInputError
from verifier.network import Network
from verifier.pv import PVProgress, PVSettings, population_domain, verify
from verifier.spec import Names, Specification, demographic_parity, specification_from_dict

Progress = Callable[[PVProgress], None]


def population_columns(population: Any) -> list[str] | None:
    """The population model's column names, when it has them."""
    columns = getattr(population, "columns", None)
    if callable(columns):
        columns = columns()
    if columns is None and hasattr(population, "column_names"):
        columns = population.column_names()
    return list(columns) if columns is not None else None


def check_population_fits(network: Network, population: Any) -> Names:
    """The names events may use; raises a clear error unless the population model's columns
    are the network's inputs, by name and in order. The network's names are never replaced
    by the population's (bind them first: :func:`verifier.audits.binding.bind`)."""
    dimension = int(population.dimension)
    if dimension != network.input_size:
        raise CertgateInputError(
            f"the population model has {dimension} columns but the network has "
            f"{network.input_size} inputs"
        )
    columns = population_columns(population)
    inputs = list(network.input_names)
    if columns is not None and columns != inputs:
        mismatch = next(i for i, (a, b) in enumerate(zip(columns, inputs, strict=True)) if a != b)
        raise CertgateInputError(
            f"population column {mismatch} is {columns[mismatch]!r} but network input "
            f"{mismatch} is {inputs[mismatch]!r}: the population model does not match the "
            "network's inputs (bind them by name first)"
        )
    return Names.of(inputs, network.output_names)


def run_specification(
    network: Network, population: Any, spec: Specification, settings: PVSettings,
    progress: Progress | None = None,
) -> Certificate:
    """PV on a ready specification; the certificate also records the settings."""
    masses, domain = population_domain(population)
    result = verify(network, spec, masses, domain, settings, progress)
    certificate = result.to_certificate()
    certificate.algorithm = (f"PV branch and bound (SelectProb selection, {settings.split} "
                             f"splitting, {settings.method} bounds)")
    certificate.settings = {
        "batch_size": settings.batch_size, "method": settings.method, "split": settings.split,
        "timeout_s": settings.timeout_s, "precision": settings.precision,
    }
    return certificate


def demographic_parity_audit(
    network: Network, population: Any, *, protected: str, privileged: float,
    favorable_class: int, gamma: float, qualified: str | None = None,
    form: Literal["ratio", "difference"] = "ratio", timeout_s: float | None = 60.0,
    precision: float | None = None, progress: Progress | None = None,
    settings: PVSettings | None = None,
) -> Certificate:
    """Certify demographic parity (or parity of qualified persons with ``qualified``).

    Ratio form: ``P[class = fav | protected ≠ privileged] / P[class = fav | protected =
    privileged] > gamma``; difference form: ``|difference| < gamma``. The certificate's
    ``bounds["value"]`` encloses the ratio (or difference), ``bounds["p_unprivileged"]`` and
    ``bounds["p_privileged"]`` the two conditional probabilities.
    """
    names = check_population_fits(network, population)
    if protected not in names.inputs:
        raise CertgateInputError(
            f"protected feature {protected!r} is not a column of the population model; "
            f"columns: {', '.join(names.inputs)}"
        )
    spec = demographic_parity(
        names, protected=protected, privileged=privileged, favorable_class=favorable_class,
        gamma=gamma, qualified=qualified, form=form,
    )
    _require_mass(population, names, protected, privileged)
    chosen = settings or PVSettings(timeout_s=timeout_s, precision=precision)
    certificate = run_specification(network, population, spec, chosen, progress)
    if form == "ratio":
        _mark_undefined_ratio(certificate, favorable_class)
    return certificate


def _mark_undefined_ratio(certificate: Certificate, favorable_class: int) -> None:
    """Say so when an undecided ratio is unbounded because its denominator may vanish: the
    certified interval of ``P[fav | privileged]`` reaches 0, where the ratio is undefined (the
    model may never predict the favourable class for the privileged group). Proven verdicts
    are left alone."""
    low, high = certificate.bounds["p_privileged"]
    if certificate.verdict != "unknown" or low > 0.0:
        return
    certificate.details["undefined"] = (
        f"the ratio may be undefined: P[class {favorable_class} | privileged] is certified in "
        f"[{low:.3g}, {high:.3g}], which includes 0 (the model may never predict class "
        f"{favorable_class} for the privileged group)"
    )


def probability_audit(
    network: Network, population: Any, specification: dict[str, Any], *,
    timeout_s: float | None = 60.0, precision: float | None = None,
    progress: Progress | None = None, settings: PVSettings | None = None,
) -> Certificate:
    """Certify a specification given in its dict form (see
    :func:`verifier.spec.specification_from_dict`)."""
    names = check_population_fits(network, population)
    spec = specification_from_dict(specification, names)
    chosen = settings or PVSettings(timeout_s=timeout_s, precision=precision)
    return run_specification(network, population, spec, chosen, progress)


def _require_mass(population: Any, names: Names, protected: str, privileged: float) -> None:
    """Both groups must have positive probability, or the ratio is undefined."""
    column = names.inputs.index(protected)
    lower, upper = population.support()
    lo, hi = lower.copy(), upper.copy()
    lo[column] = hi[column] = privileged
    mass = float(population.prob_boxes(lo[None, :], hi[None, :])[0])
    if mass <= 0.0:
        raise CertgateInputError(
            f"the population model gives {protected} = {privileged} probability 0: it does not "
            f"cover the privileged group"
        )
    if mass >= 1.0:
        raise CertgateInputError(
            f"the population model gives {protected} = {privileged} probability 1: it does not "
            f"cover any unprivileged group"
        )

