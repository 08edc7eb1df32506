"""``certgate demo``: the whole pipeline on the income classifier of paper 002 §V, locally.

Everything lives under one working directory (a sqlite store ``mlflow.db``, the artifacts,
the generated data, the HTML reports and the configuration used); no server is needed:

1. generate the income data (:mod:`pipeline_steps.income_data`), biased and unbiased, seeded;
2. per variant, train a small ReLU classifier (torch, CPU, one thread, seeded) on
   (hpw, yexp, hw), fit the default population model of (female, hpw, yexp, hw) on separate
   rows (a Bayesian network learned from them, ``female`` a parent of every feature), and
   register the pair as the next version of ``income_classifier`` with alias ``candidate``;
3. audit the candidate (demographic parity between women and men, certified) and gate it:
   the biased version is proven to violate the 80 % rule and is not promoted; the unbiased
   version is proven to satisfy it and becomes ``champion``;
4. deploy the self-correcting variant of the champion (alias ``safe``).

The audited network takes ``female`` as its first input with all-zero weights: the classifier
itself never reads the protected attribute (as in the paper), yet the audit can condition the
population on it. Verdicts come from the audit's certificates only.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

import configs
from configs.schema import CertgateConfig, DeploySettings, TrackingSettings, load_config
from pipeline_steps.audit import AuditOutcome, audit_model
from pipeline_steps.deploy import DeployRecord, run_deploy
from pipeline_steps.gate import GateDecision, gate_certificates
from pipeline_steps.income_data import (
    FEATURES,
    HPW_BOUNDS,
    PROTECTED,
    YEXP_BOUNDS,
    Variant,
    generate_income_data,
)
from registry_hooks.audit_runs import ensure_experiments, training_run
from registry_hooks.certgate_model import log_model
from registry_hooks.connection import Registry, connect
from verifier.errors import CertgateInputError
from verifier.population import PopulationModel
from verifier.population.fitting import fit_bayesian_network, infer_features
from verifier.yaml_documents import dump_yaml

MODEL_NAME = "income_classifier"
CANDIDATE_ALIAS = "candidate"
INPUT_COLUMNS: tuple[str, ...] = (PROTECTED, *FEATURES)
CLASS_NAMES: tuple[str, ...] = ("low", "high")
DEMO_VARIANTS: tuple[Variant, ...] = ("biased", "unbiased")
DEFAULT_WORKDIR = Path("certgate-demo")
MARKER = ".certgate-demo"
DEMO_CONFIG = Path(configs.__file__).resolve().parent / "demo.yaml"
TRAINING_EXPERIMENT = "certgate-demo-training"
TRAIN_ROWS = 10_000
POPULATION_ROWS = 10_000
TEST_ROWS = 5_000
HIDDEN = 8
TRAIN_STEPS = 300
LEARNING_RATE = 0.05
SEEDS = {"train": 1, "population": 2, "test": 3, "torch": 0}
YEXP_BINS = [10.0, 15.0, 20.0, 25.0, 30.0]
OWNED_ENTRIES = (MARKER, "mlflow.db", "artifacts", "data", "reports", "config.yaml")

Say = Callable[[str], None]


@dataclass
class VersionResult:
    """One registered classifier and what the pipeline decided about it."""

    variant: str
    version: str
    accuracy: float
    sample_parity_ratio: float
    audit: AuditOutcome
    gate: GateDecision

    def summary(self, config: CertgateConfig) -> dict[str, Any]:
        """JSON-ready: version, sample statistics, certified intervals, gate decision."""
        audits = {}
        for settings in config.audits:
            certificate = self.audit.certificates[settings.name]
            low, high = certificate.bounds[settings.requirement.quantity]
            audits[settings.name] = {
                "verdict": certificate.verdict,
                settings.requirement.label: [float(low), float(high)],
                "requirement": settings.requirement.describe(),
            }
        return {
            "variant": self.variant, "version": self.version, "accuracy": self.accuracy,
            "sample_parity_ratio": self.sample_parity_ratio, "audit_run": self.audit.run_id,
            "audits": audits, "gate": self.gate.outcome,
            "gate_reasons": self.gate.reasons_by_group(),
            "promoted_alias": self.gate.promoted_alias,
        }


@dataclass
class DemoResult:
    """Everything the demo did, and where it is."""

    workdir: Path
    tracking_uri: str
    config_path: Path
    versions: list[VersionResult] = field(default_factory=list)
    deployed: DeployRecord | None = None
    aliases: dict[str, str] = field(default_factory=dict)

    def summary(self, config: CertgateConfig) -> dict[str, Any]:
        """The JSON summary line of ``certgate demo --json``."""
        deployed = None
        if self.deployed is not None:
            deployed = {"version": self.deployed.version, "alias": self.deployed.alias,
                        "uri": self.deployed.uri, "source": self.deployed.source_uri}
        return {
            "model": MODEL_NAME, "workdir": str(self.workdir), "tracking_uri": self.tracking_uri,
            "config": str(self.config_path),
            "versions": [version.summary(config) for version in self.versions],
            "deployed": deployed, "aliases": self.aliases,
            "mlflow_ui": mlflow_ui_command(self.tracking_uri),
        }


def mlflow_ui_command(tracking_uri: str) -> str:
    """The command that browses the demo's store."""
    return f"mlflow ui --backend-store-uri {tracking_uri}"


