"""What the exact-probability (WMI, :mod:`verifier.wmi`) audit kinds share: the settings base,
the float allowance, the early-stop point and the one verdict rule.

The certificate's interval (``bounds["probability"]``) is only ever a proven one
(:func:`probability_interval`): the engine's interval when the result is ``proven`` (box
branching, PV's certified ends; a finite sum over the prior's points; a time-out before any
cell was integrated), else the interval box branching proved in the audit's time left after
the enumeration (the result's ``proof``: a network on any population the enumeration took),
else ``[0, 1]``. Region enumeration computes the probability in
float64 (Qhull's vertices, triangulation, simplex quadrature) with no bound on that error: a
cell whose mass lies within a few ulps of its coordinates (a narrow population far from 0, a
density spike at a decision boundary) is integrated with an error of any size, so the
computed value is reported beside the proof, not as one: ``details.computed_probability``,
``details.float_interval`` (the value widened by the engineering margin
``WMI_FLOAT_ALLOWANCE``, or the envelopes' interval so widened) and ``details.float_verdict``
(the requirement judged on that interval). The verdict, and so the gate, reads the proven
interval only: an engineering margin is not a proof.

The enumeration stops early once the violating mass alone shows, in float, ``P <
min_probability − a`` (``stop_at = 1 − min_probability + 2a``); the float interval is then
``[0, min(1, p + a)]``. The verdict is the requirement ``probability >= min_probability``
judged on the proven interval (:func:`verifier.audits.requirement.judged_verdict`) — for the
command line and the pipeline alike.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import ConfigDict, Field, field_validator

from verifier.audits.coded_values import split_thresholds_in_codes
from verifier.audits.kind import counted, elapsed_text, stopped_text
from verifier.audits.requirement import Requirement, StrictSettings, judged_verdict
from verifier.certificate import Certificate
from verifier.errors import CertgateInputError
from verifier.stop_request import stop_requested

WMI_FLOAT_ALLOWANCE = 1e-6
"""Engineering margin between the float64 WMI probability and the exact one, for the float
interval reported beside the proof (``details.float_interval``) and the early stop. Not a
bound: the float error of a cell's quadrature is unbounded (a narrow uniform at 1e6–1e7
misses by up to 6e-4), so no verdict reads it."""

PROGRESS = "time"
"""The exact-probability kinds' unit of progress: the region enumeration reports nothing
until it ends, so their bars count seconds of the time budget."""

WMI_ALGORITHM = ("exact weighted model integration: region enumeration with HiGHS LPs, "
                 "simplex quadrature")


class ProbabilitySettings(StrictSettings):
    """An exact-probability audit (weighted model integration, :mod:`verifier.wmi`) under the
    population model.

    The gate passes when the proven *lower* bound of the probability is at least
    ``min_probability`` (``probability >= min_probability``). Region enumeration computes the
    probability in float64 with no error bound, so its result is reported (with the
    engineering margin :data:`verifier.audits.exact_probability.WMI_FLOAT_ALLOWANCE` and the
    verdict it would give) but proves nothing: only box branching (also run after the
    enumeration, in the time left), a finite sum over the prior's points or a time-out
    before any cell give a proven interval (module docstring).
    ``timeout_s`` bounds the work (``null``: no limit); on time-out the interval reached is
    reported and judged by the same rule.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    min_probability: float
    timeout_s: float | None = Field(default=300.0, gt=0)

    @field_validator("min_probability")
    @classmethod
    def _probability_below_one(cls, value: float) -> float:
        if not 0.0 <= value < 1.0:
            raise ValueError(
                f"min_probability must lie in [0, 1), got {value} (a probability of exactly 1 "
                "cannot be certified from floating-point integration)"
            )
        return value

    def referenced_inputs(self) -> tuple[str, ...]:
        """Input names this audit reads (checked against the model before anything runs)."""
        return ()

    @property
    def requirement(self) -> Requirement:
        return requirement_at_least(self.min_probability)


def engine_options(executor: str, workers: int | None) -> None:
    """Whole exact-probability audits run on the configured executor."""
    return None


def work_done(certificate: Certificate) -> str:
    """Regions enumerated, integrals and LPs, when the certificate records them."""
    cost = certificate.cost
    if "regions" not in cost:
        return ""
    return (f"{counted(cost['regions'], 'region')} enumerated, "
            f"{counted(cost.get('integrals', 0), 'integral')}, "
            f"{counted(cost.get('lps', 0), 'LP')} ({elapsed_text(certificate)})"
            f"{stopped_text(certificate)}")


