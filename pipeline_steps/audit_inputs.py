"""The check every audit configuration passes before it runs: the inputs it names exist and
the audit can run on the bound model and population; a deploy step's constraint file reads
as a constraint set on the model's inputs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verifier.errors import CertgateInputError, did_you_mean


def check_audits(audits: list[Any], network: Any, population: Any, names: list[str],
                 what: tuple[str, str]) -> None:
    """Every audit's referenced inputs are among ``names`` (``what``: how one / several
    missing names are described, e.g. ``("an input of the model", "inputs of the model")``)
    and the audit can run on ``network`` and ``population``
    (:func:`verifier.audits.check_audit`); the first failure is a :class:`CertgateInputError`
    naming the audit."""
    from verifier.audits import check_audit, settings_in_full

    for settings in audits:
        settings = settings_in_full(settings, population)
        missing = [name for name in settings.referenced_inputs() if name not in names]
        if missing:
            raise CertgateInputError(
                f"audit {settings.name!r}: {', '.join(map(repr, missing))} "
                f"{'is not ' + what[0] if len(missing) == 1 else 'are not ' + what[1]}"
                f"{did_you_mean(missing[0], names)} (names: {', '.join(names)})"
            )
        check_audit(settings, network, population)


def check_deploy_constraints(constraints: Path, input_names: Sequence[str] | None, *,
                             names_may_come_later: bool) -> None:
    """The deploy step's constraint file loads as a constraint set, input names resolved
    against its ``inputs:`` header or ``input_names``, that does not give ⊥ at every input
    (as the deploy step refuses it after the gate); any fault is a
    :class:`CertgateInputError` naming ``deploy.constraints``. With
    ``names_may_come_later`` (no model loaded yet), a file naming inputs that neither names
    passes: the check on the loaded model's names, before the audit, resolves it."""
    from verifier.selfcorrect import ConstraintError, SelfCorrectingLayer
    from verifier.selfcorrect.constraints import InputNamesUnknownError
    from verifier.selfcorrect.loaders import load_constraints

    try:
        constraint_set = load_constraints(constraints, input_names=input_names)
        SelfCorrectingLayer(constraint_set, constraint_set.num_classes) \
            .require_satisfiable_somewhere()
    except InputNamesUnknownError as error:
        if not names_may_come_later:
            raise CertgateInputError(f"deploy.constraints: {error}") from error
    except ConstraintError as error:
        raise CertgateInputError(f"deploy.constraints: {error}") from error
