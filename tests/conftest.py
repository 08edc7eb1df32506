"""Test configuration: deterministic hypothesis profile and quiet MLflow telemetry."""

import os
import sys
from pathlib import Path

from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

settings.register_profile(
    "certgate",
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("certgate")
