"""The Dask worker plugin that gives every worker a run's shared values once
(:mod:`verifier.worker_values`).

A plugin, not ``Client.scatter(..., broadcast=True)``: the active memory manager, on by
default, drops a scattered key's extra replicas within seconds once no task waits for it, so
each round would fetch the value again on all but one worker. A plugin's values are held
outside Dask's data, reach a worker that joins later when it starts, and are removed from
every worker when the plugin is unregistered (the executor's shutdown).
"""

from __future__ import annotations

from typing import Any

from distributed import WorkerPlugin

from verifier import worker_values


class ValuesPlugin(WorkerPlugin):
    """Installs ``values`` in each worker's :data:`verifier.worker_values.VALUES`."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values

    def setup(self, worker: Any) -> None:
        worker_values.install(self.values)

    def teardown(self, worker: Any) -> None:
        for key in self.values:
            worker_values.VALUES.pop(key, None)
