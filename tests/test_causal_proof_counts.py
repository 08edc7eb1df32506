"""The exact checks' proof counts reach the causal certificate, the CLI's JSON and text and the
audit's metrics unchanged: every count equals the sum the exact checks themselves returned
(recorded around the real :func:`~verifier.causal.exact_check.check_partition`)."""

from __future__ import annotations

import pytest

from configs.schema import parse_config
from pipeline_steps.audit import headline_metrics
from pipeline_steps.cli.causal_cmd import _print_text, summary
from tests.causal_nets import random_network
from verifier.audits import run_audit
from verifier.audits.causal_fairness import work_done
from verifier.causal import exact_check
from verifier.causal.exact_check import ExactOutcome
from verifier.causal.proof_tally import COST_KEYS, ProofTally


def test_a_tally_adds_field_by_field_and_names_its_cost_keys() -> None:
    total = ProofTally(1, 2, 3, 4, 5)
    total.add(ProofTally(10, 20, 30, 40, 50))
    assert total == ProofTally(11, 22, 33, 44, 55)
    assert total.as_cost() == {"proofs_relaxation": 11.0, "proofs_branch_and_bound": 22.0,
                               "proof_lps": 33.0, "proof_searches_unproven": 44.0,
                               "milp_infeasible_refused": 55.0}


def test_the_certificate_counts_the_proofs_the_exact_checks_made(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    recorded, solved = ProofTally(), []
    check = exact_check.check_partition

    def recording(*args, **kwargs) -> ExactOutcome:
        outcome = check(*args, **kwargs)
        assert outcome.proofs is not None
        recorded.add(outcome.proofs)
        solved.append(outcome.solved)
        return outcome

    monkeypatch.setattr(exact_check, "check_partition", recording)
    network = random_network(3, [5, 5], 3)
    settings = parse_config({"model": {"uri": "m.onnx"}, "audits": [{
        "kind": "causal_fairness", "name": "c", "protected": [network.input_names[2]],
        "max_biased_share": 0.5, "max_unstable": 100, "timeout_s": 60,
        "target_width": 0.05}]}).audits[0]
    certificate = run_audit(settings, network, None)
    assert recorded.relaxation + recorded.certified > 0, "the instance must need proofs"
    cost = certificate.cost
    assert cost["milps"] == sum(solved)
    assert {key: cost[key] for key in COST_KEYS.values()} == recorded.as_cost()

    payload = summary(certificate)
    assert payload["proofs"] == {key: int(value) for key, value in recorded.as_cost().items()}
    _print_text(payload)
    assert (f"exact-check proofs: {recorded.relaxation} by the LP relaxation, "
            f"{recorded.certified} by branch and bound ({recorded.nodes} LPs); "
            f"{recorded.unproven} searches unproven, {recorded.refused} MILP 'infeasible' "
            "refused") in capsys.readouterr().out
    metrics = headline_metrics(settings, certificate)
    assert {key: metrics[f"c.{key}"] for key in COST_KEYS.values()} == recorded.as_cost()
    assert (f"{recorded.relaxation + recorded.certified:,} class pair"
            in work_done(certificate))
