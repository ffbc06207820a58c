"""``windowfit bench HISTORY...``: replay real histories call by call through ``fit`` and the
``ContextManager`` (and LangChain's ``trim_messages`` when installed), per history and overall;
``--plot out.png`` draws tokens per call."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from windowfit.cli._inputs import CommandError, add_format_argument, read_history
from windowfit.cli._output import Out, print_json, progress

__all__ = ["add_parser", "plot", "run"]

#: matplotlib's style per series of :data:`windowfit.replay.SERIES`: (label, color, line
#: style, drawing order). The cached prefix is a shaded area under "sent", which is drawn
#: last: where the whole prompt is a cache hit the two would otherwise be one line.
_STYLE = {
    "whole_history": ("whole history", "tab:gray", "--", 1),
    "fit": ("fit (baseline)", "tab:purple", "-.", 2),
    "cached_prefix": ("cached prefix (shaded)", "tab:green", "-", 0),
    "summary": ("summary", "tab:orange", "-", 3),
    "sent": ("sent (ContextManager)", "tab:blue", "-", 4),
}

#: Why a sliding window can cost more than the whole history at cached prices.
CACHE_NOTE = (
    "cached cost: a prompt is billed at the cache price only for the part that repeats the "
    "previous prompt's beginning. The whole history, append-only, repeats all of it; fit's "
    "window slides as old messages drop out, so nearly all of it is billed uncached each call "
    "and it can cost more than the whole history (which does not fit the window anyway). "
    "The ContextManager moves its cut in steps, so its prompt repeats between steps."
)
PLOT_SIZE = (10.0, 3.2)  # inches per history panel (width, height)
PLOT_DPI = 100


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help="replay histories turn by turn: tokens sent vs whole, prefix reuse, cost, time",
    )
    p.add_argument("histories", nargs="*", metavar="HISTORY", help="chat history files")
    p.add_argument(
        "--sample", action="store_true", help="also replay the bundled sample agent session"
    )
    p.add_argument("--model", "-m", default="gpt-4o", help="count and price for this model")
    p.add_argument("--context-window", type=int, help="window to manage (default: the model's)")
    p.add_argument("--output-reserve", type=int, help="tokens kept for the reply")
    add_format_argument(p)
    p.add_argument("--no-langchain", action="store_true", help="skip the trim_messages timing")
    p.add_argument("--plot", metavar="PNG", help="draw tokens per call (needs windowfit[plot])")
    p.add_argument("--json", action="store_true", help="print per-history and overall figures")
    p.set_defaults(func=run)


def _sample() -> tuple[str, list[dict[str, Any]]]:
    from windowfit.cli.showcase import simulate_session

    return "sample session (300 turns)", simulate_session(300).messages


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _usd(v: float | None) -> str:
    return "-" if v is None else (f"${v:,.4f}" if v < 1 else f"${v:,.2f}")


def _short(name: str, width: int = 40) -> str:
    return name if len(name) <= width else name[: width // 2 - 1] + "…" + name[-(width // 2) :]


def _overall(totals: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("calls", "whole_tokens", "sent_tokens", "prefix_tokens", "fit_sent_tokens")
    out: dict[str, Any] = {k: sum(t[k] for t in totals) for k in keys}
    costs = ("cost_whole_cached", "cost_whole_uncached", "cost_fit_cached", "cost_cached")
    for k in (*costs, "cost_uncached"):
        vals = [t[k] for t in totals]
        out[k] = None if any(v is None for v in vals) else sum(vals)
    out["prefix_reuse"] = out["prefix_tokens"] / out["sent_tokens"] if out["sent_tokens"] else 0.0
    out["saved"] = 1 - out["sent_tokens"] / out["whole_tokens"] if out["whole_tokens"] else 0.0
    return out


def plot(results: list[Any], path: str) -> dict[str, Any]:
    """Draw each replay's tokens per call into ``path`` (PNG, one panel per history) and write
    the plotted series beside it as ``<path stem>.series.json``; returns that data."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no display
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise CommandError("--plot needs matplotlib: pip install 'windowfit[plot]'") from exc
    width, height = PLOT_SIZE
    fig, axes = plt.subplots(
        len(results), 1, figsize=(width, height * len(results)), dpi=PLOT_DPI, squeeze=False
    )
    data: dict[str, Any] = {
        "size_px": [int(width * PLOT_DPI), int(height * len(results) * PLOT_DPI)]
    }
    data["histories"] = []
    # one scale for every panel: a history far past its window would flatten the prompt's
    # own lines, and panels on different scales cannot be compared
    log = any(max(r.series()["whole_history"], default=0) > 4 * r.budget for r in results)
    data["scale"] = "symlog" if log else "linear"
    for ax, res in zip(axes[:, 0], results):
        series = res.series()
        calls = list(range(1, len(res.turns) + 1))
        for key in sorted(series, key=lambda k: _STYLE[k][3]):
            label, color, dash, order = _STYLE[key]
            if key == "cached_prefix":
                ax.fill_between(calls, series[key], color=color, alpha=0.25, label=label)
                continue
            width = 1.8 if key == "sent" else 1.2
            ax.plot(
                calls,
                series[key],
                label=label,
                color=color,
                linestyle=dash,
                linewidth=width,
                zorder=order + 2,
            )
        ax.axhline(res.budget, color="tab:red", linewidth=0.8, linestyle=":", label="budget")
        if log:
            ax.set_yscale("symlog", linthresh=1000)
            ax.set_ylim(bottom=0)
        ax.set_title(f"{res.name} — {res.model}, window {res.context_window:,}", fontsize=9)
        ax.set_xlabel("model call")
        ax.set_ylabel("tokens")
        ax.legend(fontsize=7, loc="upper left")
        data["histories"].append({"name": res.name, "budget": res.budget, "series": series})
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=PLOT_DPI)
    except OSError as e:
        raise CommandError(f"cannot write {path}: {e.strerror or e}", 1) from e
    finally:
        plt.close(fig)
    side = Path(path).with_suffix(".series.json")
    side.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    data["series_file"] = str(side)
    return data


