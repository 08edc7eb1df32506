"""The audited properties as WMI queries (paper 002, Eqs. 5, 6, 9, 10; its demographic parity,
Eq. 8, is certified by PV: :mod:`verifier.audits.demographic_parity`). Their public names are
re-exported by :mod:`verifier.wmi`.

Each property returns a :class:`~verifier.wmi.engine.WMIResult`: the probability that the
property holds (``violation_probability`` its complement), exact when every density of the
prior is piecewise polynomial (``exact``), otherwise a certified interval
``[probability_lower, probability_upper]`` from density envelopes (:mod:`verifier.wmi.envelope`)
refined until it is ``tolerance`` wide, decided against ``stop_at`` or ``timeout_s`` runs out
(then ``timed_out``, with the interval reached). ``stop_at = k`` stops as soon as the violation
probability is known to be ``>= k`` (``stopped_early``; ``probability`` is then an upper
bound).

The prior is any population model or distribution (:mod:`verifier.wmi.terms`): discrete
columns (binary, integer, one-hot groups) are summed over their values, each value fixing the
column in every copy of the input a property compares (summed once, never squared); values of
columns no model reads are merged into one query. Models are :class:`verifier.network.Network`
s, read as classifiers by :meth:`~verifier.network.Network.as_classifier` (argmax of the logits,
head dropped; a single output is a logit: class 1 iff ``logit > 0``), or fitted scikit-learn
``DecisionTreeClassifier`` / ``RandomForestClassifier``. The regressor form of monotonicity
compares output values and reads the logits only under no head or a sigmoid head (strictly
increasing per output, so ``f(x)[o] <= f(x′)[o]`` is the logits' event); it refuses another
head.

One module per job:

* the properties, each with its query builder (``*_queries``, which
  :mod:`verifier.wmi.check` runs without solving): :mod:`.local_robustness`,
  :mod:`.equivalence` (both reading one copy of the input, :mod:`.single_copy`),
  :mod:`.monotonicity` (its second draw of the feature, :mod:`.second_draw`) and
  :mod:`.noise_robustness`;
* :mod:`.run`: the run options and the one choice between region enumeration, the finite sum
  over the prior's points and box branching (:mod:`verifier.wmi.branched`);
* :mod:`.models`: the model wrapped, the columns it reads, its class at a point;
* :mod:`.queries`: the steps every query builder shares (terms checked and merged, the root
  limit, the deadline, the mass left out);
* :mod:`.layout`: a term's factors placed on integration coordinates, its root count;
* :mod:`.term_mass`: bounds of a term's mass without integrating a region.
"""