# ------------------------------------------------------------------------------ workdir


def prepare_workdir(workdir: Path) -> Path:
    """Create ``workdir`` (absolute), clearing what an earlier demo wrote there.

    Raises:
        CertgateInputError: ``workdir`` is a file, or a non-empty directory that no demo
            created (nothing in it is touched).
    """
    workdir = workdir.expanduser().resolve()
    if workdir.exists() and not workdir.is_dir():
        raise CertgateInputError(f"--workdir {workdir} is a file, not a directory")
    if workdir.is_dir() and any(workdir.iterdir()) and not (workdir / MARKER).is_file():
        raise CertgateInputError(
            f"--workdir {workdir} is not empty and was not created by certgate demo; "
            "choose another directory"
        )
    for name in OWNED_ENTRIES:
        entry = workdir / name
        if entry.is_dir():
            shutil.rmtree(entry)
        elif entry.exists():
            entry.unlink()
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / MARKER).write_text("created by certgate demo; rerunning the demo replaces it\n",
                                  encoding="utf-8")
    return workdir


def demo_config(workdir: Path, source: Path = DEMO_CONFIG) -> CertgateConfig:
    """``configs/demo.yaml`` with tracking and registry both on the sqlite store under
    ``workdir`` (whatever ``MLFLOW_*`` variables say); a relative constraints path is resolved
    against the directory holding ``configs/`` (the repository root, or site-packages)."""
    config = load_config(source)
    store = f"sqlite:///{workdir / 'mlflow.db'}"
    tracking = TrackingSettings(tracking_uri=store, registry_uri=store,
                                experiment=config.tracking.experiment)
    update: dict[str, Any] = {"tracking": tracking}
    if config.deploy is not None and not config.deploy.constraints.is_absolute():
        constraints = source.resolve().parent.parent / config.deploy.constraints
        update["deploy"] = DeploySettings(**{**config.deploy.model_dump(),
                                            "constraints": constraints})
    return config.model_copy(update=update)


def write_config(config: CertgateConfig, path: Path) -> Path:
    """The configuration the demo ran, as YAML (``certgate run --config PATH`` reruns it)."""
    path.write_text(dump_yaml(config.model_dump(mode="json")),
                    encoding="utf-8")
    return path


def create_experiments(workdir: Path, names: list[str]) -> None:
    """Experiments whose artifacts live under ``workdir/artifacts`` (MLflow would otherwise
    put them under the current directory)."""
    ensure_experiments(names, workdir / "artifacts")


# ------------------------------------------------------------------------------ models


