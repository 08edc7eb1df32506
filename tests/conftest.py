"""Test configuration: deterministic hypothesis profile and quiet MLflow telemetry."""

import os
import sys
from pathlib import Path

import torch
from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
# One intra-op thread: on a shared 2-core machine torch's thread pool contends for busy cores
# and small float64 kernels run 10-20x slower; the tests' tensors are small anyway.
torch.set_num_threads(1)

settings.register_profile(
    "certgate",
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("certgate")