def requirement_at_least(min_probability: float) -> Requirement:
    """``probability >= min_probability``: the requirement of every exact-probability audit."""
    return Requirement(quantity="probability", label="probability", comparison=">=",
                       threshold=min_probability)


def wmi_stop_at(min_probability: float) -> float | None:
    """The violation share at which the enumeration may stop: ``1 − t + 2a`` (then
    ``P <= t − 2a`` up to float, so ``P + a < t``), or ``None`` when that is not below 1."""
    stop = 1.0 - min_probability + 2.0 * WMI_FLOAT_ALLOWANCE
    return stop if stop < 1.0 else None


def probability_interval(result: Any) -> tuple[float, float]:
    """The proven interval of a :class:`verifier.wmi.WMIResult`'s probability: the engine's
    when the result is ``proven``, else its ``proof``'s (box branching after a float
    enumeration), else ``[0, 1]`` (see the module docstring)."""
    proven = result if result.proven else result.proof
    if proven is None:
        return 0.0, 1.0
    return float(proven.probability_lower), float(proven.probability_upper)


def _proof_details(result: Any) -> dict[str, Any]:
    """What proved a float-computed result's interval (box branching's method, boxes, why it
    stopped and a precondition mass it could not bound away from 0), or why nothing did;
    empty for a proven result."""
    if result.proven:
        return {}
    if result.proof is None:
        return {"proven_by": None}
    proof = result.proof
    return {"proven_by": proof.extra["method"], "proof_boxes": proof.extra["boxes"],
            "proof_stopped_by": proof.extra["branching_stopped_by"],
            "proof_timed_out": bool(proof.timed_out),
            **{key: proof.extra[key] for key in ("precondition_mass",) if key in proof.extra}}


def undecided_because(result: Any) -> str | None:
    """Why the proven interval of a float-computed result is ``[0, 1]`` or box branching's
    unfinished one, in one sentence; ``None`` when the result is proven or its proof
    finished. It names what was not run (``proof_skipped``, ``proof_refused``) or ran out of
    time, and the cells whose mass even the float enumeration only bounded
    (``cells_bounded``: cells too thin for float64, which widen ``float_interval``)."""
    proof = result.proof
    if result.proven or (proof is not None and not proof.timed_out):
        return None
    reasons = ["region enumeration computes in float64, which proves no interval"]
    bounded = result.extra.get("cells_bounded", 0)
    if bounded:
        reasons.append(f"{counted(bounded, 'cell')} too thin for float64 (interior not proven "
                       "or not triangulated) only bounded, not integrated, which widens the "
                       "float interval too")
    if proof is not None:
        why = ("was interrupted" if proof.extra["branching_stopped_by"] == "interrupted"
               else "stopped at the time budget")
        reasons.append(f"box branching {why} after {counted(proof.extra['boxes'], 'box')}")
    elif "proof_refused" in result.extra:
        reasons.append(f"box branching refused the prior: {result.extra['proof_refused']}")
    elif "proof_skipped" in result.extra:
        reasons.append(f"box branching did not run: {result.extra['proof_skipped']}")
    return "; ".join(reasons)


def float_interval(result: Any) -> tuple[float, float]:
    """The float64 probability widened by :data:`WMI_FLOAT_ALLOWANCE` (an engineering margin,
    not a bound): ``[p − a, p + a]`` for a complete exact enumeration, ``[0, p + a]`` after
    an early stop (``p`` is then an upper end), else the engine's interval widened by ``a``
    on both sides."""
    if not result.exact:
        return (max(0.0, float(result.probability_lower) - WMI_FLOAT_ALLOWANCE),
                min(1.0, float(result.probability_upper) + WMI_FLOAT_ALLOWANCE))
    computed = float(result.probability)
    high = min(1.0, computed + WMI_FLOAT_ALLOWANCE)
    low = 0.0 if result.stopped_early else max(0.0, computed - WMI_FLOAT_ALLOWANCE)
    return low, high


def _stopped_by(result: Any) -> str:
    """Why the engine ended; a requested stop (:mod:`verifier.stop_request`, read while the
    command's signal handlers stand: certificates are built inside that block) ends the
    enumeration or its proof by box branching as their deadline does, and is named
    ``interrupted``."""
    proof = result.proof
    if (result.timed_out or (proof is not None and proof.timed_out)) and stop_requested():
        return "interrupted"
    if result.timed_out:
        return "timeout"
    if result.stopped_early:
        return "early stop: the threshold is decided"
    return "complete enumeration" if result.exact else "certified envelopes"


