"""certgate's Python API: certify a classifier from a notebook or a training script.

    import certgate
    population = certgate.fit_population(frame, domains={"age": (18, 100)})
    certificates = certgate.audit(model, population,
                                  [{"kind": "demographic_parity", "protected": "sex",
                                    "privileged": 1, "favorable_class": 1, "gamma": 0.8}])

A thin facade: the audits are :mod:`verifier.audits` (the same code ``certgate run`` and
``certgate verify`` run), models are read as ``certgate run`` reads them, and tables are
turned into population models as ``certgate population fit`` does. Importing it imports
neither torch nor MLflow; each function imports what it needs.
"""

from certgate.api import audit, audit_settings, fit_population, load_population

__all__ = ["audit", "audit_settings", "fit_population", "load_population"]
