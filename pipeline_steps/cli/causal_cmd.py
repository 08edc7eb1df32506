"""``certgate verify causal-fairness``: certify causal fairness by input partitioning.

``verify_cmd.register`` attaches this command with :func:`add_causal_parser`.
"""

from __future__ import annotations

import argparse
from typing import Any

from pipeline_steps.cli.engine_signals import stop_engine_on_signals
from pipeline_steps.cli.exit_codes import exit_for
from pipeline_steps.cli.inputs import (
    MODEL_HELP,
    add_input_names,
    bound_network,
    model_network,
    named_network,
    read_certified,
)
from pipeline_steps.cli.output import JSON_HELP, add_no_progress, emit_json, shows_progress
from pipeline_steps.cli.settings_options import RenamedOption, settings_from_args
from verifier.certificate import Certificate, to_jsonable
from verifier.executor import abandon, make_executor


def add_causal_parser(verbs: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``causal-fairness`` to the ``verify`` sub-commands; returns its parser."""
    parser = verbs.add_parser(
        "causal-fairness",
        help="certify that the class never depends on a protected feature (input partitioning)",
        description=(
            "Partition the space of the other inputs; prove each partition fair, find a "
            "re-checked witness of bias, or exclude it when the budget (L, U) is exhausted. "
            "Leads with the certified shares of the query (certified fair + certified biased "
            "everywhere = decided; then contains bias, undecided), then the certified bounds "
            "on the biased share. Exit code 0 when proven fair, "
            "1 when biased or undecided, 2 on bad input."
        ),
    )
    parser.add_argument("--model", required=True, help=MODEL_HELP)
    add_input_names(parser)
    parser.add_argument("--protected", required=True,
                        help="protected input name, or comma-separated names of a one-hot "
                             "group")
    parser.add_argument("--sensitive", action=RenamedOption, new="--protected")
    parser.add_argument("--spec", help="specification JSON (Libra benchmark format)")
    parser.add_argument("--query", help="query box JSON (Libra format or {name: [lo, hi]}); "
                        "its range of a protected input conditions the population share")
    parser.add_argument("--lower-edge", type=float,
                        help="L: smallest partition edge (default 0: never exclude)")
    parser.add_argument("--max-unstable", type=int,
                        help="U: most unstable ReLUs handed to the exact check (default 8)")
    parser.add_argument("--split-value", type=float,
                        help="cell boundary of a continuous protected input without --spec "
                             "(default 0.5)")
    parser.add_argument("--measure", choices=("uniform", "population"),
                        help="which biased share --max-biased-share judges (default uniform)")
    parser.add_argument("--max-biased-share", type=float,
                        help="verdict 'satisfied' iff the certified biased share (under "
                             "--measure) is below this; without it the verdict is fair/biased")
    parser.add_argument("--population", help="population model (JSON) for a weighted share")
    parser.add_argument("--domain",
                        help="inputs' ranges NAME=MIN:MAX,... (default: the population's "
                             "support, else a .nnet header's, else [0, 1])")
    parser.add_argument("--integer-inputs",
                        help="all, or NAME,... of integer-coded inputs (default: the "
                             "population's integer columns)")
    parser.add_argument("--protected-values",
                        help="compare only these values of the protected input: numbers, or "
                             "input names of a one-hot group (default: every value)")
    parser.add_argument("--sensitive-values", action=RenamedOption, new="--protected-values")
    parser.add_argument("--executor", default="local",
                        help="local, process or dask[=ADDRESS] (default local)")
    parser.add_argument("--workers", type=int, help="worker count for process/dask pools")
    parser.add_argument("--timeout", type=float, help="time budget in seconds (default 60)")
    parser.add_argument("--target-width", type=float,
                        help="stop refining once the biased-share interval is this narrow")
    parser.add_argument("--chunk-size", type=int,
                        help="partitions per task, bounded together (default: 256 to 2048, fewer "
                        "for larger networks)")
    parser.add_argument("--json", action="store_true", help=JSON_HELP)
    add_no_progress(parser)
    parser.set_defaults(func=run)
    return parser


def _network_and_population(args: argparse.Namespace) -> tuple[Any, Any, dict[str, str]]:
    """The network, the optional population model, and what the certificate names of their
    files (:func:`~pipeline_steps.cli.inputs.read_certified`). With a population model the
    two are bound by name (:mod:`verifier.audits.binding`); without one, inputs are addressed
    by the names the model records or ``--input-names`` gives (``x0, x1, …`` for an unnamed
    file)."""
    network, read = read_certified(args.model, "--model", lambda: model_network(args))
    if not args.population:
        if args.input_names is not None:
            network = named_network(args, network)
        return network, None, read
    from verifier.population import load_population

    population, population_read = read_certified(
        args.population, "--population", lambda: load_population(args.population))
    network, population = bound_network(args, network, population)
    return network, population, {**read, **population_read}


def audit_settings(args: argparse.Namespace) -> Any:
    """The ``causal_fairness`` settings of the options (``--max-biased-share`` defaults to 1:
    then only the engine's fair/biased verdict is reported)."""
    from verifier.audits import CausalFairnessSettings
    from verifier.causal import load_query_box

    named = [name.strip() for name in args.protected.split(",") if name.strip()]
    values: dict[str, Any] = {
        "protected": named,
        "protected_kind": "one_hot" if len(named) > 1 else "continuous",
        "split_values": [args.split_value] if args.split_value is not None else None,
        "query": load_query_box(args.query) if args.query else None,
        "domain": _domain(args.domain) if args.domain else None,
        "integer_inputs": _integer_inputs(args.integer_inputs),
        "protected_values": _protected_values(args.protected_values),
    }
    if args.max_biased_share is None:
        values["max_biased_share"] = 1.0
    return settings_from_args(CausalFairnessSettings, args, **values)


def _domain(text: str) -> dict[str, tuple[float, float]]:
    """``NAME=MIN:MAX,...`` as ``{name: (min, max)}``."""
    from verifier.causal import CausalInputError

    domain = {}
    for item in (part.strip() for part in text.split(",") if part.strip()):
        name, _, bounds = item.partition("=")
        low, _, high = bounds.partition(":")
        try:
            domain[name.strip()] = (float(low), float(high))
        except ValueError as error:
            raise CausalInputError(f"--domain {item!r}: expected NAME=MIN:MAX") from error
    return domain


def _integer_inputs(text: str | None) -> str | list[str] | None:
    if text is None or text.strip() == "all":
        return None if text is None else "all"
    return [name.strip() for name in text.split(",") if name.strip()]


def _protected_values(text: str | None) -> list[float] | list[str] | None:
    if text is None:
        return None
    items = [item.strip() for item in text.split(",") if item.strip()]
    try:
        return [float(item) for item in items]
    except ValueError:
        return items


def _model_domain(path: str) -> tuple[Any, Any] | None:
    """The input domain a ``.nnet`` header declares (other formats declare none)."""
    if not path.endswith(".nnet"):
        return None
    from verifier.convert import load_classifier

    return load_classifier(path)[1]


def _libra_problem(args: argparse.Namespace, network: Any) -> Any:
    """The problem of a Libra specification file (protected inputs, splits, one-hot groups)."""
    from verifier.causal import CausalInputError, build_problem, load_libra_spec, load_query_box

    named = [name.strip() for name in args.protected.split(",") if name.strip()]
    spec = load_libra_spec(args.spec)
    if not set(named) <= set(spec["protected"]):
        raise CausalInputError(
            f"--protected {args.protected} does not match the specification's protected "
            f"inputs {', '.join(spec['protected'])}"
        )
    query = load_query_box(args.query) if args.query else None
    return build_problem(network, **spec, query=query)


def certify(args: argparse.Namespace, settings: Any, bar: Any) -> Certificate:
    """The certificate of the command's options and ``settings`` (:func:`audit_settings`),
    counted and shown by ``bar`` (a :class:`pipeline_steps.progress.PartitionProgress`, which
    ends on the certificate's numbers; the bar is not closed here). Without ``--spec`` this is the
    ``causal_fairness`` audit kind (:mod:`verifier.audits.causal_fairness`), run as
    ``certgate run`` runs it; a Libra ``--spec`` file describes the problem itself."""
    from pipeline_steps.progress import ChunkCounter
    from verifier.audits import causal_fairness
    from verifier.causal import certify_causal_fairness

    network, population, read = _network_and_population(args)
    engine = {} if args.chunk_size is None else {"chunk_size": args.chunk_size}
    executor = ChunkCounter(make_executor(args.executor, args.workers), bar.chunk_done)
    try:
        if args.spec:
            problem = _libra_problem(args, network)
            raw = certify_causal_fairness(
                problem, causal_fairness.engine_settings(settings, None, **engine), executor,
                population)
            certificate = causal_fairness.judged(settings, raw)
        else:
            from verifier.audits import run_audit

            certificate = run_audit(settings, network, population, None, None,
                                    executor=executor, model_domain=_model_domain(args.model),
                                    **engine)
        bar.finish(certificate)
    finally:
        # chunks still running after the certificate (a deadline's or a stop's) are not
        # wanted: a graceful shutdown waited for them, up to 4 s a busy local Dask worker
        abandon(executor.inner)
    certificate.provenance.update(read)
    return certificate


def run(args: argparse.Namespace) -> int:
    """Run the certification (:func:`certify`, with a progress bar on stderr) and print the
    result (JSON with ``--json``)."""
    from pipeline_steps.progress import PartitionProgress

    settings = audit_settings(args)
    bar = PartitionProgress(settings.name, shows_progress(args))
    try:
        with stop_engine_on_signals():
            certificate = certify(args, settings, bar)
    finally:
        bar.close()
    payload = summary(certificate)
    judged = args.max_biased_share is not None
    if judged:
        payload["requirement"] = settings.requirement.describe()
    else:
        payload["verdict"] = certificate.details["causal_verdict"]
    if args.json:
        emit_json(to_jsonable({**payload, "provenance": certificate.provenance}))
    else:
        _print_text(payload)
    return exit_for(certificate.verdict if judged else payload["verdict"])


def summary(certificate: Certificate) -> dict[str, Any]:
    """The command's JSON object: the certified shares first (``certified_shares``: fair and
    biased everywhere, both proven, their sum ``decided``, then ``contains_bias`` and
    ``undecided``), then the fractions of the query (uniform), witnesses, cost: MILPs and how
    the exact checks proved their pairs absent (``proofs``: the certificate's cost keys of
    :data:`~verifier.causal.proof_tally.COST_KEYS`); ``stopped_by: executor_lost`` when the
    run ended early because its executor was lost, ``interrupted`` when a signal stopped it."""
    from verifier.causal.proof_tally import COST_KEYS

    details = certificate.details
    payload: dict[str, Any] = {
        "verdict": certificate.verdict,
        "certified_shares": dict(details["certified_shares"]),
        "fair_fraction": details["fair_fraction"],
        "biased_fraction": list(certificate.bounds["biased_share"]),
        "excluded_fraction": details["excluded_fraction"],
        "query_fraction": details["query_fraction"],
        "regions": details["regions"],
        "witnesses": details["witnesses"],
        "partitions": int(certificate.cost["partitions"]),
        "milps": int(certificate.cost["milps"]),
        "proofs": {key: int(certificate.cost[key]) for key in COST_KEYS.values()},
        "elapsed_s": certificate.cost["elapsed_s"],
    }
    if "biased_share_population" in certificate.bounds:
        payload["biased_fraction_population"] = list(certificate.bounds["biased_share_population"])
        payload["query_mass_population"] = details["query_mass_population"]
        if "population_measured_partitions" in details:
            payload["population_measured_partitions"] = details["population_measured_partitions"]
    if "stopped_by" in details:
        payload["stopped_by"] = details["stopped_by"]
    return payload


def _print_text(payload: dict[str, Any]) -> None:
    low, high = payload["biased_fraction"]
    shares = payload["certified_shares"]
    print(f"causal-fairness: {payload['verdict']}")
    print(f"  decided {shares['decided']:.4%} of the query: certified fair {shares['fair']:.4%}"
          f" + certified biased everywhere {shares['biased_everywhere']:.4%}")
    print(f"  contains bias (witnessed, not proven everywhere) {shares['contains_bias']:.4%}, "
          f"undecided {shares['undecided']:.4%}")
    print(f"  fair {payload['fair_fraction']:.4%}, excluded {payload['excluded_fraction']:.4%} "
          f"of the query ({payload['query_fraction']:.4%} of the input space)")
    print(f"  biased share: [{low:.4%}, {high:.4%}]")
    if "biased_fraction_population" in payload:
        p_low, p_high = payload["biased_fraction_population"]
        q_low, q_high = payload["query_mass_population"]
        print(f"  biased share (population): [{p_low:.4%}, {p_high:.4%}] of the query, whose "
              f"population mass is in [{q_low:.6g}, {q_high:.6g}]")
        if q_low <= 0.0:
            print("  the query's mass is not separated from 0 by any float enclosure: the "
                  "share conditional on it is not bounded")
        if "population_measured_partitions" in payload:
            print(f"  the population measure reached {payload['population_measured_partitions']}"
                  f" of the {payload['partitions']} partitions by the deadline (the others "
                  "counted soundly, so the population share is wider)")
    if payload.get("stopped_by") == "executor_lost":
        print("  stopped before the budget: the executor was lost (its Dask scheduler went "
              "away); the shares are those reached")
    elif payload.get("stopped_by") == "interrupted":
        print("  stopped before the budget: interrupted (SIGINT or SIGTERM); the shares are "
              "those reached")
    print(f"  {payload['partitions']} partitions, {payload['milps']} MILPs, "
          f"{payload['elapsed_s']:.2f} s, {len(payload['witnesses'])} witnesses shown")
    proofs = payload["proofs"]
    if not (payload["milps"] or any(proofs.values())):
        return  # no exact check ran
    print(f"  exact-check proofs: {proofs['proofs_relaxation']} by the LP relaxation, "
          f"{proofs['proofs_branch_and_bound']} by branch and bound ({proofs['proof_lps']} LPs); "
          f"{proofs['proof_searches_unproven']} searches unproven, "
          f"{proofs['milp_infeasible_refused']} MILP 'infeasible' refused")
