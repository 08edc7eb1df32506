"""Where independent work runs: in-process, a local process pool, or Dask.

Every backend is a :class:`concurrent.futures.Executor`, so callers use ``submit``/``map`` and
never care which one runs their work. ``make_executor("local")`` runs tasks in the calling
thread (deterministic, no pickling); ``"process"`` uses a ``ProcessPoolExecutor``;
``"dask"`` / ``"dask=ADDRESS"`` uses ``distributed`` (extra ``certgate[dask]``): a client of the
scheduler at ADDRESS, or of a new ``LocalCluster`` when no address is given.
:func:`share` sends a value every task needs to the workers once (:mod:`verifier.worker_values`);
:func:`abandon` ends any executor without waiting for the tasks still running.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import signal
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor, wait
from typing import Any

from verifier.errors import CertgateInputError, ExecutorUnreachableError
from verifier.stop_request import POLL_S, stop_requested
from verifier.worker_malloc import MALLOC_ENVIRON, keep_freed_memory
from verifier.worker_values import (
    Pickled,
    SharedValue,
    call_with_values,
    install,
    uses_values,
)


class InProcessExecutor(Executor):
    """Runs each task immediately in the caller's thread; exceptions land in the future."""

    def __init__(self) -> None:
        self._shutdown = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        if self._shutdown:
            raise RuntimeError("cannot submit to an executor that was shut down")
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as error:  # the future carries it to the caller
            future.set_exception(error)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._shutdown = True


class BackgroundThread:
    """One thread that runs the work given to it in order, so that the caller can wait for
    it with a timeout and walk away from it. The thread ends after :meth:`close` once the
    work queued before is done, and the interpreter's exit waits for that (torch aborts the
    process when a daemon thread is still inside it at exit): work that gives up early
    (returns None once its result is no longer wanted) keeps that wait short."""

    def __init__(self) -> None:
        self._work: queue.SimpleQueue[tuple[Callable[[], Any], Future] | None] = (
            queue.SimpleQueue())
        self._thread: threading.Thread | None = None

    def run(self, work: Callable[[], Any]) -> Future:
        """Queue ``work``: the future gets its result or exception, and is cancelled if it
        returns None (it gave up)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="certgate-background")
            self._thread.start()
        future: Future = Future()
        self._work.put((work, future))
        return future

    def close(self) -> None:
        """End the thread after the work queued before this call."""
        if self._thread is not None:
            self._work.put(None)
            self._thread = None

    def _serve(self) -> None:
        while (item := self._work.get()) is not None:
            work, future = item
            try:
                value = work()
            except BaseException as error:  # the future carries it to the caller
                future.set_exception(error)
                continue
            if value is None:
                future.cancel()
                future.set_running_or_notify_cancel()  # wakes the callers waiting on it
            else:
                future.set_result(value)


WORKER_EXIT_S = 5.0
"""Seconds :meth:`ProcessPool.terminate_workers` waits for each killed worker to exit."""


class ProcessPool(ProcessPoolExecutor):
    """A local process pool whose workers receive the shared values once, when they start
    (:meth:`share`), and can be ended without waiting for their running tasks (Python 3.14's
    ``ProcessPoolExecutor.terminate_workers``, which 3.11 lacks)."""

    def __init__(self, max_workers: int) -> None:
        self._values: dict[str, Any] = {}
        self._started = False
        super().__init__(max_workers=max_workers, initializer=start_worker,
                         initargs=(self._values,))

    def share(self, value: Any) -> SharedValue:
        """A task argument standing for ``value``. Shared before the first task, the value
        reaches each worker once, as the pool's initializer's argument when the worker starts
        (the workers start at the first task: forked, they inherit it without pickling).
        Shared later, it is pickled here once and travels with every task (each worker
        unpickles it once)."""
        key = uuid.uuid4().hex
        if self._started:
            return SharedValue(key, pickle.dumps(value))
        self._values[key] = value
        return SharedValue(key)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        self._started = True
        if uses_values(args, kwargs):
            return super().submit(call_with_values, fn, args, kwargs)
        return super().submit(fn, *args, **kwargs)

    def terminate_workers(self) -> None:
        """Cancel the pending tasks, shut down without waiting, and kill the workers still
        alive (this process's own children; a running task's result is lost). The pool's
        manager thread may start a worker in place of one that exited while this runs, so
        the workers are swept again once that thread has ended (or :data:`WORKER_EXIT_S` has
        passed).

        A worker ended while it wrote a result leaves a message cut short in the results
        pipe, and the manager thread blocks reading its rest for ever — and with it the
        interpreter's exit, which joins that thread (a CLI run printed its result and never
        returned). Once the workers are ended this process's own end of the pipe for writing
        is closed, the last one: the read then ends (the pool is reported broken, which
        changes nothing, every task being cancelled or abandoned)."""
        workers = self._processes if self._processes is not None else {}
        manager = self._executor_manager_thread
        self.shutdown(wait=False, cancel_futures=True)
        _end_processes(list(workers.values()))
        if manager is not None:
            manager.result_queue._writer.close()
            manager.join(timeout=WORKER_EXIT_S)
        _end_processes(list(workers.values()))


WORKER_IGNORED_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The stop signals a :class:`ProcessPool` worker ignores: stopping is the command's to do.
Forked, a worker would inherit the command's handlers (the CLI's engine signals): each
worker said it was "stopping with the bounds reached" and went on, at a Ctrl-C (SIGINT
reaches the terminal's whole process group) and at every
:meth:`ProcessPool.terminate_workers` (its SIGTERM), which then waited :data:`WORKER_EXIT_S`
for each busy worker before killing it. Dying of the signal instead would lose the round in
flight that the command's first signal keeps."""