def train_classifier(frame: pd.DataFrame, *, seed: int = SEEDS["torch"],
                     steps: int = TRAIN_STEPS) -> torch.nn.Sequential:
    """A 4-``HIDDEN``-2 ReLU classifier (float32) over :data:`INPUT_COLUMNS` trained on
    ``frame``'s (hpw, yexp, hw) and label ``y``, on one thread, seeded.

    Guarantees: the weights of the ``female`` input are exactly zero (the prediction never
    depends on it), and the standardisation used in training is folded into the first layer,
    so the network reads raw feature values.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train(frame, seed, steps)
    finally:
        torch.set_num_threads(threads)


def _train(frame: pd.DataFrame, seed: int, steps: int) -> torch.nn.Sequential:
    features = frame[list(FEATURES)].to_numpy(dtype=np.float64)
    mean, std = features.mean(axis=0), features.std(axis=0) + 1e-9
    torch.manual_seed(seed)
    hidden = torch.nn.Linear(len(FEATURES), HIDDEN)
    output = torch.nn.Linear(HIDDEN, len(CLASS_NAMES))
    trained = torch.nn.Sequential(hidden, torch.nn.ReLU(), output)
    inputs = torch.tensor((features - mean) / std, dtype=torch.float32)
    targets = torch.tensor(frame["y"].to_numpy(dtype=np.int64))
    optimiser = torch.optim.Adam(trained.parameters(), lr=LEARNING_RATE)
    for _ in range(steps):
        optimiser.zero_grad()
        loss = torch.nn.functional.cross_entropy(trained(inputs), targets)
        loss.backward()
        optimiser.step()
    first = torch.nn.Linear(len(INPUT_COLUMNS), HIDDEN)
    with torch.no_grad():
        weight = hidden.weight / torch.tensor(std, dtype=torch.float32)
        first.weight.zero_()
        first.weight[:, 1:] = weight
        first.bias.copy_(hidden.bias - weight @ torch.tensor(mean, dtype=torch.float32))
    return torch.nn.Sequential(first, torch.nn.ReLU(), output).eval()


def predict(model: torch.nn.Module, frame: pd.DataFrame) -> np.ndarray:
    """The predicted classes of ``frame``'s rows."""
    inputs = torch.tensor(frame[list(INPUT_COLUMNS)].to_numpy(dtype=np.float32))
    with torch.no_grad():
        return model(inputs).argmax(dim=1).numpy()


def sample_statistics(model: torch.nn.Module, frame: pd.DataFrame) -> tuple[float, float]:
    """Accuracy and the *sample* parity ratio P[high | woman] / P[high | man] on ``frame``
    (an estimate for the narrative; the gate reads only the certified ratio)."""
    predicted = predict(model, frame)
    accuracy = float((predicted == frame["y"].to_numpy()).mean())
    women = frame[PROTECTED].to_numpy() == 1
    men_rate = float(predicted[~women].mean())
    ratio = float(predicted[women].mean()) / men_rate if men_rate > 0 else float("inf")
    return accuracy, ratio


def fit_demo_population(frame: pd.DataFrame) -> PopulationModel:
    """The population the demo audits: what ``certgate population fit`` writes for
    ``frame``'s :data:`INPUT_COLUMNS` with ``--protected female`` and no other option — a
    Bayesian network learned from the rows, ``female`` a parent of every feature, on
    histograms bounded by the data's range."""
    from certgate.population_data import fit_population

    return fit_population(frame[list(INPUT_COLUMNS)], protected=PROTECTED)


def income_prior(frame: pd.DataFrame) -> PopulationModel:
    """The hand-made income prior of the weighted-model-integration benchmarks (paper 002
    §V): a Bayesian network over :data:`INPUT_COLUMNS` fitted on ``frame`` in which ``hw``
    depends on ``female`` and ``yexp`` (cut at :data:`YEXP_BINS`), the rest independent
    (truncated) normals on their generator's domains."""
    data = frame[list(INPUT_COLUMNS)]
    features = infer_features(data, domains={"hpw": HPW_BOUNDS, "yexp": YEXP_BOUNDS})
    return fit_bayesian_network(data, features, parents={"hw": [PROTECTED, "yexp"]},
                                bins={"yexp": YEXP_BINS})


# ------------------------------------------------------------------------------ the demo


def _interval(bounds: tuple[float, float]) -> str:
    return f"[{bounds[0]:.4f}, {bounds[1]:.4f}]"


def register_variant(variant: Variant, registry: Registry, workdir: Path,
                     say: Say) -> tuple[str, float, float]:
    """Generate, train, fit and register one variant with alias ``candidate``; returns the
    version, accuracy and sample parity ratio. The data goes to ``workdir/data``."""
    data_dir = workdir / "data"
    data_dir.mkdir(exist_ok=True)
    train = generate_income_data(TRAIN_ROWS, variant=variant, seed=SEEDS["train"])
    population_rows = generate_income_data(POPULATION_ROWS, variant=variant,
                                           seed=SEEDS["population"])
    test = generate_income_data(TEST_ROWS, variant=variant, seed=SEEDS["test"])
    for name, frame in (("train", train), ("population", population_rows), ("test", test)):
        frame.to_csv(data_dir / f"income_{variant}_{name}.csv", index=False)
    model = train_classifier(train)
    accuracy, ratio = sample_statistics(model, test)
    population = fit_demo_population(population_rows)
    params = {"variant": variant, "architecture": f"4-{HIDDEN}-2 ReLU MLP",
              "train_rows": TRAIN_ROWS, "steps": TRAIN_STEPS}
    metrics = {"accuracy": accuracy, "sample_parity_ratio": ratio}
    with training_run(TRAINING_EXPERIMENT, f"train {variant}", params, metrics):
        info = log_model(
            model, population, registered_model_name=MODEL_NAME, alias=CANDIDATE_ALIAS,
            registry=registry, input_names=list(INPUT_COLUMNS), output_names=list(CLASS_NAMES),
            tags={"variant": variant},
        )
    version = str(info.registered_model_version)
    say(f"registered models:/{MODEL_NAME}/{version} ({variant}): test accuracy "
        f"{accuracy:.1%}, sample parity ratio {ratio:.3f}; alias {CANDIDATE_ALIAS!r} -> "
        f"version {version}")
    return version, accuracy, ratio


