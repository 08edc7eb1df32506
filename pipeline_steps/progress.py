"""Progress of an audit on stderr: one tqdm bar per audit, counting the unit of work its
engine actually advances (the kind's ``PROGRESS``, :mod:`verifier.audits.kind`; :data:`BARS`
maps each unit to its bar):

* ``boxes`` (PV): boxes bounded, from PV's anytime reports, with the current
  certified interval and the boxes still open.
* ``partitions`` (causal fairness): partitions analysed, counted as the engine's chunks of
  partitions come back from the executor it submits them to (:class:`ChunkCounter` wraps that
  executor; the engine itself reports nothing until it ends), with the share of the query proven
  fair and proven biased everywhere so far (uniform measure), the rest not yet decided, and
  whether bias was witnessed; once the engine returns, :meth:`AuditProgress.finish` shows the
  certificate's own certified shares (fair, biased everywhere, contains bias, undecided), so
  the last numbers shown are the certificate's. The bar's interval is the one these shares
  give the uniform biased share by the engine's own rule
  (:func:`verifier.causal.share.uniform_bounds`: ``[biased everywhere, 1 − fair]``; the
  partitions are disjoint and each is counted once, when final), and
  :meth:`AuditProgress.observed` keeps each one: the audit step draws them in the report's chart
  and logs them as step metrics. They are never written into the certificate, which stays the
  engine's alone, the same through every front door.
* ``time`` (the exact-probability kinds, weighted model integration): seconds of the time
  budget, since the region enumeration reports nothing until it ends.

Every bar is created disabled when progress is off and writes nothing then; the causal
counter counts all the same, so the observed bounds do not depend on the bar.

A display never costs a run its result: a bar that fails to draw (tqdm drops ``total`` once
``n`` passes it, and a format reading ``{total}`` then fails) or a report that fails to
format is switched off with one warning on the log, and the audit goes on
(:class:`SafeBar`, :func:`display_guard`).
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

from tqdm import tqdm

from verifier.audits import kind_module
from verifier.executor import InProcessExecutor

TICK_S = 0.5
"""How often a time-budget bar advances, and how long any bar waits before it first shows
(an input error found at once prints the error alone)."""

logger = logging.getLogger(__name__)
Method = TypeVar("Method", bound=Callable[..., Any])


def _display_failed(bar: tqdm, error: Exception) -> None:
    """Switch ``bar`` off after its display raised ``error``, saying so once."""
    if not bar.disable:
        logger.warning("progress display failed (%s: %s); the run goes on without it",
                       type(error).__name__, error)
    bar.disable = True


class SafeBar(tqdm):
    """A tqdm bar whose drawing cannot raise: a failure switches the bar off (one warning)."""

    def display(self, msg: str | None = None, pos: int | None = None) -> bool | None:
        try:
            return super().display(msg, pos)
        except Exception as error:  # a display must never end the run it shows
            _display_failed(self, error)
            return None


def display_guard(method: Method) -> Method:
    """Run a display method of an :class:`AuditProgress` so that it never raises into the
    engine calling it: a failure switches the bar off (one warning)."""

    @functools.wraps(method)
    def guarded(self: AuditProgress, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except Exception as error:  # a display must never end the run it shows
            _display_failed(self.bar, error)
            return None

    return guarded  # type: ignore[return-value]


class AuditProgress:
    """The progress of one audit: ``callback`` is the runner's ``progress`` argument,
    ``engine_options`` what the runner's engine takes besides (a counting executor), and
    ``close`` ends the bar."""

    unit = " s"
    callback: Callable[..., None] | None = None
    quantity: str | None = None
    """The certified quantity :meth:`observed` bounds (``None``: nothing observed)."""

    def __init__(self, name: str, enabled: bool, total: float | None = None,
                 bar_format: str | None = None) -> None:
        self.bar = SafeBar(desc=name, unit=self.unit, total=total, file=sys.stderr,
                           disable=not enabled, dynamic_ncols=True, leave=True, delay=TICK_S,
                           bar_format=bar_format)

    @classmethod
    def for_audit(cls, settings: Any, enabled: bool) -> AuditProgress:
        """The bar of one audit with ``settings``."""
        return cls(settings.name, enabled)

    def engine_options(self) -> dict[str, Any]:
        return {}

    def observed(self) -> list[tuple[float, tuple[float, float]]]:
        """Anytime bounds of :attr:`quantity` the bar saw that the certificate does not record,
        as ``(elapsed_s, (lower, upper))``; none by default."""
        return []

    def finish(self, certificate: Any) -> None:
        """Show the audit's final ``certificate`` (nothing more by default)."""

    @display_guard
    def close(self) -> None:
        self.bar.close()