def run(args: argparse.Namespace) -> int:
    from windowfit.replay import call_points, replay

    if not args.histories and not args.sample:
        raise CommandError("give one or more HISTORY files, or --sample")
    inputs: list[tuple[str, list[dict[str, Any]]]] = []
    if args.sample:
        inputs.append(_sample())
    for path in args.histories:
        h = read_history(path, args.format)
        if not h.messages:
            raise CommandError(f"{path}: no messages to replay")
        inputs.append((os.path.basename(path), h.messages))
    results = []
    for name, msgs in inputs:
        with progress(f"replaying {name}", len(call_points(msgs))) as advance:
            last = [0]

            def on_call(done: int, total: int, last: list[int] = last) -> None:
                advance(done - last[0])
                last[0] = done

            results.append(
                replay(
                    msgs,
                    model=args.model,
                    context_window=args.context_window,
                    output_reserve=args.output_reserve,
                    name=name,
                    langchain=not args.no_langchain,
                    on_call=on_call,
                )
            )
    totals = [r.totals() for r in results]
    overall = _overall(totals)
    plotted = plot(results, args.plot) if args.plot else None
    if args.json:
        print_json(
            {
                "histories": [r.to_dict() for r in results],
                "overall": overall,
                "plot": plotted,
            }
        )
        return 0
    out = Out()
    # one column per history (and overall), one row per figure: long names stay readable
    cols = [*totals, overall] if len(totals) > 1 else totals

    def row(label: str, fmt: Any, overall_too: bool = True) -> list[str]:
        cells = [fmt(t) for t in totals]
        if len(totals) > 1:
            cells.append(fmt(overall) if overall_too else "")
        return [label, *cells]

    def pair(a: str, b: str) -> Any:
        return lambda t: f"{_ms(t[a])} / {_ms(t[b])}"

    rows = [
        row("model calls", lambda t: f"{t['calls']:,}"),
        row("tokens, whole history each call", lambda t: f"{t['whole_tokens']:,}"),
        row(
            "tokens sent (ContextManager)",
            lambda t: f"{t['sent_tokens']:,} ({t['saved']:.0%} less)",
        ),
        row("  prefix reused (cacheable)", lambda t: f"{t['prefix_reuse']:.0%}"),
        row("tokens sent (fit)", lambda t: f"{t['fit_sent_tokens']:,}"),
        row("  prefix reused", lambda t: f"{t['fit_prefix_reuse']:.0%}", False),
        row("input cost, manager, cached", lambda t: _usd(t["cost_cached"])),
        row("  uncached", lambda t: _usd(t["cost_uncached"])),
        row("  fit, cached", lambda t: _usd(t["cost_fit_cached"])),
        row("  whole history, cached", lambda t: _usd(t["cost_whole_cached"])),
        row("fit ms p50 / p99", pair("fit_ms_p50", "fit_ms_p99"), False),
        row("prepare ms p50 / p99", pair("prepare_ms_p50", "prepare_ms_p99"), False),
        row("trim_messages ms p50 / p99", pair("langchain_ms_p50", "langchain_ms_p99"), False),
    ]
    r0 = results[0]
    names = [_short(t["name"]) for t in totals] + (["overall"] if len(cols) > len(totals) else [])
    out.table(
        ["", *names],
        rows,
        title=(
            f"{r0.model}: window {r0.context_window:,}, prompt budget {r0.budget:,}; tokens "
            "summed over every model call; input cost at the model's list prices"
        ),
    )
    for t in totals:
        if t["langchain_error"]:
            out.line(f"{t['name']}: trim_messages not timed ({t['langchain_error']})")
        if t["overflow_calls"]:
            out.line(
                f"{t['name']}: the whole history overflows the window on {t['overflow_calls']} "
                "of its calls (its cost assumes it fit)"
            )
    if any(_fit_costs_more(t) for t in totals):
        out.line(CACHE_NOTE)
    if plotted:
        out.line(f"plot: {args.plot} (series: {plotted['series_file']})")
    return 0


def _fit_costs_more(totals: dict[str, Any]) -> bool:
    fit, whole = totals["cost_fit_cached"], totals["cost_whole_cached"]
    return fit is not None and whole is not None and fit > whole
