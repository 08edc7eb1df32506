"""SC-Net: a classifier composed with the self-correcting layer, usable as a drop-in model.

``SelfCorrectingNetwork(model, constraints)(x)`` returns the corrected logits of ``model(x)``.
Rows where the constraints are unsatisfiable at ``x`` (⊥) are handled by ``on_bottom``:

* ``"mark"`` (default): the logits are returned unchanged and ``last_bottom`` flags the rows;
* ``"raise"``: :class:`UnsatisfiableConstraintsError` naming the rows;
* ``"abstain"``: with ``abstain_class=None`` an extra last column is appended, the *abstain
  logit*: just above the row's largest logit (``nextafter``) on ⊥ rows, so argmax picks it (at
  the largest float: that float, the row's other logits there stepping one float down), and
  the most negative finite value elsewhere (softmax gives it probability 0, argmax never picks
  it). With ``abstain_class`` (an index or class name) the width stays ``m`` and on ⊥ rows that
  class's logit is raised just above the row's largest logit.

The module is picklable and compiles with ``torch.jit.script``; ``forward_with_bottom(x)``
returns ``(outputs, bottom)`` in one call (``last_bottom`` is also set by ``forward``). The model
reads the rows in its own dtype: around a float64 model, float32 (or half) rows are widened to
float64 first, exactly; around a float32 model, float64 (or half) rows are converted to float32,
as MLflow's PyTorch flavour converts a DataFrame's. The layer reads the rows as given (its
preconditions decide in real arithmetic on the given values) and orders the model's logits in
their own dtype, so a row whose logits already comply leaves with the model's logits, bit for
bit, and the model's argmax.
"""

from collections.abc import Sequence

import torch
from torch import Tensor

from verifier.numerics.scripted import down_scripted, up_scripted
from verifier.selfcorrect.constraints import ConstraintError, ConstraintSet, SafeOrderingConstraint
from verifier.selfcorrect.constraints import resolve_class as _resolve_class
from verifier.selfcorrect.layer import SelfCorrectingLayer
from verifier.selfcorrect.preconditions import SelfCorrectionInputError

ON_BOTTOM = ("mark", "raise", "abstain")


def parameter_bits(model: torch.nn.Module) -> int:
    """The float width the model computes in, read from its parameters: 64 when one is
    float64, else 32 when one is float32, else 0 (no float32/float64 parameter: the rows
    reach the model in their own dtype)."""
    dtypes = {parameter.dtype for parameter in model.parameters()}
    if torch.float64 in dtypes:
        return 64
    return 32 if torch.float32 in dtypes else 0


class UnsatisfiableConstraintsError(SelfCorrectionInputError):
    """The constraints cannot be satisfied at some input (⊥) and ``on_bottom="raise"``."""


