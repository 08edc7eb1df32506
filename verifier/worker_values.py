"""Values a run shares with its workers once, instead of sending them with every task.

A task argument may be a :class:`SharedValue`: a key into the :data:`VALUES` of the process
the task runs in. A process pool's workers receive the values when they start (the pool's
initializer, :func:`install`); a Dask worker receives them from a worker plugin when it
registers or joins (``verifier.dask_values``), still pickled (:class:`Pickled`). The
executor calls the task through :func:`call_with_values`, which puts each value in place of
its key, so the task function receives the value itself on every executor, as it does
in-process.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

VALUES: dict[str, Any] = {}
"""This process's shared values, by key (filled on a worker, empty in the caller)."""


@dataclass(frozen=True)
class SharedValue:
    """Stands for the value shared under ``key``. ``payload``, the pickled value, is set only
    when the workers could not receive the value once (a process pool whose workers had
    started before it was shared): it then travels with every task, and a worker unpickles it
    on its first such task and keeps it."""

    key: str
    payload: bytes | None = None


@dataclass(frozen=True)
class Pickled:
    """A shared value as a worker receives it from Dask: unpickled on its first use, so that a
    worker's start is not held up by the imports the value needs (torch)."""

    payload: bytes


def install(values: dict[str, Any]) -> None:
    """Keep ``values`` in this process (a worker's start)."""
    VALUES.update(values)


def uses_values(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether any argument of a task is a :class:`SharedValue`."""
    return any(isinstance(arg, SharedValue) for arg in (*args, *kwargs.values()))


def call_with_values(fn: Callable[..., Any], args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> Any:
    """``fn(*args, **kwargs)`` with every :class:`SharedValue` replaced by its value."""
    return fn(*(_value(arg) for arg in args),
              **{name: _value(arg) for name, arg in kwargs.items()})


def _value(arg: Any) -> Any:
    if not isinstance(arg, SharedValue):
        return arg
    if arg.key in VALUES:
        value = VALUES[arg.key]
    elif arg.payload is not None:
        value = Pickled(arg.payload)
    else:
        raise RuntimeError(
            f"shared value {arg.key} is not on worker process {os.getpid()}: it reaches a "
            "process pool's workers when they start (share it before the pool's first "
            "task) and a Dask worker through the plugin the executor registers")
    if isinstance(value, Pickled):
        value = VALUES[arg.key] = pickle.loads(value.payload)
    return value
