"""certgate's Python API (a thin facade over ``verifier`` and ``pipeline_steps``)."""
