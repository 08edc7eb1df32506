"""The self-correcting variant's two MLflow flavours in one model directory.

``python_function`` is the model code :mod:`registry_hooks.selfcorrect_pyfunc` (a DataFrame
of corrected logits, ``bottom`` and ``predicted_class``); ``pytorch`` is the same TorchScript
SC-Net as MLflow's own PyTorch flavour writes a scripted module (``serialization_format=
"pickle"``: ``data/model.pth`` saved by ``torch.jit.save``, which ``mlflow.pytorch.load_model``
loads back as a ``torch.jit.ScriptModule``), so a user of either loader gets the variant:
``mlflow.pytorch.load_model(uri)(x)`` is the corrected logits, ``forward_with_bottom(x)`` adds
the ⊥ flags. MLflow keeps one flavour entry per name in ``MLmodel``, and the pyfunc entry is
the custom model's (``mlflow.pytorch.load_model`` reads only the ``pytorch`` entry).

:class:`SelfCorrectingFlavors` is the ``flavor`` handed to ``mlflow.models.Model.log``: its
``save_model`` writes the pyfunc directory, then MLflow's PyTorch flavour of the TorchScript
file beside it, and records both in ``MLmodel``.
"""

from __future__ import annotations

import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

import mlflow
from mlflow.models import Model
from mlflow.models.model import MLMODEL_FILE_NAME

PYTORCH_FLAVOR = "pytorch"
VARIANT_FLAVORS = ("python_function", PYTORCH_FLAVOR)
"""The flavours a variant is registered with (part of its fingerprint: a variant registered
before it carried the ``pytorch`` flavour is not reused)."""


class SelfCorrectingFlavors:
    """``Model.log``'s flavour for the variant (module docstring)."""

    __name__ = "certgate.selfcorrect"

    @staticmethod
    def save_model(path: str, mlflow_model: Model, *, torchscript: str,
                   **pyfunc_options: Any) -> None:
        """Save the pyfunc model (``mlflow.pyfunc.save_model(**pyfunc_options)``) at ``path``
        and the ``torchscript`` file as its ``pytorch`` flavour (``data/``, written by
        ``mlflow.pytorch.save_model``)."""
        import torch

        mlflow.pyfunc.save_model(path=path, mlflow_model=mlflow_model, **pyfunc_options)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"`torch\.jit\.load` is deprecated",
                                    category=DeprecationWarning)
            scripted = torch.jit.load(torchscript)
        with tempfile.TemporaryDirectory(prefix="certgate-pytorch-flavor-") as scratch:
            written = Path(scratch) / "model"
            mlflow.pytorch.save_model(scripted, path=str(written),
                                      serialization_format="pickle",
                                      pip_requirements=pyfunc_options.get("pip_requirements"))
            flavor = Model.load(str(written / MLMODEL_FILE_NAME)).flavors[PYTORCH_FLAVOR]
            shutil.copytree(written / flavor["model_data"], Path(path) / flavor["model_data"])
        mlflow_model.add_flavor(PYTORCH_FLAVOR, **flavor)
        mlflow_model.save(str(Path(path) / MLMODEL_FILE_NAME))