def probability_certificate(kind: str, requirement: Requirement, result: Any, expression: str,
                            stop_at: float | None, budget: float | None = None,
                            bound_method: str = "crown",
                            timeout_s: float | None = None) -> Certificate:
    """The certificate of a :class:`verifier.wmi.WMIResult` for an exact-probability audit:
    ``bounds["probability"]`` from :func:`probability_interval` (proven), verdict by
    :func:`~verifier.audits.requirement.judged_verdict` on it; the float value, its
    :func:`float_interval` and the verdict that interval would give in ``details``, with what
    proved the interval of a float result (:func:`_proof_details`); the cost counts the proof's
    time."""
    low, high = probability_interval(result)
    engineering = float_interval(result)
    computed = float(result.probability)
    return Certificate(
        audit=kind,
        verdict=judged_verdict(requirement, low, high),
        bounds={requirement.quantity: (low, high)},
        details={
            "expression": expression,
            "comparison": requirement.comparison,
            "threshold": requirement.threshold,
            "computed_probability": computed,
            "violation_probability": float(result.violation_probability),
            "stopped_early": bool(result.stopped_early),
            "stopped_by": _stopped_by(result),
            "exact": bool(result.exact),
            "timed_out": bool(result.timed_out),
            "proven": bool(result.proven),
            "float_interval": list(engineering),
            "float_verdict": judged_verdict(requirement, *engineering),
            "float_allowance": WMI_FLOAT_ALLOWANCE,
            **_proof_details(result),
            **result.extra,
            **({} if (why := undecided_because(result)) is None else {"undecided_because": why}),
        },
        settings={"stop_at": stop_at, "bound_method": bound_method, "budget_s": budget,
                  "timeout_s": timeout_s},
        cost={"elapsed_s": float(result.elapsed_s) + (0.0 if result.proof is None
                                                      else float(result.proof.elapsed_s)),
              "regions": float(result.regions),
              "integrals": float(result.integrals), "lps": float(result.lps)},
        algorithm=WMI_ALGORITHM,
    )


def model_inputs(model: Any, population: Any, input_names: list[str] | None) -> list[str]:
    """The input names of ``model`` (an IR network, or a scikit-learn model read in the
    population's column order with ``input_names``; read it through :func:`model_on_codes`)
    after checking the population model exists and its columns are these inputs.
    ``model`` ``None`` (a pre-flight before the model is fetched, its population already
    bound to the configured input names): the population's columns."""
    from verifier.audits.population_fit import check_population_fits
    from verifier.network import Network

    if population is None:
        raise CertgateInputError("this audit needs a population model")
    if model is None:
        return list(population.columns)
    if isinstance(model, Network):
        check_population_fits(model, population)
        return list(model.input_names)
    if input_names is None:
        raise CertgateInputError(
            f"a {type(model).__name__} records no input names here; pass input_names (the "
            "model's input order)"
        )
    names = list(input_names)
    if names != list(population.columns):
        raise CertgateInputError(
            f"the population model's columns ({', '.join(population.columns)}) are not the "
            f"model's inputs ({', '.join(names)}): bind them by name first"
        )
    return names


def model_on_codes(model: Any, population: Any) -> Any:
    """``model`` reading the population's codes at their values: a bound network already
    does (binding composes it with the input map), and so does ``None`` (no model yet); a
    scikit-learn tree or forest on a population that codes columns becomes the
    :class:`~verifier.wmi.trees.ForestModel` whose splits on a coded column are written in
    its codes (:func:`~verifier.audits.coded_values.split_thresholds_in_codes`), so each
    code goes where its value ``offset + step·k`` goes."""
    from verifier.network import Network

    schema = getattr(population, "feature_schema", None)
    if model is None or isinstance(model, Network) or schema is None or not schema.coded:
        return model
    from verifier.wmi.trees import ForestModel

    forest = model if isinstance(model, ForestModel) else ForestModel(model)
    step, offset = schema.column_codes()
    coded = copy.copy(forest)
    coded.trees = [{**tree, "threshold": split_thresholds_in_codes(
        tree["feature"], tree["threshold"], step, offset)} for tree in forest.trees]
    return coded


def input_position(names: list[str], field: str, name: str) -> int:
    """Position of the input ``name``; raises :class:`CertgateInputError` naming the field."""
    if name not in names:
        raise CertgateInputError(
            f"{field} {name!r} is not an input of the network (inputs: {', '.join(names)})"
        )
    return names.index(name)