class BoxProgress(AuditProgress):
    """PV: boxes bounded so far, the current certified interval, the boxes still open."""

    unit = " boxes"

    def __init__(self, name: str, label: str, enabled: bool) -> None:
        super().__init__(name, enabled)
        self.label = label
        self.boxes = 0
        self.callback = self.report

    @classmethod
    def for_audit(cls, settings: Any, enabled: bool) -> BoxProgress:
        return cls(settings.name, settings.requirement.label, enabled)

    @display_guard
    def report(self, report: Any) -> None:
        """One :class:`verifier.pv.PVProgress`."""
        low, high = report.value
        self.bar.update(max(0, report.boxes - self.boxes))
        self.boxes = max(self.boxes, report.boxes)
        self.bar.set_postfix_str(f"{self.label} ∈ [{low:.4g}, {high:.4g}], "
                                 f"open {report.open_boxes}, {report.verdict}")


class PartitionProgress(AuditProgress):
    """Causal fairness: partitions analysed so far, the share of the query proven fair and
    proven biased everywhere (each partition's share under the uniform measure, counted once:
    only partitions the engine will not split again), and whether a witness of bias was found
    (``witnesses`` counts analyses that found one; a refined partition's children count
    again, so it is not the certificate's witness count)."""

    unit = " partitions"

    quantity = "biased_share"

    def __init__(self, name: str, enabled: bool) -> None:
        super().__init__(name, enabled)
        self.analysed = 0
        self.fair_share = 0.0
        self.biased_share = 0.0
        self.witnesses = 0
        self.history: list[tuple[float, tuple[float, float]]] = []
        self.shares: list[tuple[float, float, float]] = []
        """``(elapsed_s, certified fair, certified biased everywhere)`` after each chunk, and
        the certificate's at :meth:`finish` (the anytime profile of the certified shares)."""
        self.final: dict[str, float] | None = None
        self.started = time.monotonic()
        self._lock = threading.Lock()

    def engine_options(self) -> dict[str, Any]:
        return {"executor": ChunkCounter(InProcessExecutor(), self.chunk_done)}

    def chunk_done(self, problem: Any, lower: Any, upper: Any, outcome: Any) -> None:
        """Count one analysed chunk (:func:`verifier.causal.analysis.analyse_chunk`'s
        partitions ``lower``/``upper`` and its :class:`~verifier.causal.analysis.ChunkOutcome`)."""
        from verifier.causal.codes import BIASED_EVERYWHERE, BIASED_WITNESS, FAIR
        from verifier.causal.partition import uniform_share

        status = outcome.status
        share = uniform_share(problem, lower, upper)
        with self._lock:
            if self.final is not None:
                return
            self.analysed += int(status.size)
            self.fair_share += float(share[status == FAIR].sum())
            self.biased_share += float(share[status == BIASED_EVERYWHERE].sum())
            self.witnesses += int((status == BIASED_WITNESS).sum())
            elapsed = time.monotonic() - self.started
            self.history.append((elapsed, self.interval()))
            self.shares.append((elapsed, self.fair_share, self.biased_share))
            self._show(int(status.size))

    def finish(self, certificate: Any) -> None:
        """End the display on the certificate's numbers: its certified shares
        (``details["certified_shares"]``; the counted ones differ from them by the engine's
        outward rounding margin) are shown last and close :attr:`shares`. The counted shares
        and :meth:`observed` bounds stay as counted; chunks a pool finishes later change
        neither."""
        shares = certificate.details.get("certified_shares")
        if shares is None:
            return
        with self._lock:
            self.final = dict(shares)
            self.shares.append((time.monotonic() - self.started, float(shares["fair"]),
                                float(shares["biased_everywhere"])))
            self._show(0)

    @display_guard
    def _show(self, analysed: int) -> None:
        self.bar.update(analysed)
        self.bar.set_postfix_str(self.describe())

    def interval(self) -> tuple[float, float]:
        """The uniform biased share's certified interval so far (the rule of
        :func:`verifier.causal.share.uniform_bounds` on the partitions counted)."""
        high = min(1.0, max(self.biased_share, 1.0 - self.fair_share))
        return min(self.biased_share, high), high

    def observed(self) -> list[tuple[float, tuple[float, float]]]:
        return list(self.history)

    def describe(self) -> str:
        """Certified fair, certified biased everywhere and the rest (undecided so far; at the
        end the certificate's contains-bias and undecided shares) in % of the query."""
        if self.final is not None:
            fair, biased = self.final["fair"], self.final["biased_everywhere"]
            rest = (f"contains bias {100 * self.final['contains_bias']:.2f} %, "
                    f"undecided {100 * self.final['undecided']:.2f} %")
        else:
            fair, biased = self.fair_share, self.biased_share
            rest = (f"undecided {100 * max(0.0, 1.0 - fair - biased):.2f} %"
                    + (" (bias witnessed)" if self.witnesses else ""))
        return f"certified fair {100 * fair:.2f} %, biased {100 * biased:.2f} %, {rest}"


