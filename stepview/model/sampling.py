"""Sampling parameters as plain values, checked by the same rules vLLM applies.

The UI must not import vLLM, yet the add-prompt form has to say "top_p must be in (0, 1]"
next to the field *before* anything is submitted. So the rules of
``vllm.SamplingParams._verify_args`` (vLLM 0.32) are restated here over plain values, with
the same wording. The driver still builds a real ``SamplingParams`` and turns anything vLLM
refuses into a rejected request, so a rule that drifts in a later vLLM costs a late message,
never a crash.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

# vLLM's VLLM_MAX_N_SEQUENCES default; the engine may be configured lower, never higher here.
MAX_N = 16384
# vLLM's default ``--max-logprobs``.
DEFAULT_MAX_LOGPROBS = 20
# Below this temperature vLLM samples greedily.
GREEDY_EPS = 1e-5
# The seeds torch's generator takes. vLLM 0.32 accepts any int in ``add_request`` and fails
# the whole ``step()`` (every request in the batch) on one outside this range, so stepview
# refuses it up front.
SEED_MIN = -(2**63)
SEED_MAX = 2**64 - 1


@dataclass(frozen=True, slots=True)
class SamplingSpec:
    """The user-facing subset of ``vllm.SamplingParams``, with vLLM's defaults."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    max_tokens: int = 16
    n: int = 1
    seed: int | None = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    stop: tuple[str, ...] = field(default=())
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    # Generate max_tokens whatever the model says (synthetic load: exact output lengths).
    ignore_eos: bool = False

    @property
    def greedy(self) -> bool:
        return self.temperature < GREEDY_EPS

    def errors(self, max_logprobs: int = DEFAULT_MAX_LOGPROBS) -> dict[str, str]:
        """Field name -> message for every rule this spec breaks (empty when valid)."""
        return _check(self, max_logprobs)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values; ``stop`` becomes a list.

        Read field by field: every field is a plain value (``stop`` a tuple of strings), so
        ``dataclasses.asdict``'s recursive deep copy gave the same dict 20 times slower, and
        every request record (results files, traces, each replayed snapshot) builds one."""
        data = {name: getattr(self, name) for name in _FIELD_NAMES}
        data["stop"] = list(self.stop)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SamplingSpec:
        """Build from JSON values. Unknown keys raise ``ValueError`` naming them.

        Types are coerced like a form would (``"0.8"`` is not accepted: JSON has numbers),
        but range rules are left to :meth:`errors` so callers can report all problems at once.
        """
        known = set(_FIELD_NAMES)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown sampling parameter(s): {', '.join(unknown)}")
        kwargs: dict[str, Any] = {}
        for name, value in data.items():
            kwargs[name] = _coerce(name, value)
        return cls(**kwargs)

    def summary(self) -> str:
        """A short, stable description for a table row, e.g. ``greedy lp=1`` or ``T0.8 k5 n2``."""
        parts = ["greedy" if self.greedy else f"T{self.temperature:g}"]
        if self.top_p != 1.0:
            parts.append(f"p{self.top_p:g}")
        if self.top_k > 0:
            parts.append(f"k{self.top_k}")
        if self.min_p:
            parts.append(f"minp{self.min_p:g}")
        if self.n != 1:
            parts.append(f"n{self.n}")
        if self.logprobs is not None:
            parts.append(f"lp{self.logprobs}")
        if self.seed is not None:
            parts.append(f"s{self.seed}")
        return " ".join(parts)


_FIELD_NAMES = tuple(f.name for f in fields(SamplingSpec))
"""The spec's fields in declaration order (the order of :meth:`SamplingSpec.to_dict`'s keys)."""
# Read off the spec's own annotations (strings, under ``from __future__ import annotations``),
# so a field added to :class:`SamplingSpec` is coerced by its declared type without a second list.
_INT_FIELDS = frozenset(f.name for f in fields(SamplingSpec) if f.type in ("int", "int | None"))
_OPTIONAL_FIELDS = frozenset(f.name for f in fields(SamplingSpec) if str(f.type).endswith("None"))


def _coerce(name: str, value: Any) -> Any:
    if value is None and name in _OPTIONAL_FIELDS:
        return None
    if name == "ignore_eos":
        if not isinstance(value, bool):
            raise ValueError(f"ignore_eos must be true or false, got {value!r}")
        return value
    if name == "stop":
        if isinstance(value, str):
            return (value,)
        if isinstance(value, list | tuple) and all(isinstance(s, str) for s in value):
            return tuple(value)
        raise ValueError("stop must be a string or a list of strings")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if name in _INT_FIELDS:
        if isinstance(value, float) and not value.is_integer():
            raise ValueError(f"{name} must be an integer, got {value!r}")
        return int(value)
    return float(value)


def _check(s: SamplingSpec, max_logprobs: int) -> dict[str, str]:
    """vLLM 0.32's ``SamplingParams._verify_args`` and greedy check, over plain values."""
    err: dict[str, str] = {}
    if s.n < 1:
        err["n"] = f"n must be at least 1, got {s.n}."
    elif s.n > MAX_N:
        err["n"] = f"n must be at most {MAX_N}, got {s.n}."
    if not -2.0 <= s.presence_penalty <= 2.0:
        err["presence_penalty"] = f"presence_penalty must be in [-2, 2], got {s.presence_penalty}."
    if not -2.0 <= s.frequency_penalty <= 2.0:
        err["frequency_penalty"] = (
            f"frequency_penalty must be in [-2, 2], got {s.frequency_penalty}."
        )
    if not math.isfinite(s.repetition_penalty):
        err["repetition_penalty"] = (
            f"repetition_penalty must be a finite number, got {s.repetition_penalty}."
        )
    elif s.repetition_penalty <= 0.0:
        err["repetition_penalty"] = (
            f"repetition_penalty must be greater than zero, got {s.repetition_penalty}."
        )
    if not math.isfinite(s.temperature):
        err["temperature"] = f"temperature must be a finite number, got {s.temperature}."
    elif s.temperature < 0.0:
        err["temperature"] = f"temperature must be non-negative, got {s.temperature}."
    elif s.temperature > 2.0:
        err["temperature"] = f"temperature must be in [0, 2], got {s.temperature}."
    if not 0.0 < s.top_p <= 1.0:
        err["top_p"] = f"top_p must be in (0, 1], got {s.top_p}."
    if s.top_k < -1:
        err["top_k"] = f"top_k must be 0 (disable), or at least 1, got {s.top_k}."
    if not 0.0 <= s.min_p <= 1.0:
        err["min_p"] = f"min_p must be in [0, 1], got {s.min_p}."
    if s.max_tokens < 1:
        err["max_tokens"] = f"max_tokens must be at least 1, got {s.max_tokens}."
    if s.seed is not None and not SEED_MIN <= s.seed <= SEED_MAX:
        err["seed"] = f"seed must be between -2**63 and 2**64-1, got {s.seed}."
    for name in ("logprobs", "prompt_logprobs"):
        problem = _logprobs_problem(name, getattr(s, name), max_logprobs)
        if problem is not None:
            err[name] = problem
    if any(not stop for stop in s.stop):
        err["stop"] = "stop cannot contain an empty string."
    if "n" not in err and "temperature" not in err and s.greedy and s.n > 1:
        err["n"] = f"n must be 1 when using greedy sampling (temperature 0), got {s.n}."
    return err


