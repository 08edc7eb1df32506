"""What a gate demands of one certificate, and the one rule that turns an interval into a
verdict. Every audit kind (:mod:`verifier.audits`) judges its certified interval with
:func:`judged_verdict`; the gate compares the same interval with the same
:class:`Requirement`, so the command line, the pipeline and the gate cannot disagree."""

from __future__ import annotations

from collections.abc import Mapping
from types import UnionType
from typing import Any, ClassVar, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, model_validator

from verifier.errors import CertgateInputError
from verifier.numerics import Comparison, Verdict, interval_verdict, proven_fail, proven_pass

NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_]*$"


def renamed_message(kind: str, old: str, new: str) -> str:
    """The one message that refuses an old key (or option) ``old`` of ``kind``, naming
    ``new``."""
    return f"{kind} setting {old!r} is now called {new!r}: rename it"


def _renamed_in_schema(schema: dict[str, Any], model: type[BaseModel]) -> None:
    """The JSON Schema of a settings model with each old key of its ``RENAMED`` as a
    ``deprecated`` property that no value satisfies, its description naming the new key:
    refused exactly as validation refuses it, with the fix where an editor shows it."""
    renamed: Mapping[str, str] = getattr(model, "RENAMED", {})
    kind = schema["properties"].get("kind", {}).get("const", model.__name__)
    for old, new in renamed.items():
        schema["properties"][old] = {"not": {}, "deprecated": True,
                                     "description": renamed_message(kind, old, new)}


def _is_number(annotation: Any) -> bool:
    """Whether ``annotation`` takes numbers and not booleans (``float``, ``int | None``)."""
    members = set(get_args(annotation)) if get_origin(annotation) in (Union, UnionType) \
        else {annotation}
    return bool(members & {int, float}) and bool not in members


CLASS_FIELDS = frozenset({"favorable_class", "expected_class"})
"""Settings fields that hold a class of the model's output, by index."""


class StrictSettings(BaseModel):
    """Base of every settings model: unknown keys rejected, values frozen.

    ``RENAMED`` maps a field's old key to its new one (one vocabulary across kinds: see the
    README's "Names"): the old key is refused with an error naming the new key
    (:func:`renamed_message`), and the JSON Schema lists it as a deprecated property that no
    value satisfies (:func:`_renamed_in_schema`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra=_renamed_in_schema)

    RENAMED: ClassVar[Mapping[str, str]] = {}
    BOOLEAN_NUMBERS: ClassVar[frozenset[str]] = frozenset()
    """Number fields where ``True``/``False`` mean 1/0 (a binary column's value); every other
    number field refuses a boolean (:meth:`_no_boolean_numbers`)."""

    @model_validator(mode="before")
    @classmethod
    def _no_boolean_numbers(cls, data: Any) -> Any:
        """A boolean given for a number (``gamma: true``, ``min_probability: false`` in YAML)
        is refused naming the field: pydantic would read it as the threshold 1 or 0, which
        the user did not write."""
        if not isinstance(data, Mapping):
            return data
        for key, value in data.items():
            field = cls.model_fields.get(key) if isinstance(key, str) else None
            if (isinstance(value, bool) and field is not None
                    and key not in cls.BOOLEAN_NUMBERS and _is_number(field.annotation)):
                raise ValueError(f"{key} is a number, got the boolean {value} (YAML reads "
                                 "unquoted true/false as booleans)")
        return data

    @model_validator(mode="before")
    @classmethod
    def _classes_by_index(cls, data: Any) -> Any:
        """A class given by name (``favorable_class: approved``) is refused naming the field
        and saying that classes are indices, the class's position among the model's outputs
        (settings are read before the model, so a name is not looked up among the output
        names a model may record)."""
        if not isinstance(data, Mapping):
            return data
        for key in CLASS_FIELDS & set(data):
            value = data[key]
            if isinstance(value, str) and is_class_name(value):
                raise ValueError(f"{key}: {class_name_message(value)}")
        return data

    @model_validator(mode="before")
    @classmethod
    def _renamed_keys(cls, data: Any) -> Any:
        if not cls.RENAMED or not isinstance(data, Mapping):
            return data
        for old, new in cls.RENAMED.items():
            if old in data:
                raise ValueError(renamed_message(str(data.get("kind", cls.__name__)), old, new))
        return data

    def protected_feature(self) -> str | None:
        """The one protected input whose dependents a population-fidelity record lists
        (:func:`verifier.audits.fidelity.population_assumptions`); ``None``: the kind's record
        lists none."""
        return None

    def fingerprint_fields(self) -> dict[str, Any]:
        """The settings as JSON under the keys they had when fingerprints were first taken
        (renamed fields under their old keys), so that a rename alone does not make an
        audited model version due again."""
        old_of = {new: old for old, new in self.RENAMED.items()}
        return {old_of.get(key, key): value
                for key, value in self.model_dump(mode="json").items()}


class Requirement(StrictSettings):
    """What a gate demands of one certificate: ``bounds[quantity]`` must lie entirely on the
    passing side of ``threshold``. ``>``/``>=``: its lower bound exceeds / reaches it;
    ``<``/``<=``: its upper bound stays below / at most at it."""

    quantity: str
    label: str
    comparison: Comparison
    threshold: float

    def proven_pass(self, lower: float, upper: float) -> bool:
        """True only when every value in ``[lower, upper]`` passes."""
        return proven_pass(self.comparison, self.threshold, lower, upper)

    def proven_fail(self, lower: float, upper: float) -> bool:
        """True only when no value in ``[lower, upper]`` passes."""
        return proven_fail(self.comparison, self.threshold, lower, upper)

    @property
    def greater_is_better(self) -> bool:
        """True for ``>``/``>=``: the lower bound is the side that must clear the threshold."""
        return self.comparison in (">", ">=")

    def describe(self) -> str:
        """``label comparison threshold``, the threshold written exactly (the shortest text
        that reads back as the same float: ``0.8``, ``0.7916666666666553``), as the
        ``certgate.<audit>.requirement`` tag records it."""
        return f"{self.label} {self.comparison} {exact_text(self.threshold)}"

    def interval_text(self, low: float, high: float) -> str:
        """``[low, high]`` to six significant digits, each end with as many more as it takes
        to differ from the threshold's text when it differs from the threshold (a lower bound
        1e-12 above γ = 0.8 is not shown as 0.8). The gate's reasons write a certified
        interval beside its threshold with it, the HTML report each end (:meth:`bound_text`)."""
        return f"[{self.bound_text(low)}, {self.bound_text(high)}]"

    def bound_text(self, value: float) -> str:
        """One end of :meth:`interval_text`: six significant digits, more until its text
        differs from the threshold's when the value does."""
        for digits in range(6, 18):
            text = f"{value:.{digits}g}"
            if value == self.threshold or text != f"{self.threshold:.{digits}g}":
                return text
        return exact_text(value)


