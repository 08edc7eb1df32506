"""Certificates: JSON-serialisable records of what an audit proved, how, and at what cost.

Every audit returns a :class:`Certificate`. ``verdict`` is only ever a *proven* statement
(``satisfied``/``violated``, or an audit-specific proven verdict such as ``fair``/``biased``);
anything not proven — a timeout, an undecided interval — is ``unknown`` with the bounds reached.
"""

from __future__ import annotations

import json
import math
import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from importlib import metadata
from typing import Any

import numpy as np

import verifier

PASSING_VERDICTS = ("satisfied", "fair")
PROVEN_VERDICTS = (*PASSING_VERDICTS, "violated", "biased")
VERDICTS = (*PROVEN_VERDICTS, "unknown")


@dataclass
class Certificate:
    """What one audit established.

    ``bounds`` maps a quantity name to its certified ``[lower, upper]`` interval;
    ``details`` holds audit-specific records (regions, witnesses, per-probability intervals);
    ``settings`` the algorithm's parameters; ``cost`` the time and work spent; ``provenance``
    what was certified (the model, the population model's file and its sha256, how the inputs
    were bound), filled in by whoever loaded them. ``population_fidelity`` whether data
    contradicts the population model the proof assumed (``status``: ``consistent``,
    ``contradicted`` or ``unchecked`` with its ``reason``; :mod:`verifier.audits.fidelity`);
    empty when no check was attempted.
    """

    audit: str
    verdict: str
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    cost: dict[str, float] = field(default_factory=dict)
    algorithm: str = ""
    provenance: dict[str, Any] = field(default_factory=dict)
    population_fidelity: dict[str, Any] = field(default_factory=dict)
    created_at: float = field(default_factory=time.time)
    versions: dict[str, str] = field(default_factory=lambda: software_versions())

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")
        for name, (lower, upper) in self.bounds.items():
            if math.isnan(lower) or math.isnan(upper) or lower > upper:
                raise ValueError(f"bounds for {name!r} are not an interval: [{lower}, {upper}]")

    @property
    def proven(self) -> bool:
        """True when the verdict is a proof either way, not ``unknown``."""
        return self.verdict in PROVEN_VERDICTS

    def proof_flags(self) -> dict[str, float]:
        """``proven_pass`` (1.0 iff the requirement is proven to hold) and ``proven_fail``
        (1.0 iff it is proven violated); both 0.0 when undecided. The metrics every audit run
        and the MLflow evaluator log as ``<audit>.proven_pass`` / ``<audit>.proven_fail``."""
        passed = self.verdict in PASSING_VERDICTS
        return {"proven_pass": float(passed), "proven_fail": float(self.proven and not passed)}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (numpy values converted, infinities as strings)."""
        return to_jsonable(asdict(self))

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Certificate:
        """Inverse of :meth:`to_dict`."""
        payload = from_jsonable(dict(data))
        payload["bounds"] = {k: (float(v[0]), float(v[1])) for k, v in payload["bounds"].items()}
        return cls(**payload)


def software_versions() -> dict[str, str]:
    """Versions that produced a certificate (for reproducibility)."""
    return {
        "certgate": verifier.__version__,
        "python": platform.python_version(),
        "torch": _installed_version("torch"),
        "numpy": np.__version__,
        "scipy": _installed_version("scipy"),
    }


def _installed_version(package: str) -> str:
    """``package.__version__`` when it is loaded, else its installed distribution's version:
    a run that needed neither torch nor scipy (a finite query enumerated) does not import
    them for their version numbers (1.2 s for torch)."""
    module = sys.modules.get(package)
    if module is not None:
        return str(module.__version__)
    return metadata.version(package)


def to_jsonable(value: Any) -> Any:
    """Recursively convert numpy types and tuples; ``±inf`` become ``"inf"``/``"-inf"``."""
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        if math.isnan(value):
            raise ValueError("NaN cannot appear in a certificate")
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
    return value


def from_jsonable(value: Any) -> Any:
    """Inverse of :func:`to_jsonable` for infinities."""
    if isinstance(value, dict):
        return {k: from_jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_jsonable(v) for v in value]
    if value == "inf":
        return math.inf
    if value == "-inf":
        return -math.inf
    return value
