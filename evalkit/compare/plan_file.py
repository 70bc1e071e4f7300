"""The pre-registered plan file (`evalkit plan --out plan.yaml`): written before the runs, read by
`evalkit compare --plan`.

One YAML document: a schema version, the plan's name, α, the target power, the gate (which
measures every cell must show non-inferior), the loss claims' family (Holm over a declared size,
or a fixed sequence with every cell in its testing order), the floor/ceiling limits,
and per task × length cell the exact-match margin in pp, the paired log-prob margin in
nats/token and n from an exact power computation. Margins carry their unit in the text
("1 pp", "0.01 nats/token") so a number in the wrong unit is refused, not misread.

`content_hash` is the SHA-256 of the canonical JSON of everything else: a plan edited after
it was written no longer matches its own hash and is refused; runs started with `run --plan`
record the hash, and compare refuses a plan whose hash differs from theirs.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.errors import InputError
from evalkit.user_files import regular_file

SCHEMA_VERSION = 1
KIND = "evalkit-plan"
GATES = ("exact_match", "logprob", "both")
PROCEDURES = ("holm", "fixed-sequence")  # the loss claims' family-wise procedure
EM_UNIT, LOGPROB_UNIT = "pp", "nats/token"
NI_ALPHA, LOSS_ALPHA = 0.025, 0.05  # one-sided NI per cell; two-sided exact McNemar for a loss
FLOOR, CEILING = 0.02, 0.98  # baseline accuracy at which a cell cannot lose / cannot gain
_QUANTITY = re.compile(r"^\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(\S.*?)?\s*$")


def content_hash(body: dict[str, Any]) -> str:
    """sha256 of the plan's canonical JSON, without its own `content_hash` field."""
    data = {k: v for k, v in body.items() if k != "content_hash"}
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def quantity(value: float, unit: str) -> str:
    return f"{value:g} {unit}"


def parse_quantity(text: Any, unit: str, where: str) -> float:
    """'1 pp' -> 1.0; a bare number or another unit is refused with the expected form."""
    match = _QUANTITY.match(text) if isinstance(text, str) else None
    if match is None or match.group(2) is None:
        raise InputError(f"{where}: give a number with its unit, e.g. '1 {unit}', got {text!r:.40}")
    if match.group(2) != unit:
        raise InputError(f"{where}: the margin must be in {unit}, got {text!r:.40} (unit {match.group(2)!r})")
    value = float(match.group(1))
    if not (math.isfinite(value) and value > 0):
        raise InputError(f"{where}: the margin must be positive, got {text!r:.40}")
    return value


@dataclass(frozen=True)
class PlanCell:
    task: str
    length: int | None
    em_margin: float  # fraction (1 pp = 0.01)
    logprob_margin: float  # nats/token
    n: int | None
    n_max: int | None = None  # the sequential design's most questions (`evalkit ab`), when planned

    @property
    def key(self) -> tuple[str, int | None]:
        return (self.task, self.length)

    @property
    def name(self) -> str:
        return self.task + ("" if self.length is None else f" @ {self.length}")


@dataclass(frozen=True)
class Plan:
    name: str
    path: str
    content_hash: str
    alpha: float  # one-sided, for every cell's NI test (intersection-union: no adjustment)
    loss_alpha: float  # two-sided, the exact McNemar loss test, Holm over the family
    power: float
    gate: str
    family_procedure: str
    family_size: int
    floor: float
    ceiling: float
    cells: tuple[PlanCell, ...]
    family_order: tuple[str, ...] = ()  # fixed sequence: every cell's name, in testing order
    calibration: dict[str, Any] | None = None  # the log-prob margin's calibration, when the plan has one
    sequential: dict[str, Any] | None = None  # {"looks", "spending", ...} for `evalkit ab`, when planned

    def cell(self, task: str, length: int | None) -> PlanCell | None:
        return next((c for c in self.cells if c.key == (task, length)), None)

    def identity(self) -> dict[str, Any]:
        """What a report or a run manifest records of the plan."""
        return {"name": self.name, "path": self.path, "content_hash": self.content_hash}


def _field(body: dict[str, Any], name: str, kinds: tuple[type, ...], source: str) -> Any:
    value = body.get(name)
    if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
        want = " or ".join(k.__name__ for k in kinds)
        raise InputError(f"{source}: field {name!r} must be {want}, got {value!r:.40}")
    return value


def _fraction(body: dict[str, Any], name: str, source: str) -> float:
    value = float(_field(body, name, (int, float), source))
    if not 0.0 < value < 1.0:
        raise InputError(f"{source}: {name} must be in (0, 1), got {value}")
    return value


def _cell(raw: Any, i: int, source: str) -> PlanCell:
    where = f"{source}: cells[{i}]"
    if not isinstance(raw, dict):
        raise InputError(f"{where} is not a mapping")
    task = _field(raw, "task", (str,), where)
    length = raw.get("length")
    if length is not None and (isinstance(length, bool) or not isinstance(length, int)):
        raise InputError(f"{where}.length must be an integer or null, got {length!r:.40}")
    em = parse_quantity(raw.get("exact_match_margin"), EM_UNIT, f"{where}.exact_match_margin") / 100.0
    if em >= 1.0:
        raise InputError(f"{where}.exact_match_margin must be below 100 pp")
    lp = parse_quantity(raw.get("logprob_margin"), LOGPROB_UNIT, f"{where}.logprob_margin")
    n = raw.get("n")
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise InputError(f"{where}.n must be a positive integer or null, got {n!r:.40}")
    n_max = raw.get("n_max")
    if n_max is not None and (isinstance(n_max, bool) or not isinstance(n_max, int) or n_max < 1):
        raise InputError(f"{where}.n_max must be a positive integer or null, got {n_max!r:.40}")
    return PlanCell(task, length, em, lp, n, n_max)