def is_class_name(text: str) -> bool:
    """Whether ``text`` names a class rather than writing a number (an index, or a number
    that the usual checks refuse as one)."""
    try:
        float(text)
    except ValueError:
        return True
    return False


def class_name_message(name: str) -> str:
    """The one refusal of a class given by name (settings and command-line options)."""
    return (f"a class is given by its index, got the name {name!r}: classes are the indices "
            "0..n-1 of the model's n outputs (a single-logit model: 0 and 1), not names; give "
            "the name's position among the model's output names (for a target encoded with "
            "scikit-learn's LabelEncoder: encoder.classes_.tolist().index("
            f"{name!r}))")


def exact_text(value: float) -> str:
    """The shortest text that reads back as ``value`` (``repr``), an integral value without
    ``.0``."""
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def check_class(field: str, cls: int, model: Any) -> None:
    """Raise a :class:`~verifier.errors.CertgateInputError` naming ``field`` when the class
    ``cls`` is not one the network ``model`` predicts (its classifier's outputs: a single
    logit has classes 0 and 1). Other models (``None``, a tree) pass: their engines check."""
    from verifier.network import Network

    if not isinstance(model, Network):
        return
    classes = model.as_classifier().output_size
    if not 0 <= cls < classes:
        raise CertgateInputError(f"{field} {cls} is out of range: the model has {classes} "
                                 f"classes (0..{classes - 1})")


def judged_verdict(requirement: Requirement, low: float, high: float) -> Verdict:
    """``satisfied`` when ``[low, high]`` is a proven pass of ``requirement``, ``violated``
    when a proven fail, else ``unknown`` (the table of :mod:`verifier.numerics.comparison`)."""
    return interval_verdict(requirement.comparison, requirement.threshold, low, high)


def effective_timeout(own: float | None, budget: float | None) -> float | None:
    """The time limit an audit runs under: the tighter of its settings' ``timeout_s`` and the
    caller's ``budget`` (``None`` on both: no limit)."""
    limits = [limit for limit in (own, budget) if limit is not None]
    return min(limits) if limits else None
