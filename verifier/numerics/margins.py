"""The relative and absolute margins certgate widens float results by, one value each.

Two ideas, each with its own constant (they used to share the name ``REL_MARGIN`` with two
values):

* :data:`FUNCTION_REL_MARGIN` (``1e-12``) — the relative error allowed for one library
  function (``exp``, ``log1p``, ``erf``, ``ndtr``: documented within a few units in the last
  place, so ``1e-12``, about 4,500 units, is a wide safety factor) and for a short chain of
  float operations on probabilities whose count is small and not tracked one by one. It is
  relative to the *value*, which is right for these: each is a product, quotient or
  monotone function of positive quantities, where no cancellation can occur.
* :data:`SOUNDNESS_REL_MARGIN` (``1e-9``) and :data:`SOUNDNESS_ABS_MARGIN` (``1e-12``) —
  the margin rule of network bounds (:mod:`verifier.bounds`): a bound is a sum of products
  that may cancel, so its error is relative to the *magnitude* (the same sum over absolute
  values), not to the value; the forward error of any evaluation order is at most
  ``γ_n × magnitude`` with ``n`` the factors and terms per path, and ``1e-9`` dominates
  ``γ_n`` for networks up to about 10⁵ neurons deep and wide. It is the relative margin of
  networks with a folded layer whose roundings were not counted; every other network gets
  the counted ``2·gamma(n)`` instead (:func:`verifier.numerics.rounding.network_rel_margin`,
  ``n`` including the roundings its folds counted),
  far smaller on deep networks, where ``1e-9`` times a magnitude grown through 32 layers
  was several output units. The absolute part covers products that underflow (their error
  is absolute, at most ``2⁻¹⁰⁷⁴`` each).

Operations whose rounding is tracked one by one use :mod:`verifier.numerics.rounding`
instead (one float step per correctly rounded operation, ``γ_r`` for counted sums).
"""

from __future__ import annotations

FUNCTION_REL_MARGIN = 1e-12
SOUNDNESS_REL_MARGIN = 1e-9
SOUNDNESS_ABS_MARGIN = 1e-12
