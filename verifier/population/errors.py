"""Errors of population models; both are bad input (CLI exit code 2)."""

from verifier.errors import CertgateInputError


class PopulationError(CertgateInputError):
    """A population model is malformed or cannot answer the request; the message says where."""


class PopulationMismatchError(PopulationError):
    """A population model does not fit a network's inputs (count, names or order)."""
