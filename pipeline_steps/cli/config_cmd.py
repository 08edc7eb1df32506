"""``certgate config``: print the configuration's JSON Schema, or check a configuration file."""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline_steps.audit_inputs import check_deploy_constraints
from pipeline_steps.cli.output import JSON_HELP, emit_json, quiet_downloads
from verifier.errors import CertgateInputError

if TYPE_CHECKING:
    from configs.schema import CertgateConfig


def load_config(path: str | Path) -> CertgateConfig:
    """The configuration at ``path`` (:func:`configs.schema.load_config`). A missing file is
    reported before the schema is imported (the audit settings it validates against import
    the verifier, torch included), with the same message; a directory is said to be one."""
    if Path(path).is_dir():
        raise CertgateInputError(f"{path} is a directory; give the configuration's YAML file")
    if not Path(path).is_file():
        raise CertgateInputError(f"config file not found: {path}")
    from configs.schema import load_config as read_config

    return read_config(path)


DEPLOY_MODULE = "pipeline_steps.deploy"


def require_deploy_step(config: CertgateConfig) -> None:
    """Refuse, before anything runs, a configuration asking for a deploy step that this
    installation does not have, or whose constraints file does not exist or cannot be read
    as a constraint set (broken YAML, an unknown key or class: found after the audit and the
    gate, it stopped the run with the promotion alias already moved). Input names in the file
    resolve against its ``inputs:`` header or ``model.input_names``; a file naming inputs by
    the model's own names, with neither, is resolved once the model is loaded, before the
    audit (:func:`pipeline_steps.audit.bound_inputs`)."""
    if config.deploy is not None and importlib.util.find_spec(DEPLOY_MODULE) is None:
        raise CertgateInputError(
            "the configuration has a 'deploy' section, but this certgate has no deploy step "
            "yet; remove the section to run audit and gate only"
        )
    if config.deploy is not None and not config.deploy.constraints.is_file():
        raise CertgateInputError(
            f"deploy.constraints: constraints file not found: {config.deploy.constraints}"
        )
    if config.deploy is not None:
        check_deploy_constraints(config.deploy.constraints, config.model.input_names,
                                 names_may_come_later=True)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "config",
        help="audit configuration: JSON Schema and validation",
        description="Work with certgate audit configurations (YAML).",
    )
    verbs = parser.add_subparsers(dest="config_command", metavar="VERB", required=True)
    schema = verbs.add_parser("schema", help="print the JSON Schema of audit configurations")
    schema.add_argument("--json", action="store_true", help=JSON_HELP)
    schema.set_defaults(func=print_schema)
    check = verbs.add_parser(
        "check",
        help="validate a configuration file",
        description="Validate FILE (after ${ENV} expansion) and, for the exact-probability "
        "(WMI) audits, check they can run on the model and population when the file names them "
        "locally (what could not be checked is listed). Exit code 0 when valid, 2 with a "
        "one-line message naming the field otherwise.",
    )
    check.add_argument("file", help="YAML configuration file")
    check.add_argument("--json", action="store_true", help=JSON_HELP)
    check.set_defaults(func=check_file)


def print_schema(args: argparse.Namespace) -> int:
    from configs.schema import json_schema

    if args.json:
        emit_json(json_schema())
    else:
        print(json.dumps(json_schema(), indent=2))
    return 0


def check_file(args: argparse.Namespace) -> int:
    config = load_config(args.file)
    from pipeline_steps.preflight import preflight

    require_deploy_step(config)
    quiet_downloads()
    checked = preflight(config)
    names = ", ".join(audit.name for audit in config.audits)
    if args.json:
        emit_json({"file": args.file, "valid": True,
                   "audits": [audit.name for audit in config.audits],
                   "model": config.model.uri, "preflight": checked.as_json()})
        return 0
    print(f"{args.file}: valid ({len(config.audits)} audit(s): {names}; model {config.model.uri})")
    if checked.checked:
        print(f"  can run: {', '.join(checked.checked)} (checked on {checked.against})")
    if checked.unchecked:
        print(f"  not checked: {', '.join(checked.unchecked)}: {checked.reason}; certgate run "
              "checks them before any audit starts")
    return 0