def _logprobs_problem(name: str, value: int | None, max_logprobs: int) -> str | None:
    """vLLM's rule for ``logprobs`` and ``prompt_logprobs`` (``SamplingParams.verify``).

    -1 asks for the whole vocabulary, which vLLM then checks against ``max_logprobs`` like
    any number: it passes only when the engine allows any count (``--max-logprobs -1``). No
    real vocabulary is as small as a ``max_logprobs``, so the form refuses -1 otherwise
    instead of letting the engine reject the request ("2048 > 20") after it was sent.
    """
    if value is None:
        return None
    if value < -1:
        return f"{name} must be non-negative or -1, got {value}."
    if max_logprobs == -1:
        return None
    if value == -1:
        return (
            f"{name} -1 means the whole vocabulary, more than the engine's max_logprobs "
            f"({max_logprobs}); use 0 to {max_logprobs}."
        )
    if value > max_logprobs:
        return f"{name} must be at most {max_logprobs} (the engine's max_logprobs), got {value}."
    return None


# -- form input ------------------------------------------------------------------------------

# Every field but ``ignore_eos``, which only a synthetic load sets (exact output lengths), in
# the order the spec lists them: the add form's layout follows the one list of fields.
FORM_FIELDS: tuple[str, ...] = tuple(name for name in _FIELD_NAMES if name != "ignore_eos")

