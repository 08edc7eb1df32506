"""certgate's verifier: the mathematics of certification, with no MLflow dependency.

Import the pieces from their modules, e.g. ``from verifier.network import Network`` or
``from verifier.bounds import crown``.
"""

__version__ = "0.1.0"
