"""How a property is decided: its run options (:func:`run_options`) and the one choice every
property makes between exact region enumeration, a finite sum over the prior's points and box
branching (:func:`decide`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from verifier.errors import CertgateInputError
from verifier.wmi import branched
from verifier.wmi.branched import Engine
from verifier.wmi.encode import WMIInputError
from verifier.wmi.engine import Query, WMIResult, solve
from verifier.wmi.properties.queries import deadline_passed
from verifier.wmi.terms import MAX_ROOTS, AllDiscrete, NotEnumerable

QueryBuilder = Callable[..., list[Query]]
"""A property's query builder with its arguments bound; it takes the keywords ``deadline``,
``max_roots`` and ``finite_sum`` (see :func:`decide`)."""


def run_options(stop_at: float | None, executor: Executor | None, bound_method: str,
                timeout_s: float | None, tolerance: float) -> Engine:
    """The run options (the deadline counted from now) of :func:`_solve` and of
    :func:`verifier.wmi.branching.branch`."""
    deadline = math.inf if timeout_s is None else time.perf_counter() + float(timeout_s)
    return {"stop_at": stop_at, "executor": executor, "bound_method": bound_method,
            "deadline": deadline, "tolerance": tolerance}


def decide(models: tuple[Any, ...], engine: Engine, build: QueryBuilder,
           branch: Callable[[], WMIResult], *, prove: bool = False) -> WMIResult:
    """The property's result by the method its prior and models admit.

    Region enumeration first: ``build`` lists the queries before the deadline, with at most
    :data:`~verifier.wmi.terms.MAX_ROOTS` roots when every model is a network (box branching
    can then take over), and they are solved in the time left. A prior whose columns are all
    discrete (:class:`~verifier.wmi.terms.AllDiscrete`) goes to ``branch`` when every model
    is a network, else to the finite sum over its points (``build`` again, with
    ``finite_sum``, no deadline and no root limit). Any other prior the enumeration cannot
    list (:class:`~verifier.wmi.terms.NotEnumerable`) goes to ``branch`` for networks and is
    refused otherwise. Every path states the same probability (:mod:`verifier.wmi.branched`).

    With ``prove``, a result the enumeration computed in float (never proven,
    :class:`~verifier.wmi.engine.WMIResult`) gets box branching's proven result as its
    ``proof`` when every model is a network, there is a threshold to decide (``stop_at``:
    branching stops once the share is proven on either side of it) and the deadline is
    finite and not passed: the enumeration then has half the time left
    (:func:`_enumeration_engine`) and the proof the rest (:func:`_proven`); an enumeration
    stopped there before it integrated anything (proven, but only as the bounds of the
    cells it decided) is replaced by box branching's result. Without a
    threshold PV would aim at its precision alone, which may take the whole budget.
    """
    try:
        queries = build(deadline=engine["deadline"], max_roots=root_limit(*models))
    except AllDiscrete:
        if branched.branchable(*models):
            return branch()
        return _finite_sum(build(finite_sum=True), engine)
    except NotEnumerable:
        if not branched.branchable(*models):
            raise
        return branch()
    proving = prove and branched.branchable(*models) and engine["stop_at"] is not None
    result = _solve(queries, _enumeration_engine(engine) if proving else engine)
    if proving and result.proven and result.timed_out and not deadline_passed(engine["deadline"]):
        return branch()
    if result.proven or not prove:
        return result
    if not branched.branchable(*models):
        result.extra["proof_skipped"] = "box branching proves networks only, not this model"
    elif engine["stop_at"] is None:
        result.extra["proof_skipped"] = "no minimum probability to prove against"
    else:
        return _proven(result, engine["deadline"], branch)
    return result


def _enumeration_engine(engine: Engine) -> Engine:
    """``engine`` with half its time left as the deadline of an enumeration whose float
    result is to be proven by box branching: the enumeration proves nothing, so it may not
    take the whole budget and leave the proof none (a default-fit population whose discrete
    columns fit under the root limit enumerates for minutes)."""
    deadline = engine["deadline"]
    if deadline == math.inf:
        return engine
    now = time.perf_counter()
    return {**engine, "deadline": now + max(0.0, deadline - now) / 2.0}


def _proven(result: WMIResult, deadline: float, branch: Callable[[], WMIResult]) -> WMIResult:
    """``result`` with box branching's proven result as its ``proof``, run in the time left
    before the finite ``deadline`` (none after it, nor without one: PV would then run to its
    precision however long that takes; ``extra["proof_skipped"]`` then says which); a prior
    branching refuses (``WMIInputError``, e.g. a lower normaliser of 0: no precision PV can
    aim at) leaves no proof and names the reason in ``extra["proof_refused"]``."""
    if deadline == math.inf:
        result.extra["proof_skipped"] = "no time budget to run box branching in"
        return result
    if deadline_passed(deadline):
        result.extra["proof_skipped"] = "the enumeration used the whole time budget"
        return result
    try:
        result.proof = branch()
    except CertgateInputError as error:
        result.extra["proof_refused"] = str(error)
    return result


def root_limit(*models: Any) -> int | None:
    """:data:`MAX_ROOTS` when box branching can take the audit over, else no limit."""
    return MAX_ROOTS if branched.branchable(*models) else None


def _solve(queries: list[Query], engine: Engine) -> WMIResult:
    """Solve the queries in the time left of the property's deadline (building the queries
    counted)."""
    deadline = engine["deadline"]
    if not queries and deadline_passed(deadline):
        return WMIResult(probability=0.0, violation_probability=1.0, total_mass=0.0,
                         violation_mass=0.0, regions=0, integrals=0, lps=0, elapsed_s=0.0,
                         probability_lower=0.0, probability_upper=1.0, exact=False,
                         timed_out=True, proven=True)
    if not queries:
        raise WMIInputError("the precondition has probability zero under the prior")
    timeout_s = None if deadline == math.inf else max(0.0, deadline - time.perf_counter())
    return solve(queries, engine["stop_at"], engine["executor"], timeout_s=timeout_s,
                 tolerance=engine["tolerance"])


def _finite_sum(queries: list[Query], engine: Engine) -> WMIResult:
    """The result over queries that all read fixed points."""
    result = _solve(queries, engine)
    result.extra["method"] = "finite sum over the prior's points"
    return result
