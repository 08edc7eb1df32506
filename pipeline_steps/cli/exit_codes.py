"""The exit codes of ``certgate`` and the one map from a result to its code.

``0`` proven pass · ``1`` gate failed, violated or undecided · ``2`` usage, configuration,
data or registry error · ``3`` internal error (DESIGN §8.3) · ``141`` stdout's reader closed
it before the output was written (``certgate … | head``: the code of a process ended by
SIGPIPE, which shells already report for such pipelines). Every verb that ends in a
verdict or a gate outcome returns :func:`exit_for` of it, so the command line cannot give
two codes for one result.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_ERROR = 2
EXIT_INTERNAL = 3
EXIT_READER_GONE = 141

EXIT_FOR_RESULT: dict[str, int] = {
    # a certificate's verdict (verifier.numerics.comparison)
    "satisfied": EXIT_OK,
    "violated": EXIT_FAILED,
    "unknown": EXIT_FAILED,
    # the causal engine's own verdict, reported when no requirement judged it
    "fair": EXIT_OK,
    "biased": EXIT_FAILED,
    # the gate's outcome (pipeline_steps.gate)
    "passed": EXIT_OK,
    "warned": EXIT_OK,
    "failed": EXIT_FAILED,
}


def exit_for(result: str) -> int:
    """The exit code of a verdict or gate outcome; a result this table does not name fails
    (exit 1): only a proven pass exits 0."""
    return EXIT_FOR_RESULT.get(result, EXIT_FAILED)
