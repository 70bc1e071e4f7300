"""`evalkit plan`: from a pilot comparison, how many questions per cell a decision needs.

Per row of the pilot: the questions needed for the Tango/Nam test to show non-inferiority at δ
(one-sided 0.025) with the asked power, assuming the true difference is 0 and the discordance
is the pilot's; and, with an effect d, the questions the McNemar test (two-sided 0.05) needs to
detect a loss of d (Connor 1987). A pilot with no discordant question gives no discordance rate:
the plan then uses the rule-of-three 95% upper bound 3/n and says so.
"""

from __future__ import annotations

import math
from typing import Any

from evalkit import stats as st
from evalkit.compare.verdict import pp, where
from evalkit.errors import InputError

_ROW_FIELDS = {"task": str, "metric": str, "n": int, "baseline_only": int, "candidate_only": int}


def check_pilot(report: Any, source: str) -> list[dict[str, Any]]:
    """The pilot's rows, or InputError naming what is missing (a comparison JSON from `compare --json`)."""
    rows = report.get("rows") if isinstance(report, dict) else None
    if not isinstance(rows, list) or not rows:
        raise InputError(f"{source}: not an `evalkit compare --json` report (no rows)")
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise InputError(f"{source}: rows[{i}] is not an object")
        for name, kind in _ROW_FIELDS.items():
            value = row.get(name)
            if isinstance(value, bool) or not isinstance(value, kind):
                raise InputError(f"{source}: rows[{i}].{name} must be {kind.__name__}, got {value!r:.40}")
        length = row.get("length")
        if length is not None and (isinstance(length, bool) or not isinstance(length, int)):
            raise InputError(f"{source}: rows[{i}].length must be an integer or null")
        n, b, c = row["n"], row["baseline_only"], row["candidate_only"]
        if n < 1 or b < 0 or c < 0 or b + c > n:
            raise InputError(
                f"{source}: rows[{i}] has impossible counts n={n}, baseline_only={b}, candidate_only={c}"
            )
    return rows


def plan_row(
    row: dict[str, Any], margin: float, power: float, effect: float | None, alpha: float = 0.05
) -> dict[str, Any]:
    n, disc = row["n"], row["baseline_only"] + row["candidate_only"]
    psi, source = (
        (disc / n, "pilot") if disc else (min(1.0, 3.0 / n), "rule of three (no discordant question)")
    )
    out: dict[str, Any] = {
        "task": row["task"],
        "metric": row["metric"],
        "length": row.get("length"),
        "pilot_n": n,
        "pilot_discordant": disc,
        "psi": psi,
        "psi_source": source,
        "margin": margin,
        "power": power,
        "n_noninferiority": math.ceil(st.noninferiority_sample_size(psi, margin, 0.0, power)),
        "power_noninferiority_at_pilot_n": st.noninferiority_power(psi, margin, n),
        "effect": effect,
    }
    if effect is not None:
        psi_loss, note = psi, ""
        if effect > psi:
            psi_loss = effect
            note = (
                f"a loss of {pp(effect, False)} pp needs a discordance of at least that; planned with ψ = d"
            )
        out["psi_loss"] = psi_loss
        out["n_detect_loss"] = math.ceil(st.connor_sample_size(effect, psi_loss, power, alpha))
        out["power_detect_loss_at_pilot_n"] = st.connor_power(effect, psi_loss, n, alpha)
        out["loss_note"] = note
    return out


def plan(
    report: dict[str, Any], margin: float, power: float, effect: float | None, source: str
) -> dict[str, Any]:
    rows = check_pilot(report, source)
    return {
        "pilot": source,
        "margin": margin,
        "power": power,
        "effect": effect,
        "assumptions": "true difference 0 for non-inferiority; discordance ψ from the pilot",
        "rows": [plan_row(r, margin, power, effect) for r in rows],
    }


def plan_markdown(result: dict[str, Any]) -> str:
    m, pw = result["margin"], result["power"]
    effect = result["effect"]
    head = [
        "task",
        "metric",
        "length",
        "pilot n",
        "discordance ψ",
        f"NI at δ={pp(m, False)} pp: n (power at pilot n)",
    ]
    if effect is not None:
        head.append(f"loss of {pp(effect, False)} pp: n (power at pilot n)")
    lines = [
        f"### evalkit plan: questions per cell for {pw:.0%} power",
        "",
        f"Pilot: {result['pilot']}. Assumes a true difference of 0 for non-inferiority (Tango/Nam score "
        f"test, one-sided α 0.025) and the pilot's discordance; a loss is detected with the McNemar test "
        f"(Connor 1987, two-sided α 0.05).",
        "",
        "| " + " | ".join(head) + " |",
        "|"
        + "|".join(["---", "---", "---:", "---:", "---:", "---:"] + (["---:"] if effect is not None else []))
        + "|",
    ]
    notes = []
    for r in result["rows"]:
        psi = f"{100 * r['psi']:.2f}%" + ("" if r["psi_source"] == "pilot" else " (3/n)")
        cells = [
            r["task"],
            r["metric"],
            str(r["length"] or "–"),
            str(r["pilot_n"]),
            psi,
            f"{r['n_noninferiority']} ({r['power_noninferiority_at_pilot_n']:.2f})",
        ]
        if effect is not None:
            cells.append(f"{r['n_detect_loss']} ({r['power_detect_loss_at_pilot_n']:.2f})")
            if r["loss_note"]:
                notes.append(f"- {where(r)}: {r['loss_note']}.")
        if r["psi_source"] != "pilot":
            notes.append(f"- {where(r)}: the pilot has no discordant question; ψ is its 95% upper bound 3/n.")
        lines.append("| " + " | ".join(cells) + " |")
    if notes:
        lines += [""] + notes
    return "\n".join(lines) + "\n"


