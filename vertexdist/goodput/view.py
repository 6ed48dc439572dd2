"""The ledger as text: `vertexdist goodput`'s table, and the one line `local-run` and `submit --follow` end
with. Pure: a `Ledger` in, lines out."""

from __future__ import annotations

from typing import Any

from vertexdist.goodput.ledger import CATEGORIES, LABELS, Ledger


def _usd(value: float | None) -> str:
    if value is None:
        return "-"
    if 0 < abs(value) < 0.0001:
        return "<$0.0001"
    return f"${value:,.2f}" if value >= 1 or value == 0 else f"${value:.4f}"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def summary_line(ledger: Ledger) -> str:
    """`goodput 82.3% of 1,234 replica-s ($4.10); biggest loss: start-up 12.0% ($0.49)`."""
    billed = ledger.billed_s
    dollars = ledger.dollars()
    line = f"goodput {_percent(ledger.goodput)} of {billed:,.0f} replica-s ({_usd(dollars['total'])})"
    loss = ledger.biggest_loss()
    if loss is not None and billed > 0:
        name, seconds = loss
        line += f"; biggest loss: {LABELS[name]} {_percent(seconds / billed)} ({_usd(dollars[name])})"
    steps = ledger.steps()
    if steps["recomputed"]:
        line += f"; {steps['recomputed']} steps recomputed"
    return line


def _advice_line(item: dict[str, Any]) -> str:
    kind = item.get("kind")
    if kind == "checkpoint_interval":
        used = item.get("used_interval_s")
        text = (
            f"checkpoint every {item['interval_s']:g}s (sqrt(2 x save {item['save_s']:g}s x MTBF"
            f" {item['mtbf_s']:g}s, from {item['mtbf_from']})"
        )
        if used is not None:
            text += f", not every {used:g}s as this job did"
        if item.get("saving_usd") is not None:
            text += f": saves {_usd(item['saving_usd'])}"
        return text
    if kind == "startup":
        return (
            f"start-up took {_percent(item['share'])} of the billed time ({_usd(item.get('saving_usd'))}):"
            f" {item['what']}"
        )
    if kind == "straggler":
        return (
            f"rank {item['rank']} straggled: the others waited {item['wait_replica_s']:g} replica-s on it"
            f" ({_usd(item.get('usd'))})"
        )
    return str(item)


def table(ledger: Ledger) -> str:
    """Each category's replica-seconds, share and dollars; queued time beside; then steps and advice."""
    billed = ledger.billed_s
    dollars = ledger.dollars()
    rows = [("CATEGORY", "REPLICA-S", "SHARE", "USD")]
    for name in CATEGORIES:
        seconds = ledger.categories[name]
        share = seconds / billed if billed > 0 else None
        rows.append((LABELS[name], f"{seconds:,.1f}", _percent(share), _usd(dollars[name])))
    rows.append(("billed", f"{billed:,.1f}", "100.0%" if billed > 0 else "-", _usd(dollars["total"])))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [
        "  ".join(
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]
    lines.append(f"queued (not billed): {ledger.queued_s:,.1f}s")
    prices = ", ".join(
        f"workerpool{pool} {_usd(price)}" for pool, price in ledger.price_per_replica_hour.items()
    )
    if prices:
        lines.append(f"price per replica-hour: {prices}")
    steps = ledger.steps()
    lines.append(
        f"steps: {steps['final']} in the final model, {steps['recomputed']} recomputed;"
        f" {len(ledger.attempts)} attempt{'s' if len(ledger.attempts) != 1 else ''}"
    )
    for attempt in ledger.attempts:
        if len(ledger.attempts) > 1 or attempt.recomputed_steps:
            lines.append(
                f"  attempt {attempt.number} ({attempt.reason}): {attempt.steps} steps, last checkpoint at"
                f" {attempt.checkpoint_step if attempt.checkpoint_step is not None else 'none'},"
                f" {attempt.recomputed_steps} recomputed"
            )
    lines.append(summary_line(ledger))
    for item in ledger.advice:
        lines.append(f"advice: {_advice_line(item)}")
    return "\n".join(lines)