class SelfCorrectingNetwork(torch.nn.Module):
    """``model`` followed by :class:`SelfCorrectingLayer`.

    Args:
        model: a ``torch.nn.Module`` mapping ``[batch, ...]`` inputs to ``[batch, m]`` logits.
        constraints: a :class:`ConstraintSet` (its class count is used) or a sequence of
            constraints (then ``num_classes`` is required).
        num_classes: the model's number of logits.
        on_bottom: ``"mark"``, ``"raise"`` or ``"abstain"`` (see the module docstring).
        abstain_class: for ``"abstain"``: an existing class (index or name) to put on top of ⊥
            rows; ``None`` appends an abstain column.
        input_size: the model's input width, checked against the constraints' preconditions.

    Raises:
        ConstraintError: bad ``on_bottom``/``abstain_class``, inconsistent class counts or
            input sizes, or constraints that give ⊥ at every input (on every piece of the
            input space, those active there by their form cannot hold together:
            :meth:`SelfCorrectingLayer.unsatisfiable_everywhere`).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        constraints: ConstraintSet | Sequence[SafeOrderingConstraint],
        num_classes: int | None = None,
        on_bottom: str = "mark",
        abstain_class: int | str | None = None,
        input_size: int | None = None,
    ) -> None:
        super().__init__()
        if on_bottom not in ON_BOTTOM:
            raise ConstraintError(
                f"on_bottom must be one of {', '.join(ON_BOTTOM)}, got {on_bottom!r}"
            )
        if num_classes is None:
            if not isinstance(constraints, ConstraintSet):
                raise ConstraintError("num_classes is required when constraints is a sequence")
            num_classes = constraints.num_classes
        self.model = model
        self.input_bits = parameter_bits(model)
        self.layer = SelfCorrectingLayer(constraints, num_classes, input_size)
        self.layer.require_satisfiable_somewhere()
        self.on_bottom = on_bottom
        self.abstain_index = -1
        if abstain_class is not None:
            if on_bottom != "abstain":
                raise ConstraintError("abstain_class is only used with on_bottom='abstain'")
            self.abstain_index = _resolve_class(
                abstain_class, self.layer.constraint_set.class_names, "abstain_class"
            )
        self.last_bottom = torch.zeros(0, dtype=torch.bool)

    @property
    def num_outputs(self) -> int:
        """Width of the output: ``m``, or ``m + 1`` with an appended abstain column."""
        appended = self.on_bottom == "abstain" and self.abstain_index < 0
        return self.layer.num_classes + (1 if appended else 0)

    def forward(self, x: Tensor) -> Tensor:
        return self.forward_with_bottom(x)[0]

    @torch.jit.export
    def forward_with_bottom(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """``(outputs, bottom)``; also stores ``bottom`` in ``last_bottom``. The model reads
        ``x`` in its own float dtype (module docstring): a float64 model widens lower-precision
        rows exactly; a float32 model reads float64 rows rounded to float32, float32 rows as
        they are. The layer's preconditions read ``x`` as given."""
        model_x = x
        if self.input_bits == 64 and x.is_floating_point() and x.dtype != torch.float64:
            model_x = x.to(torch.float64)
        elif self.input_bits == 32 and x.is_floating_point() and x.dtype != torch.float32:
            model_x = x.to(torch.float32)
        logits = self.model(model_x)
        corrected, bottom = self.layer(x, logits)
        self.last_bottom = bottom
        if self.on_bottom == "raise" and bool(bottom.any()):
            rows: list[int] = bottom.nonzero().flatten().tolist()
            raise UnsatisfiableConstraintsError(
                "the constraints are unsatisfiable (bottom) at input rows " + str(rows[:20])
            )
        if self.on_bottom == "abstain":
            return self._abstain(corrected, bottom), bottom
        return corrected, bottom

    def _abstain(self, corrected: Tensor, bottom: Tensor) -> Tensor:
        """The abstain logit just above each ⊥ row's largest logit. Where that logit is the
        largest float (nothing finite lies above it) the abstain logit is the largest float and
        the row's other logits at it step one float down, so the output stays finite (a softmax
        of ``+inf`` is NaN) and the abstain logit the strict argmax."""
        top = corrected.amax(dim=1)
        largest = down_scripted(torch.full_like(top, float("inf")))
        at_largest = bottom & (top == largest)
        above_top = torch.where(at_largest, largest, up_scripted(top))
        stepped = at_largest.unsqueeze(1) & (corrected == largest.unsqueeze(1))
        corrected = torch.where(stepped, down_scripted(corrected), corrected)
        if self.abstain_index >= 0:
            column = corrected[:, self.abstain_index]
            raised = torch.where(bottom, above_top, column)
            return corrected.index_copy(
                1, torch.tensor([self.abstain_index], device=corrected.device), raised.unsqueeze(1)
            )
        lowest = up_scripted(torch.full_like(corrected[:, 0], float("-inf")))
        return torch.cat([corrected, torch.where(bottom, above_top, lowest).unsqueeze(1)], dim=1)
