"""``certgate verify causal-fairness``: JSON output and bad-input errors."""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from pipeline_steps.cli.causal_cmd import add_causal_parser, run
from tests.causal_nets import threshold_network
from verifier.convert import save_network
from verifier.errors import CertgateInputError

LIBRA = Path("/work/shared/benchmarks/libra")


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    verbs = parser.add_subparsers(dest="verb", required=True)
    add_causal_parser(verbs)
    return parser.parse_args(["causal-fairness", *argv])


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "net.json"
    save_network(threshold_network([1.0, 0.5], -0.75, ["x", "s"]), path)
    return path


def test_json_output_with_query(model: Path, tmp_path: Path, capsys) -> None:
    query = tmp_path / "query.json"
    query.write_text(json.dumps({"x": [0.0, 0.5]}))
    code = run(_parse(["--model", str(model), "--protected", "s", "--query", str(query),
                       "--target-width", "0.01", "--json"]))
    payload = json.loads(capsys.readouterr().out)
    assert code == 1 and payload["verdict"] == "biased"
    assert payload["query_fraction"] == pytest.approx(0.5)
    low, high = payload["biased_fraction"]  # biased iff x in (0.25, 0.5]: half the query
    assert low <= 0.5 <= high and high - low <= 0.01
    assert payload["fair_fraction"] + high == pytest.approx(1.0)
    assert payload["partitions"] >= 2 and payload["elapsed_s"] > 0
    for witness in payload["witnesses"]:
        assert witness["x"][0] == witness["x_other"][0]
        assert witness["classes"][0] != witness["classes"][1]
    shares = payload["certified_shares"]  # closed form: fair iff x <= 0.25, biased iff > 0.25
    assert shares["fair"] <= 0.5 and shares["biased_everywhere"] <= 0.5
    assert payload["provenance"] == {
        "model": str(model), "model_sha256": hashlib.sha256(model.read_bytes()).hexdigest()}
    assert shares["fair"] == pytest.approx(payload["fair_fraction"])
    assert shares["decided"] <= shares["fair"] + shares["biased_everywhere"]
    assert shares["decided"] >= 1.0 - 0.01 - shares["undecided"] - shares["contains_bias"]


def test_text_output_leads_with_the_certified_shares(model: Path, capsys) -> None:
    run(_parse(["--model", str(model), "--protected", "s", "--target-width", "0.01",
                "--no-progress"]))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "causal-fairness: biased"
    assert lines[1].startswith("  decided ") and "certified fair" in lines[1]
    assert "certified biased everywhere" in lines[1]
    assert lines[2].startswith("  contains bias (witnessed, not proven everywhere) ")


@pytest.mark.skipif(not LIBRA.is_dir(), reason="Libra benchmark folder not present")
def test_libra_formats_are_accepted(capsys) -> None:
    code = run(_parse([
        "--model", str(LIBRA / "toy/networks/toy.json"), "--protected", "x02",
        "--spec", str(LIBRA / "toy/specs/toy.json"), "--lower-edge", "0.25", "--max-unstable", "2",
        "--json",
    ]))
    payload = json.loads(capsys.readouterr().out)
    assert code == 1 and payload["verdict"] == "biased"
    assert payload["fair_fraction"] >= 0.5
    x = np.array([w["x"] for w in payload["witnesses"]])
    assert (x[:, 0] > 0.5354).all()


def test_fair_network_exit_code(tmp_path: Path, capsys) -> None:
    path = tmp_path / "fair.json"
    save_network(threshold_network([1.0, 0.0], -0.5, ["x", "s"]), path)
    assert run(_parse(["--model", str(path), "--protected", "s"])) == 0
    assert "causal-fairness: fair" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--protected", "age"], "'age' is not an input"),
        (["--protected", "s", "--lower-edge", "-1"], "--lower-edge: Input should be greater"),
        (["--protected", "s", "--max-unstable", "-2"], "--max-unstable: Input should be greater"),
        (["--protected", "s", "--query", "EMPTY"], "query box is empty"),
        (["--protected", "s", "--spec", "OVERLAP"], "overlaps"),
    ],
)
def test_bad_input(model: Path, tmp_path: Path, extra: list[str], message: str) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"x": [0.7, 0.2]}))
    overlap = tmp_path / "overlap.json"
    overlap.write_text(json.dumps({
        "sensitive": {"kind": "continuous", "inputs": ["s"], "split_value": 0.5},
        "one_hot_groups": [["x", "s"]],
    }))
    argv = [str(empty) if a == "EMPTY" else str(overlap) if a == "OVERLAP" else a for a in extra]
    with pytest.raises(CertgateInputError, match=message):
        run(_parse(["--model", str(model), *argv]))


def test_a_fairquant_network_loads_unchanged_with_its_domain_and_integer_points(capsys) -> None:
    """A single-logit ``.nnet`` file with its header's domain, integer inputs and two chosen
    protected values: the verb runs on it as it is, and its witnesses are integer points."""
    path = Path("/work/shared/benchmarks/fairquant/compas-1.nnet")
    code = run(_parse(["--model", str(path), "--protected", "x3", "--integer-inputs", "all",
                       "--protected-values", "0,1", "--timeout", "20", "--json"]))
    payload = json.loads(capsys.readouterr().out)
    assert code in (0, 1)
    low, high = payload["biased_fraction"]
    assert 0.0 <= low <= high <= 1.0 and payload["fair_fraction"] > 0.5
    for witness in payload["witnesses"]:
        assert all(float(v).is_integer() for v in witness["x"] + witness["x_other"])


def test_domain_and_value_options_are_checked(model: Path) -> None:
    with pytest.raises(CertgateInputError, match="--domain"):
        run(_parse(["--model", str(model), "--protected", "s", "--domain", "x=0-1"]))
