"""What ``certgate`` imports before it can answer: ``--help`` and a missing configuration
file import no verb machinery (torch, MLflow, scipy, pydantic, numba); the top-level help
lines the CLI shows without importing the verb modules are the ones those modules register.
Times are measured in ``benchmarks/startup.py``, not here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline_steps.cli import VERBS, _leaf_parsers, build_parser, command_group

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "mlflow", "scipy", "pydantic", "great_expectations", "pandas", "numba")

PROBE = """
import sys
from pipeline_steps.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as stop:
    code = stop.code
print(code, sorted(name for name in HEAVY if name in sys.modules), file=sys.stderr)
"""


def imported_after(*argv: str) -> tuple[str, str, str]:
    """``(stdout, exit code, heavy modules imported)`` of ``certgate argv`` in a fresh
    interpreter."""
    result = subprocess.run(
        [sys.executable, "-c", f"HEAVY = {HEAVY!r}" + PROBE, *argv], capture_output=True,
        text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False, timeout=120)
    code, heavy = result.stderr.strip().splitlines()[-1].split(" ", 1)
    return result.stdout, code, heavy


@pytest.mark.parametrize(("argv", "expected_code"), [
    (["--help"], "0"),
    (["--version"], "0"),
    (["population", "fit", "--help"], "0"),
    (["verify", "--help"], "0"),
    (["verify", "demographic-parity", "--help"], "0"),
    (["verify", "causal-fairness", "--help"], "0"),
    (["verify", "monotonicity", "--help"], "0"),
    (["bounds", "--help"], "0"),
    (["selfcorrect", "wrap", "--help"], "0"),
    (["config", "check", "missing.yaml"], "2"),
    (["run", "--config", "missing.yaml", "--json"], "2"),
    (["audit", "--no-such-option"], "2"),
])
def test_fast_paths_import_nothing_heavy(argv: list[str], expected_code: str) -> None:
    out, code, heavy = imported_after(*argv)
    assert code == expected_code
    assert heavy == "[]"
    if argv == ["--help"]:
        assert "usage: certgate" in out
    if argv == ["--version"]:
        from verifier import __version__

        assert out == f"certgate {__version__}\n"


def test_every_option_says_what_it_does() -> None:
    """A user reading a verb's --help meets no bare option: ``--form`` of demographic parity
    once listed its choices without saying that ``difference`` bounds |P[K | unprivileged]
    − P[K | privileged]| below GAMMA."""
    bare = [(parser.prog, action.option_strings) for parser in _leaf_parsers(build_parser())
            for action in parser._actions
            if action.option_strings and action.dest != "help" and not action.help]
    assert bare == []
    parity = next(parser for parser in _leaf_parsers(build_parser())
                  if parser.prog == "certgate verify demographic-parity")
    form = next(action for action in parity._actions if "--form" in action.option_strings)
    assert "must stay below GAMMA" in form.help


def test_help_lines_are_the_registered_ones() -> None:
    full = build_parser()._subparsers._group_actions[0]
    registered = {choice.dest: choice.help for choice in full._choices_actions}
    assert registered == {verb: help_line for verb, (_, help_line) in VERBS.items()}
    for verb in VERBS:
        assert full.choices[verb].get_default("func") is None or \
            full.choices[verb].get_default("func").__module__ == command_group(verb).__name__


def test_a_named_verb_is_parsed_in_full() -> None:
    args = build_parser(["bounds", "--model", "m.json", "--lower", "0", "--upper", "1"])\
        .parse_args(["bounds", "--model", "m.json", "--lower", "0", "--upper", "1"])
    assert args.model == "m.json" and args.func.__module__ == "pipeline_steps.cli.bounds_cmd"


HEAVY_FOR_VALIDATION = ("torch", "mlflow", "scipy", "great_expectations", "pandas")


@pytest.mark.parametrize("argv", [
    ["config", "check", "{config}"],
    ["run", "--config", "{config}", "--json"],
])
def test_a_config_error_imports_no_verb_machinery(tmp_path: Path, argv: list[str]) -> None:
    """Validating a configuration needs pydantic and the audit settings, never the engines
    that run the audits (torch), MLflow or the data checks."""
    config = tmp_path / "invalid.yaml"
    config.write_text("model: {uri: models:/m@candidate}\naudits:\n"
                      "  - {kind: causal_fairness, protected: [x0], max_biased_share: 0.1,"
                      " no_such_field: 1}\n")
    probe = PROBE.replace("name for name in HEAVY", "name for name in HEAVY_FOR_VALIDATION")
    result = subprocess.run(
        [sys.executable, "-c", f"HEAVY_FOR_VALIDATION = {HEAVY_FOR_VALIDATION!r}" + probe,
         *(part.format(config=config) for part in argv)],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False, timeout=120)
    code, heavy = result.stderr.strip().splitlines()[-1].split(" ", 1)
    assert code == "2"
    assert heavy == "[]"
    assert "audits[0].no_such_field: unknown key" in result.stderr + result.stdout


def _python_prints(code: str) -> str:
    """What a fresh interpreter running ``code`` from the checkout prints (stripped)."""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True,
                            timeout=120)
    return result.stdout.strip()


def test_every_audit_settings_model_imports_without_torch() -> None:
    """``configs.schema`` and every kind module's settings import without the engines; the
    engines are imported when an audit runs."""
    code = ("import sys, configs.schema, verifier.audits\n"
            "from verifier.audits import KINDS\n"
            "print(sorted(n for n in ('torch', 'mlflow', 'scipy', 'great_expectations', "
            "'pandas') if n in sys.modules), sorted(KINDS))")
    heavy, kinds = _python_prints(code).split("] ", 1)
    assert heavy == "["
    assert kinds == str(["causal_fairness", "demographic_parity", "local_robustness",
                         "monotonicity", "noise_robustness"])


def test_the_causal_engine_and_model_files_import_no_solver_nor_onnx() -> None:
    """The causal engine, the JSON/.nnet readers and the causal verb import neither scipy nor
    onnx or the torch converters, nor the exact check (it comes with the first partition that
    needs a MILP): a run decided by bounds starts without them (BENCHMARKS.md, "The first
    seconds, before and after")."""
    code = ("import sys, verifier.causal, verifier.convert, pipeline_steps.cli.causal_cmd\n"
            "print(sorted(n for n in ('scipy', 'onnx', 'verifier.causal.exact_check', "
            "'verifier.convert.torch_module', 'verifier.convert.onnx_graph') "
            "if n in sys.modules))")
    assert _python_prints(code) == "[]"


def test_the_exact_check_imports_no_scipy() -> None:
    """The causal exact check and its certificate call HiGHS through ``highspy`` and build their
    sparse matrices with numpy: the first MILP of a causal run imports no scipy (0.2–0.35 CPU
    s, BENCHMARKS.md, "scipy off the causal cold path")."""
    code = ("import sys, verifier.causal.exact_check, verifier.causal.milp_certificate\n"
            "print(sorted(n for n in sys.modules if n.split('.')[0] == 'scipy'))")
    assert _python_prints(code) == "[]"


def test_option_choices_listed_for_help_are_the_engines() -> None:
    """Choices the help lists without importing the engines are the engines' own."""
    from pipeline_steps.cli.bounds_cmd import METHOD_CHOICES
    from pipeline_steps.cli.selfcorrect_cmd import ON_BOTTOM_CHOICES
    from pipeline_steps.cli.verify_cmd import SPLIT_CHOICES
    from verifier.bounds import METHODS
    from verifier.pv import SPLIT_RULES
    from verifier.selfcorrect.scnet import ON_BOTTOM

    assert SPLIT_CHOICES == SPLIT_RULES
    assert METHOD_CHOICES == METHODS
    assert ON_BOTTOM_CHOICES == ON_BOTTOM