class TimeProgress(AuditProgress):
    """Exact-probability audits: seconds spent of the time budget (``None``: no limit),
    advanced every :data:`TICK_S` by a background thread."""

    def __init__(self, name: str, enabled: bool, budget_s: float | None) -> None:
        shown = ("{desc}: {percentage:3.0f}%|{bar}| {n:.1f}/{total_fmt} s of the time budget"
                 if budget_s is not None else "{desc}: {n:.1f} s (no time limit)")
        super().__init__(name, enabled, budget_s, shown)
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._shown = 0.0
        self._ticker = threading.Thread(target=self._tick, daemon=True)
        if enabled:
            self._ticker.start()

    @classmethod
    def for_audit(cls, settings: Any, enabled: bool) -> TimeProgress:
        return cls(settings.name, enabled, getattr(settings, "timeout_s", None))

    def _tick(self) -> None:
        while not self._stop.wait(TICK_S):
            self._advance()

    @display_guard
    def _advance(self) -> None:
        elapsed = time.monotonic() - self.started
        if self.bar.total is not None:
            elapsed = min(elapsed, float(self.bar.total))
        self.bar.update(elapsed - self._shown)
        self._shown = elapsed

    def close(self) -> None:
        self._stop.set()
        if self._ticker.is_alive():
            self._ticker.join()
        self._advance()
        super().close()


BARS: dict[str, type[AuditProgress]] = {
    "boxes": BoxProgress, "partitions": PartitionProgress, "time": TimeProgress}
"""The bar of each unit of progress (:data:`verifier.audits.kind.ProgressUnit`)."""


def audit_progress(settings: Any, enabled: bool) -> AuditProgress:
    """The progress bar of one audit, in its kind's unit of work (its ``PROGRESS``)."""
    return BARS[kind_module(settings.kind).PROGRESS].for_audit(settings, enabled)


class ChunkCounter(Executor):
    """An executor that runs tasks on ``inner`` and, for each chunk of causal-fairness
    partitions (:func:`verifier.causal.analysis.analyse_chunk`) that completes, calls
    ``on_chunk(problem, lower, upper, outcome)``. Other tasks pass through unchanged; a chunk
    that fails or is cancelled is not counted, and one that a pool finishes after the engine
    stopped waiting for it (its deadline) still is."""

    def __init__(self, inner: Executor,
                 on_chunk: Callable[[Any, Any, Any, Any], None]) -> None:
        self.inner = inner
        self.on_chunk = on_chunk

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        future = self.inner.submit(fn, *args, **kwargs)
        # the analysis (and torch) is loaded once a chunk is submitted, not before: a finite
        # query decided by enumeration never loads it
        analysis = sys.modules.get("verifier.causal.analysis")
        if analysis is not None and fn is analysis.analyse_chunk:
            call = inspect.signature(fn).bind(*args, **kwargs).arguments
            future.add_done_callback(
                lambda done: self._counted(done, call["problem"], call["lower"], call["upper"]))
        return future

    def _counted(self, done: Future, problem: Any, lower: Any, upper: Any) -> None:
        if not done.cancelled() and done.exception() is None:
            self.on_chunk(problem, lower, upper, done.result())

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.inner.shutdown(wait=wait, cancel_futures=cancel_futures)