def start_worker(values: dict[str, Any]) -> None:
    """A :class:`ProcessPool` worker's start: it ignores :data:`WORKER_IGNORED_SIGNALS`, its
    malloc keeps the memory its tasks free (:func:`verifier.worker_malloc.keep_freed_memory`)
    and it keeps the shared ``values``."""
    for number in WORKER_IGNORED_SIGNALS:
        signal.signal(number, signal.SIG_IGN)
    keep_freed_memory()
    install(values)


def _end_processes(processes: list[Any]) -> None:
    """Kill every process still alive (a worker ignores SIGTERM,
    :data:`WORKER_IGNORED_SIGNALS`) and wait up to :data:`WORKER_EXIT_S` for each to exit."""
    for process in processes:
        if process.is_alive():
            process.kill()
    for process in processes:
        process.join(timeout=WORKER_EXIT_S)



NANNY_ENVIRON = "distributed.nanny.pre-spawn-environ"
"""Dask's option holding the variables its nannies set before they start a worker."""
MALLOC_TRIM_KEY = f"{NANNY_ENVIRON}.MALLOC_TRIM_THRESHOLD_"
"""Dask's nanny starts each worker with ``MALLOC_TRIM_THRESHOLD_=65536``, and setting it turns
off glibc's dynamic mmap threshold: every array above 128 kB is then a fresh mapping whose
pages are faulted in and zeroed. PV on a local cluster spent 2.4× the CPU per box with it
(40 % of it in the kernel). A local cluster's workers start instead with
:data:`verifier.worker_malloc.MALLOC_ENVIRON`, the thresholds of the process pool's workers
(docs/decisions.md, 2026-11-29)."""


@contextlib.contextmanager
def _interrupts_ignored() -> Iterator[None]:
    """SIGINT ignored in the block, on the main thread (elsewhere it cannot be set, and is
    left alone): a process spawned in it starts with SIGINT ignored, and Python leaves an
    ignored SIGINT ignored (no ``KeyboardInterrupt``, no asyncio runner's handler). A local
    cluster's workers spawned so do not print a traceback each at a Ctrl-C, which reaches
    the terminal's whole process group: stopping is the command's to do
    (:data:`WORKER_IGNORED_SIGNALS` for the same reason on a process pool). SIGTERM is left
    alone: the nannies' own stop paths use it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def _environment_kept() -> Iterator[None]:
    """This process's environment as it was before the block, whatever the block set: a
    local cluster's nannies write their ``pre-spawn-environ`` (the malloc thresholds,
    distributed's thread counts) into the caller's own ``os.environ`` before spawning each
    worker, and every process the caller started afterwards would inherit them."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        for key in set(os.environ) - set(saved):
            del os.environ[key]
        for key, value in saved.items():
            if os.environ.get(key) != value:
                os.environ[key] = value