def audit_and_gate(config: CertgateConfig, registry: Registry, variant: str, version: str,
                   accuracy: float, ratio: float, reports: Path, say: Say) -> VersionResult:
    """Audit ``models:/MODEL_NAME@candidate`` and gate it; says what was certified."""
    uri = f"models:/{MODEL_NAME}@{CANDIDATE_ALIAS}"
    outcome = audit_model(config, model_uri=uri, progress=False, registry=registry,
                        report_dir=reports)
    if outcome.model_version != version:
        raise CertgateInputError(f"{uri} resolved to version {outcome.model_version}, "
                                 f"expected {version}")
    decision = gate_certificates(config, outcome.certificates, registry, outcome.model_name,
                                 outcome.model_version)
    for settings in config.audits:
        certificate = outcome.certificates[settings.name]
        requirement = settings.requirement
        say(f"  audit of version {version} ({variant}): {settings.name} {certificate.verdict}, "
            f"certified {requirement.label} in "
            f"{_interval(certificate.bounds[requirement.quantity])} "
            f"(requirement {requirement.describe()}, audit run {outcome.run_id})")
    say(f"  gate for version {version}: {decision.outcome.upper()}")
    for group, reasons in decision.reasons_by_group().items():
        for reason in reasons:
            say(f"    {group}: {reason}")
    if decision.promoted_alias:
        say(f"    alias {decision.promoted_alias!r} -> version {version}")
    elif config.gate.promote_alias:
        say(f"    alias {config.gate.promote_alias!r} not moved")
    if outcome.report_path:
        say(f"    report: {outcome.report_path}")
    return VersionResult(variant, version, accuracy, ratio, outcome, decision)


def run_demo(workdir: Path = DEFAULT_WORKDIR, *, say: Say = print,
             config_source: Path = DEMO_CONFIG) -> tuple[DemoResult, CertgateConfig]:
    """Run the demo (module docstring) under ``workdir``; returns what it did and the
    configuration it used (also written to ``workdir/config.yaml``)."""
    workdir = prepare_workdir(workdir)
    config = demo_config(workdir, config_source)
    registry = connect(config.tracking.tracking_uri, config.tracking.registry_uri)
    create_experiments(workdir, [TRAINING_EXPERIMENT, config.tracking.experiment])
    result = DemoResult(workdir, registry.tracking_uri,
                        write_config(config, workdir / "config.yaml"))
    reports = workdir / "reports"
    say(f"certgate demo: income classifier of paper 002 §V in {workdir}")
    for step, variant in enumerate(DEMO_VARIANTS, start=1):
        say(f"== {step}. the {variant} classifier becomes the candidate")
        version, accuracy, ratio = register_variant(variant, registry, workdir, say)
        result.versions.append(audit_and_gate(config, registry, variant, version, accuracy,
                                              ratio, reports, say))
    champion = next((v for v in result.versions if v.gate.outcome == "passed"), None)
    if config.deploy is not None and champion is not None:
        say(f"== 3. the self-correcting variant of version {champion.version}")
        result.deployed = run_deploy(config, registry=registry, model_name=MODEL_NAME,
                                     model_version=champion.version)
        say(f"  {result.deployed}")
    aliases = registry.client.get_registered_model(MODEL_NAME).aliases
    result.aliases = {alias: str(version) for alias, version in sorted(aliases.items())}
    say("== the registry now: " + ", ".join(f"{alias} -> version {version}"
                                            for alias, version in result.aliases.items()))
    say(f"configuration used: {result.config_path}")
    say(f"HTML reports: {reports}")
    say(f"browse everything: {mlflow_ui_command(result.tracking_uri)}")
    return result, config