def parse_cell(text: str) -> tuple[str, int | None]:
    """'gsm8k' -> ('gsm8k', None); 'niah@131072' -> ('niah', 131072)."""
    task, at, length = text.partition("@")
    if not task or (at and not length.isdigit()):
        raise InputError(f"--cell must be TASK or TASK@LENGTH (e.g. niah@131072), got {text!r}")
    return task, int(length) if at else None


def _cell_psi(rows: list[dict[str, Any]]) -> tuple[float, str]:
    """The largest discordance among a cell's pilot rows (one per metric), or 3/n when none."""
    best = max(rows, key=lambda r: (r["baseline_only"] + r["candidate_only"]) / r["n"])
    disc, n = best["baseline_only"] + best["candidate_only"], best["n"]
    return (disc / n, "pilot") if disc else (min(1.0, 3.0 / n), "pilot rule of three (3/n)")


def plan_file_body(
    cells: dict[tuple[str, int | None], tuple[float, str]],
    *,
    name: str,
    source: str,
    margin: float,
    logprob_margin: float,
    power: float,
    gate: str,
    family_size: int | None,
    multiplicity: str = "holm",
    effect: float | None = None,
    calibration: dict[str, Any] | None = None,
    looks: int | None = None,
    spending: str = "obf",
) -> dict[str, Any]:
    """The plan file's content (before its hash): n per cell from the exact power of the NI test.

    cells: {(task, length): (discordance psi, where psi comes from)}.
    """
    from evalkit.compare import plan_file as pf
    from evalkit.stats.exact_sample_size import exact_loss_n, exact_noninferiority_n

    sequential = None
    if looks is not None:
        from evalkit.stats.sequential import information_inflation, normal_design

        design = normal_design([(k + 1) / looks for k in range(looks)], pf.NI_ALPHA, spending)
        sequential = {
            "looks": looks,
            "spending": spending,
            "bounds": list(design.bounds),
            "information_inflation": information_inflation(design, power),
        }
    out_cells = []
    for (task, length), (psi, psi_source) in cells.items():
        ni = exact_noninferiority_n(psi, margin, power, pf.NI_ALPHA)
        cell: dict[str, Any] = {
            "task": task,
            "length": length,
            "exact_match_margin": pf.quantity(round(100 * margin, 10), pf.EM_UNIT),
            "logprob_margin": pf.quantity(logprob_margin, pf.LOGPROB_UNIT),
            "discordance": psi,
            "discordance_source": psi_source,
            "n": ni.n,
            "exact_power_at_n": ni.power,
            "power_method": "exact enumeration of the Tango/Nam NI test (true difference 0)",
            "n_approximation": ni.n_approx,
            "approximation_method": f"{ni.approx_method}, an approximation",
        }
        if sequential is not None and ni.n is not None:
            cell["n_max"] = math.ceil(ni.n * sequential["information_inflation"])
        if effect is not None:
            loss = exact_loss_n(psi, effect, power, pf.LOSS_ALPHA)
            cell["loss_to_detect"] = pf.quantity(round(100 * effect, 10), pf.EM_UNIT)
            cell["n_detect_loss"] = loss.n
            cell["exact_power_detect_loss"] = loss.power
            cell["n_detect_loss_connor"] = loss.n_approx
        out_cells.append(cell)
    return {
        "kind": pf.KIND,
        "schema_version": pf.SCHEMA_VERSION,
        "name": name,
        "source": source,
        "alpha": pf.NI_ALPHA,
        "loss_alpha": pf.LOSS_ALPHA,
        "power": power,
        "gate": gate,
        "decision_rule": "every cell with room non-inferior on the gated measures (intersection-union); "
        "floor and ceiling cells are no evidence; a loss anywhere fails",
        "family": {
            "procedure": multiplicity,
            "size": family_size or len(out_cells),
            "p_values": "exact",
            # fixed sequence: the loss claims are tested in the order the cells were given
            **({"order": [_cell_name(t, n) for t, n in cells]} if multiplicity == "fixed-sequence" else {}),
        },
        "floor_ceiling": {"floor": pf.FLOOR, "ceiling": pf.CEILING},
        "cells": out_cells,
        **({"logprob_calibration": calibration} if calibration is not None else {}),
        **({"sequential": sequential} if sequential is not None else {}),
    }


def _cell_name(task: str, length: int | None) -> str:
    return task + ("" if length is None else f" @ {length}")


def pilot_cells(report: Any, source: str) -> dict[tuple[str, int | None], tuple[float, str]]:
    by_cell: dict[tuple[str, int | None], list[dict[str, Any]]] = {}
    for row in check_pilot(report, source):
        by_cell.setdefault((row["task"], row.get("length")), []).append(row)
    return {key: _cell_psi(rows) for key, rows in by_cell.items()}
