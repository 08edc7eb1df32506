"""``certgate config``: print the configuration's JSON Schema, or check a configuration file."""

from __future__ import annotations

import argparse
import json

from configs.schema import json_schema, load_config
from pipeline_steps.cli.output import emit_json


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "config",
        help="audit configuration: JSON Schema and validation",
        description="Work with certgate audit configurations (YAML).",
    )
    verbs = parser.add_subparsers(dest="config_command", metavar="VERB", required=True)
    schema = verbs.add_parser("schema", help="print the JSON Schema of audit configurations")
    schema.add_argument("--json", action="store_true", help="print one JSON object")
    schema.set_defaults(func=print_schema)
    check = verbs.add_parser(
        "check",
        help="validate a configuration file",
        description="Validate FILE (after ${ENV} expansion). Exit code 0 when valid, 2 with a "
        "one-line message naming the field otherwise.",
    )
    check.add_argument("file", help="YAML configuration file")
    check.add_argument("--json", action="store_true", help="print one JSON object")
    check.set_defaults(func=check_file)


def print_schema(args: argparse.Namespace) -> int:
    if args.json:
        emit_json(json_schema())
    else:
        print(json.dumps(json_schema(), indent=2))
    return 0


def check_file(args: argparse.Namespace) -> int:
    config = load_config(args.file)
    names = ", ".join(audit.name for audit in config.audits)
    if args.json:
        emit_json({"file": args.file, "valid": True,
                   "audits": [audit.name for audit in config.audits],
                   "model": config.model.uri})
        return 0
    print(f"{args.file}: valid ({len(config.audits)} audit(s): {names}; model {config.model.uri})")
    return 0
