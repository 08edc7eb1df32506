"""The check every audit configuration passes before it runs: the inputs it names exist and
the audit can run on the bound model and population."""

from __future__ import annotations

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
