"""The audit-kind contract: what one kind's module declares so that every door can use it.

An audit kind is one module in :mod:`verifier.audits`, listed once in
:data:`verifier.audits.KIND_MODULES`. The doors (``certgate verify``, ``certgate run``, the
Python API, the MLflow evaluator) read these members and nothing else about a kind; no door
compares a kind's name. A new kind is a new module satisfying :class:`AuditKind` plus its line
in the registry (``tests/test_audit_kinds.py`` checks every registered module against this
contract and that no other module names a kind).

Members:

* ``KIND`` — the ``kind`` literal of its settings (the configuration's discriminator).
* ``SETTINGS`` — its pydantic settings (a :class:`~verifier.audits.requirement.StrictSettings`
  with ``kind``, ``name``, the property ``requirement`` and ``referenced_inputs()``). The
  configuration schema lists it; the command line builds the settings from one option per
  field (:mod:`pipeline_steps.cli.settings_options`: ``favorable_class`` is
  ``--favorable-class``). The options themselves are declared by the command line's verb,
  because ``certgate verify … --help`` answers without importing pydantic
  (``tests/test_cli_startup.py``); ``tests/test_front_doors.py`` checks every field has its
  option.
* ``PROGRESS`` — the unit of work its engine advances (:data:`ProgressUnit`); the progress
  display chooses its bar by this unit alone.
* ``run(settings, network, population, budget, progress, **engine) -> Certificate`` — the
  engine entry; ``engine`` holds engine-only options (PV tuning, an executor, a bound method).
* ``engine_options(executor, workers)`` — the engine options that spread *one* audit's work
  over the configured executor, or ``None`` when whole audits of this kind are what an
  executor runs in parallel.
* ``check(settings, network, population)`` — raise the input error ``run`` would meet, before
  it runs (``network`` may be ``None``: only the population is at hand).
* ``work_done(certificate) -> str`` — the report's one line on what the engine did, in its
  unit of work ("" when the certificate does not record it).
* ``EMPIRICAL_CHECK`` — its population-fidelity check (:mod:`verifier.audits.fidelity`:
  the audited quantity's empirical value on data rows), or the reason it has none.
* ``in_full(settings, population)`` (optional) — the settings with the inputs they name
  through the population written as its columns, read by
  :func:`verifier.audits.settings_in_full` before a door checks those names against the
  model's (causal fairness: a categorical feature named alone is its one-hot group); a kind
  without it names inputs as the model does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol, get_args, runtime_checkable

from verifier.certificate import Certificate

ProgressUnit = Literal["boxes", "partitions", "time"]
"""``boxes``: PV's anytime reports (boxes bounded, the current interval); ``partitions``: the
causal engine's chunks of partitions, counted on the executor it is given; ``time``: seconds of
the time budget (an engine that reports nothing until it ends)."""

EmpiricalCheck = Callable[..., dict[str, Any]]
"""``check(settings, certificate, network, population, data, options, assumptions)`` → the
fidelity record (:func:`verifier.audits.fidelity_check` calls it)."""


@runtime_checkable
class AuditKind(Protocol):
    """One audit kind's module (see the module docstring for each member's meaning)."""

    KIND: str
    SETTINGS: type[Any]
    PROGRESS: ProgressUnit
    EMPIRICAL_CHECK: EmpiricalCheck | str

    def run(self, settings: Any, network: Any, population: Any, budget: float | None = None,
            progress: Any = None, **engine: Any) -> Certificate: ...

    def engine_options(self, executor: str, workers: int | None) -> dict[str, Any] | None: ...

    def check(self, settings: Any, network: Any, population: Any) -> None: ...

    def work_done(self, certificate: Certificate) -> str: ...


def settings_kind(settings_type: type[Any]) -> str:
    """The ``kind`` literal a settings model declares (``Literal["x"]`` → ``"x"``)."""
    return get_args(settings_type.model_fields["kind"].annotation)[0]


def counted(value: Any, noun: str) -> str:
    """``1,234 boxes``, ``1 box``: a count with its noun (``noun`` singular; the plural adds
    ``es`` after ``x``, else ``s``)."""
    number = float(value)
    plural = noun + ("es" if noun.endswith("x") else "s")
    return f"{number:,.0f} {noun if number == 1 else plural}"


def elapsed_text(certificate: Certificate) -> str:
    """The certificate's elapsed time as ``1.23 s``."""
    return f"{float(certificate.cost.get('elapsed_s', 0.0)):.3g} s"


def stopped_text(certificate: Certificate) -> str:
    """``; stopped by: …`` when the certificate records why its engine stopped, else ``""``."""
    details = certificate.details
    return f"; stopped by: {details['stopped_by']}" if "stopped_by" in details else ""