def plan_from_dict(body: Any, source: str) -> Plan:
    """Validate a parsed plan (hash first: an edited plan is refused before anything else)."""
    if not isinstance(body, dict) or body.get("kind") != KIND:
        raise InputError(f"{source}: not an evalkit plan (write one with `evalkit plan ... --out plan.yaml`)")
    if body.get("schema_version") != SCHEMA_VERSION:
        raise InputError(
            f"{source}: plan schema_version {body.get('schema_version')!r}; "
            f"this evalkit reads {SCHEMA_VERSION}"
        )
    recorded = body.get("content_hash")
    actual = content_hash(body)
    if recorded != actual:
        raise InputError(
            f"{source}: the plan was edited after it was written (content hash {actual[:19]}… != recorded "
            f"{str(recorded)[:19]}…); a pre-registered plan cannot change: "
            "write a new one with `evalkit plan`"
        )
    gate = _field(body, "gate", (str,), source)
    if gate not in GATES:
        raise InputError(f"{source}: gate must be one of {', '.join(GATES)}, got {gate!r:.40}")
    family = _field(body, "family", (dict,), source)
    procedure = _field(family, "procedure", (str,), f"{source}: family")
    if procedure not in PROCEDURES:
        raise InputError(
            f"{source}: family.procedure must be one of {', '.join(PROCEDURES)}, got {procedure!r:.40}"
        )
    raw_cells = _field(body, "cells", (list,), source)
    if not raw_cells:
        raise InputError(f"{source}: the plan has no cells")
    cells = tuple(_cell(raw, i, source) for i, raw in enumerate(raw_cells))
    keys = [c.key for c in cells]
    if len(set(keys)) != len(keys):
        raise InputError(f"{source}: a task × length cell is listed twice")
    size = _field(family, "size", (int,), f"{source}: family")
    if size < len(cells):
        raise InputError(f"{source}: family.size {size} is smaller than the plan's {len(cells)} cells")
    order = _family_order(family, procedure, cells, source)
    limits = _field(body, "floor_ceiling", (dict,), source)
    floor, ceiling = _fraction(limits, "floor", source), _fraction(limits, "ceiling", source)
    return Plan(
        name=_field(body, "name", (str,), source),
        path=source,
        content_hash=actual,
        alpha=_fraction(body, "alpha", source),
        loss_alpha=_fraction(body, "loss_alpha", source),
        power=_fraction(body, "power", source),
        gate=gate,
        family_procedure=procedure,
        family_size=size,
        family_order=order,
        floor=floor,
        ceiling=ceiling,
        cells=cells,
        calibration=body.get("logprob_calibration")
        if isinstance(body.get("logprob_calibration"), dict)
        else None,
        sequential=_sequential(body.get("sequential"), source),
    )


def _family_order(
    family: dict[str, Any], procedure: str, cells: tuple[PlanCell, ...], source: str
) -> tuple[str, ...]:
    """The fixed sequence's testing order: every cell named once ('task' or 'task @ length')."""
    raw = family.get("order")
    if procedure != "fixed-sequence":
        if raw is not None:
            raise InputError(f"{source}: family.order is for procedure fixed-sequence, not {procedure}")
        return ()
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise InputError(f"{source}: family.order must list the cells in testing order (fixed-sequence)")
    names = [c.name for c in cells]
    if sorted(raw) != sorted(names) or len(set(raw)) != len(raw):
        raise InputError(
            f"{source}: family.order must name every cell once, in testing order: "
            f"{', '.join(names)}; got {', '.join(raw) or 'none'}"
        )
    return tuple(raw)


def _sequential(raw: Any, source: str) -> dict[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise InputError(f"{source}: sequential must be a mapping")
    looks = _field(raw, "looks", (int,), f"{source}: sequential")
    if looks < 1:
        raise InputError(f"{source}: sequential.looks must be at least 1")
    if raw.get("spending") not in ("obf", "pocock"):
        raise InputError(
            f"{source}: sequential.spending must be obf or pocock, got {raw.get('spending')!r:.40}"
        )
    return raw


def load_plan(path: str | Path) -> Plan:
    import yaml

    source = str(path)
    try:
        text = regular_file(path, "the plan").read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{source}: cannot read the plan ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise InputError(f"{source}: not a text file") from None
    try:
        body = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"{source}: not YAML ({str(exc).splitlines()[0]})") from None
    except RecursionError:  # valid YAML of 50,000 nested lists: deeper than the parser recurses
        raise InputError(f"{source}: not a plan (nested too deeply)") from None
    return plan_from_dict(body, source)


def dump_plan(body: dict[str, Any]) -> str:
    """YAML text of a plan body, with its content hash filled in."""
    import yaml

    body = dict(body)
    body["content_hash"] = content_hash(body)
    return yaml.safe_dump(body, sort_keys=False, allow_unicode=True)