# A form field longer than this is not a number anyone meant to type.
_MAX_NUMBER_CHARS = 32


def parse_form(
    values: Mapping[str, str], max_logprobs: int = DEFAULT_MAX_LOGPROBS
) -> tuple[SamplingSpec | None, dict[str, str]]:
    """Turn the form's text fields into a spec, or explain per field what is wrong.

    Empty optional fields mean "not set"; an empty required field falls back to vLLM's
    default. ``stop`` is one stop string per line (quotes and unicode kept as typed); since a
    line cannot hold a line break, ``\\n``, ``\\t`` and ``\\r`` in it stand for one and
    ``\\\\`` for a backslash (see :func:`unescape_stop`).
    """
    errors: dict[str, str] = {}
    kwargs: dict[str, Any] = {}
    defaults = SamplingSpec()
    for name in FORM_FIELDS:
        raw = values.get(name, "")
        if name == "stop":
            kwargs["stop"] = tuple(unescape_stop(line) for line in raw.split("\n") if line != "")
            continue
        text = raw.strip()
        if text == "":
            kwargs[name] = None if name in _OPTIONAL_FIELDS else getattr(defaults, name)
            continue
        if len(text) > _MAX_NUMBER_CHARS:
            errors[name] = f"{name}: value is too long to be a number."
            continue
        try:
            kwargs[name] = _parse_number(name, text)
        except ValueError as exc:
            errors[name] = str(exc)
    if errors:
        return None, errors
    spec = SamplingSpec(**kwargs)
    errors = spec.errors(max_logprobs)
    return (None, errors) if errors else (spec, {})


def _parse_number(name: str, text: str) -> int | float:
    if name in _INT_FIELDS:
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"{name} must be a whole number, got {text!r}.") from None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name} must be a number, got {text!r}.") from None
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {text!r}.")
    return value


def form_values(spec: SamplingSpec) -> dict[str, str]:
    """The inverse of :func:`parse_form`: text for each field (used by presets)."""
    out: dict[str, str] = {}
    for name in FORM_FIELDS:
        value = getattr(spec, name)
        if name == "stop":
            out[name] = "\n".join(escape_stop(stop) for stop in value)
        elif value is None:
            out[name] = ""
        elif isinstance(value, float):
            out[name] = f"{value:g}"
        else:
            out[name] = str(value)
    return out


_STOP_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}
_STOP_ESCAPED = {value: "\\" + key for key, value in _STOP_ESCAPES.items()}


def unescape_stop(line: str) -> str:
    """One line of the form's stop field as the stop string it means.

    Stop strings often hold line breaks (``"\\n\\n"`` ends a paragraph) but the field has one
    string per line, so ``\\n``, ``\\t``, ``\\r`` and ``\\\\`` are read as escapes; any other
    backslash stays as typed.
    """
    if "\\" not in line:
        return line
    out: list[str] = []
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\" and i + 1 < len(line) and line[i + 1] in _STOP_ESCAPES:
            out.append(_STOP_ESCAPES[line[i + 1]])
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def escape_stop(stop: str) -> str:
    """The inverse of :func:`unescape_stop`: a stop string as one line of the form's field."""
    return "".join(_STOP_ESCAPED.get(ch, ch) for ch in stop)