class DaskExecutor(Executor):
    """A ``distributed`` client's executor that also closes the client (and its cluster); its
    shared values reach the workers through a worker plugin (:meth:`share`). A local
    cluster's workers start with :data:`verifier.worker_malloc.MALLOC_ENVIRON` (see
    :data:`MALLOC_TRIM_KEY`)."""

    def __init__(self, address: str | None, workers: int | None = None) -> None:
        try:
            import dask
            from distributed import Client, LocalCluster
        except ImportError as error:  # pragma: no cover - depends on the installed extras
            raise CertgateInputError(
                "the dask executor needs the extra: pip install 'certgate[dask]'"
            ) from error
        self._cluster = None
        self._workers: list[Any] = []
        if address:
            try:
                self._client = Client(address)
            except OSError as error:  # refused, unresolvable, or the connect timeout
                raise ExecutorUnreachableError(
                    f"cannot reach the Dask scheduler at {address}: {error}") from error
        else:
            with dask.config.set({f"{NANNY_ENVIRON}.{name}": value
                                  for name, value in MALLOC_ENVIRON.items()}), \
                    _environment_kept(), _interrupts_ignored():
                # a nanny prefers this process's variables to its configuration's values
                os.environ.update({name: str(value) for name, value in MALLOC_ENVIRON.items()})
                self._cluster = LocalCluster(
                    n_workers=workers or default_workers(),
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                )
            self._workers = _worker_processes(self._cluster)
            self._client = Client(self._cluster)
        self._executor = self._client.get_executor()
        self._plugins: list[str] = []

    @property
    def client(self) -> Any:
        return self._client

    def share(self, value: Any) -> SharedValue:
        """A task argument standing for ``value``, which is pickled here once and installed
        on every worker of the cluster by a worker plugin (``verifier.dask_values``; a worker
        that joins later receives it when it starts) until :meth:`shutdown` unregisters it
        (or closes the local cluster). A worker unpickles it on its first task, so sharing
        does not wait for the workers' imports (a run with a short budget abandons them)."""
        from verifier.dask_values import ValuesPlugin

        key = uuid.uuid4().hex
        name = f"certgate-values-{key}"
        self._client.register_plugin(ValuesPlugin({key: Pickled(pickle.dumps(value))}),
                                     name=name)
        self._plugins.append(name)
        return SharedValue(key)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        if uses_values(args, kwargs):
            return self._executor.submit(call_with_values, fn, args, kwargs)
        return self._executor.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._executor.shutdown(wait=wait)
        if self._cluster is None:  # a cluster of ours ends with its values
            self._unregister_plugins()
        self._plugins.clear()
        self._client.close()
        if self._cluster is not None:
            self._cluster.close()

    def abandon(self) -> None:
        """Shut down without waiting for the tasks still running. A remote cluster's tasks
        run to their end there (:meth:`shutdown`). A local cluster's workers are killed once
        its nannies are closing: a closing nanny asks its worker to stop and waits up to
        4 s for the task it runs (3–4 s past a PV deadline, under load), and a nanny not yet
        closing restarts a worker killed under it."""
        if self._cluster is None:
            self.shutdown(wait=False, cancel_futures=True)
            return
        nannies = list(self._cluster.workers.values())
        self._executor.shutdown(wait=False)
        self._plugins.clear()
        self._client.close()
        failure: list[BaseException] = []

        def close_cluster() -> None:
            try:
                self._cluster.close()
            except BaseException as error:  # re-raised in the caller's thread below
                failure.append(error)

        closing = threading.Thread(target=close_cluster, daemon=True)
        closing.start()
        started = time.monotonic()
        while (any(_still_running(nanny) for nanny in nannies)
               and time.monotonic() - started < NANNY_CLOSING_WAIT_S and closing.is_alive()):
            time.sleep(0.01)
        if not any(_still_running(nanny) for nanny in nannies):
            from psutil import NoSuchProcess  # distributed's dependency

            for worker in self._workers:
                with contextlib.suppress(NoSuchProcess):
                    worker.kill()
        closing.join()
        if failure:
            raise failure[0]

    def _unregister_plugins(self) -> None:
        """Remove this executor's values from a remote cluster's workers, while its scheduler
        is reachable. A client that has lost its scheduler skips it with a warning, and one
        that loses it meanwhile stops there: a run's result is never lost to, nor kept waiting
        by, the clean-up of a cluster that is gone (each call would wait for the connect
        timeout, 30 s by default, then raise). The values stay on workers that outlive their
        scheduler until those workers end."""
        if self._client.status != "running":
            warnings.warn(f"dask scheduler unreachable ({self._client.status}): the workers "
                          "keep this run's shared values until they end", stacklevel=3)
            return
        for name in self._plugins:
            try:
                self._client.unregister_worker_plugin(name)
            except OSError as error:  # distributed's CommClosedError and connect timeouts
                warnings.warn(f"dask scheduler lost while removing this run's shared values "
                              f"({error}); the workers keep them until they end", stacklevel=3)
                return


