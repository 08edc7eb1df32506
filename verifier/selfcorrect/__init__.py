"""Self-correcting networks (paper 004): safe-ordering constraints and the SC-layer.

``load_constraints`` reads a constraint file; ``SelfCorrectingLayer`` corrects logits;
``SelfCorrectingNetwork`` wraps a classifier; ``negate_outputs`` brings argmin networks (ACAS Xu)
to the max-logit convention; ``verifier.selfcorrect.export`` writes TorchScript (and ONNX where
the exporter can express the module).
"""

from verifier.selfcorrect.constraints import (
    ConstraintError,
    ConstraintSet,
    SafeOrderingConstraint,
    constraint_set_from_dict,
)
from verifier.selfcorrect.conventions import negate_outputs, scored_module, scored_network
from verifier.selfcorrect.layer import CombinationLimitError, SelfCorrectingLayer
from verifier.selfcorrect.loaders import load_constraints, parse_constraints
from verifier.selfcorrect.preconditions import SelfCorrectionInputError
from verifier.selfcorrect.scnet import SelfCorrectingNetwork, UnsatisfiableConstraintsError

__all__ = [
    "CombinationLimitError",
    "ConstraintError",
    "ConstraintSet",
    "SafeOrderingConstraint",
    "SelfCorrectingLayer",
    "SelfCorrectingNetwork",
    "SelfCorrectionInputError",
    "UnsatisfiableConstraintsError",
    "constraint_set_from_dict",
    "load_constraints",
    "negate_outputs",
    "parse_constraints",
    "scored_module",
    "scored_network",
]
