"""What PV reports: anytime progress and the final result with its certificate."""

from __future__ import annotations

from dataclasses import dataclass, field

from verifier.certificate import Certificate
from verifier.pv.settings import PVSettings
from verifier.spec import Interval, Specification


@dataclass
class PVProgress:
    """One anytime report: the current sound intervals."""

    probabilities: dict[str, Interval]
    value: Interval
    verdict: str
    boxes: int
    open_boxes: int
    elapsed_s: float


@dataclass
class PVResult:
    """What PV proved: the verdict (only if proven), every interval, and the cost."""

    verdict: str
    value: Interval
    probabilities: dict[str, Interval]
    boxes: int
    iterations: int
    elapsed_s: float
    stopped_by: str
    specification: Specification
    history: list[tuple[float, Interval]] = field(default_factory=list)
    settings: PVSettings | None = None

    def to_certificate(self) -> Certificate:
        spec = self.specification
        bounds = {"value": self.value, **self.probabilities}
        return Certificate(
            audit=spec.name,
            verdict=self.verdict,
            bounds=bounds,
            details={
                "expression": spec.expression_text,
                "comparison": spec.comparison,
                "threshold": spec.threshold,
                "probabilities": {k: t.describe() for k, t in spec.probabilities.items()},
                "stopped_by": self.stopped_by,
                "history": [[t, list(v)] for t, v in self.history],
                **spec.metadata,
            },
            cost={"elapsed_s": self.elapsed_s, "boxes": self.boxes, "iterations": self.iterations},
            algorithm=self.algorithm(),
        )

    def algorithm(self) -> str:
        """The algorithm as it ran: selection, the split rule and the bound method."""
        settings = self.settings or PVSettings()
        finish = (f", points of boxes with <= {settings.enumerate_points} enumerated"
                  if settings.enumerate_points else "")
        return (f"PV branch and bound (SelectProb selection, {settings.split} splitting, "
                f"{settings.method} bounds{finish})")