NANNY_CLOSING_WAIT_S = 2.0
"""How long :meth:`DaskExecutor.abandon` waits for a local cluster's nannies to start
closing before it leaves the workers to them (the close then takes its usual time)."""


def _worker_processes(cluster: Any) -> list[Any]:
    """The worker processes of a just-started local cluster, as ``psutil`` handles
    (distributed's dependency): one kills its own process only, never another that reused
    the number."""
    from psutil import Process

    return [Process(nanny.pid) for nanny in cluster.workers.values()
            if nanny.pid is not None]


def _still_running(nanny: Any) -> bool:
    """Whether a local cluster's nanny has not begun closing (it would restart a worker
    that dies)."""
    from distributed.core import Status

    return nanny.status not in (Status.closing, Status.closing_gracefully, Status.closed,
                                Status.failed)


def default_workers() -> int:
    """Worker count for local pools: the machine's cores."""
    return max(1, os.cpu_count() or 1)


def make_executor(spec: str = "local", workers: int | None = None) -> Executor:
    """Build an executor from ``local``, ``process``, ``dask`` or ``dask=ADDRESS``."""
    kind, _, address = spec.partition("=")
    if kind == "local":
        return InProcessExecutor()
    if kind == "process":
        return ProcessPool(max_workers=workers or default_workers())
    if kind == "dask":
        return DaskExecutor(address or None, workers)
    raise CertgateInputError(
        f"unknown executor {spec!r}; use local, process, dask or dask=ADDRESS"
    )


def share(executor: Executor, value: Any) -> Any:
    """A task argument standing for ``value`` on ``executor``: the task function receives
    ``value`` itself, which a process pool's or a Dask cluster's workers receive once
    (:meth:`ProcessPool.share`, :meth:`DaskExecutor.share`) instead of with every task. On any
    other executor it is ``value`` (in-process it is not even copied)."""
    if isinstance(executor, ProcessPool | DaskExecutor):
        return executor.share(value)
    return value


def running(executor: Executor) -> bool:
    """Whether ``executor`` can still run tasks: False once a Dask client has lost its
    scheduler, True for every other executor. An executor that hands its tasks to another
    one names it ``inner`` (a counting wrapper) and runs while that one does. A lost client's
    futures are cancelled, but one submitted after the loss waits for the reconnection
    window (the connect timeout, 30 s by default) before it is: :func:`wait_while_running`
    does not wait for it."""
    inner = getattr(executor, "inner", None)
    if isinstance(inner, Executor):
        return running(inner)
    return not isinstance(executor, DaskExecutor) or executor.client.status == "running"


def wait_while_running(futures: Iterable[Future], timeout: float | None,
                       executor: Executor) -> set[Future]:
    """Wait up to ``timeout`` seconds (None: for ever) for ``futures``, looking every
    :data:`~verifier.stop_request.POLL_S` at a stop request (:mod:`verifier.stop_request`)
    and at whether ``executor`` still runs (:func:`running`); returns the futures not done
    when the wait ended, empty when they all are."""
    end = None if timeout is None else time.monotonic() + max(timeout, 0.0)
    pending = set(futures)
    while pending:
        left = None if end is None else end - time.monotonic()
        pending = wait(pending, timeout=POLL_S if left is None else
                       max(min(left, POLL_S), 0.0)).not_done
        if stop_requested() or not running(executor) or (left is not None and left <= POLL_S):
            break
    return pending


def abandon(executor: Executor) -> None:
    """Shut ``executor`` down without waiting for the tasks still running (their results are
    no longer wanted, e.g. at a deadline): pending tasks are cancelled, a
    :class:`ProcessPool`'s workers are terminated, a Dask client cancels its tasks on the
    cluster and closes (a task already running on a Dask worker runs to its end there)."""
    if isinstance(executor, ProcessPool):
        executor.terminate_workers()
    elif isinstance(executor, DaskExecutor):
        executor.abandon()
    else:
        executor.shutdown(wait=False, cancel_futures=True)
