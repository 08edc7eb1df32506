"""MLflow pyfunc serving a self-correcting network (SC-Net) saved as TorchScript.

This file is logged as MLflow "model code": MLflow copies it into the model version and runs it
at load time, so it imports only ``numpy``, ``pandas``, ``torch`` and ``mlflow`` — a registered
variant loads and serves (``mlflow models serve --env-manager local``) without certgate.

Artifacts: ``torchscript`` (the compiled SC-Net, whose ``forward_with_bottom(x)`` returns
``(outputs, bottom)``) and ``constraints`` (the constraint set, for people and audits).
Model config: ``input_names`` (the network's input order) and ``output_columns``.

:meth:`SelfCorrectingPyfunc.predict` takes a 2-D numpy array (columns in input order) or a
DataFrame (columns selected by ``input_names`` when present, else taken in order) and returns a
DataFrame with one row per input: the corrected logits (``logit_<i>``, computed in the source
model's dtype and widened to float64 exactly; with an appended abstain column, ``logit_<m>`` is
the abstain logit), ``bottom`` (the constraints are unsatisfiable at that input) and
``predicted_class`` (the argmax of the corrected logits, lowest index on ties).
"""

from __future__ import annotations

import warnings
from typing import Any

import mlflow
import numpy as np
import pandas as pd
from mlflow.pyfunc import PythonModel

TORCHSCRIPT_ARTIFACT = "torchscript"
CONSTRAINTS_ARTIFACT = "constraints"
BOTTOM_COLUMN = "bottom"
PREDICTED_COLUMN = "predicted_class"


def logit_columns(num_outputs: int) -> list[str]:
    """``logit_0 … logit_<num_outputs-1>``: the names of the corrected-logit columns."""
    return [f"logit_{index}" for index in range(num_outputs)]


class SelfCorrectingPyfunc(PythonModel):
    """Serve a TorchScript SC-Net: inputs in, corrected logits, ⊥ flags and classes out."""

    def load_context(self, context: Any) -> None:
        import torch

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"`torch\.jit\.load` is deprecated",
                                    category=DeprecationWarning)
            self.network = torch.jit.load(context.artifacts[TORCHSCRIPT_ARTIFACT])
        self.network.eval()
        config = dict(context.model_config or {})
        self.input_names = [str(name) for name in config.get("input_names", [])]
        self.output_columns = [str(name) for name in config.get("output_columns", [])]

    def predict(self, context: Any, model_input: pd.DataFrame, params: dict[str, Any] | None = None
                ) -> pd.DataFrame:
        """Corrected logits, ``bottom`` and ``predicted_class`` for every input row.

        Raises:
            ValueError: the input is not 2-D, has the wrong width, or is not numeric.
        """
        import torch

        rows = self._rows(model_input)
        with torch.no_grad():
            outputs, bottom = self.network.forward_with_bottom(torch.from_numpy(rows))
        values = outputs.to(torch.float64).numpy()
        columns = self.output_columns or logit_columns(values.shape[1])
        frame = pd.DataFrame(values, columns=columns)
        frame[BOTTOM_COLUMN] = bottom.numpy().astype(bool)
        frame[PREDICTED_COLUMN] = values.argmax(axis=1).astype(np.int64)
        return frame

    def _rows(self, model_input: Any) -> np.ndarray:
        """The input as a contiguous float64 ``[rows, width]`` array in the network's order."""
        if isinstance(model_input, pd.DataFrame):
            if self.input_names and set(self.input_names) <= set(map(str, model_input.columns)):
                model_input = model_input[self.input_names]
            array = model_input.to_numpy()
        else:
            array = np.asarray(model_input)
        if array.ndim == 1:
            array = array.reshape(1, -1)
        if array.ndim != 2:
            raise ValueError(f"expected 2-D input rows, got shape {array.shape}")
        width = len(self.input_names)
        if width and array.shape[1] != width:
            raise ValueError(
                f"expected {width} input columns ({', '.join(self.input_names)}), "
                f"got {array.shape[1]}"
            )
        try:
            return np.ascontiguousarray(array, dtype=np.float64)
        except (TypeError, ValueError) as error:
            raise ValueError(f"input values must be numeric: {error}") from error


if __name__ != "registry_hooks.selfcorrect_pyfunc":
    mlflow.models.set_model(SelfCorrectingPyfunc())
