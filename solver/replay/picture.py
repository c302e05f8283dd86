"""The replay report as one PNG: per replay, GPUs held per queue over time, the waiting line,
and each queue's wait distribution; with several replays (`--compare`) they stand side by
side in columns on shared axes, one colour per queue throughout.

matplotlib is the optional extra `report` (docs/dependencies.md): imported here only, and
drawn with the Agg backend, so no display is needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from solver.replay.simulate import Replay

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes

Colour = tuple[float, float, float, float]

PNG_DPI = 90
COLUMN_INCHES = 7.0


def draw_report(results: Mapping[str, Replay], title: str, path: Path) -> None:
    """Draw `results` (by the name each column is headed with) into the PNG at `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    queues = sorted({a.queue for result in results.values() for a in result.actions})
    palette = plt.get_cmap("tab10" if len(queues) <= 10 else "tab20")
    colour = {queue: palette(index % palette.N) for index, queue in enumerate(queues)}
    columns = len(results)
    figure, axes = plt.subplots(
        3,
        columns,
        figsize=(COLUMN_INCHES * columns + 1.5, 5 + 0.35 * len(queues) + 3.5),
        height_ratios=(3, 1.3, max(2.0, 0.25 * len(queues))),
        sharex="row",
        sharey="row",
        layout="constrained",
        squeeze=False,
    )
    figure.suptitle(title, fontsize=13)
    for column, (name, result) in enumerate(results.items()):
        usage, line, waits = axes[:, column]
        _draw_usage(usage, result, queues, colour)
        hours = [(t.time - result.start).total_seconds() / 3600 for t in result.ticks]
        line.step(hours, [t.queued for t in result.ticks], where="post", color="black", lw=1)
        line.set_xlabel("simulated hours from the trace start")
        line.set_title("Actions waiting after each tick", fontsize=10)
        line.grid(alpha=0.3)
        _draw_waits(waits, result, queues, colour)
        if columns > 1:
            usage.set_title(f"{name}\n\nGPUs held per queue (share of the fleet's GPUs)")
        if column == 0:
            usage.set_ylabel("allocated, % of capacity")
            line.set_ylabel("actions")
    handles: list[Artist] = [Patch(facecolor=colour[q], alpha=0.8, label=q) for q in queues]
    handles.append(
        Line2D([], [], color="black", linestyle=":", label="CPU, % of the fleet's cores")
    )
    figure.legend(
        handles=handles,
        loc="outside lower center",
        ncols=min(len(handles), 6),
        title="queue (colour in every panel)",
    )
    figure.savefig(path, dpi=PNG_DPI, pil_kwargs={"optimize": True})
    plt.close(figure)


def _draw_usage(axis: Axes, result: Replay, queues: list[str], colour: dict[str, Colour]) -> None:
    hours = [(t.time - result.start).total_seconds() / 3600 for t in result.ticks]
    if result.gpu_capacity:
        shares = [
            [100 * t.queue_gpus.get(q, 0) / result.gpu_capacity for t in result.ticks]
            for q in queues
        ]
        axis.stackplot(
            hours, shares, step="post", colors=[colour[q] for q in queues], alpha=0.8, lw=0
        )
    if result.cpu_capacity:
        axis.step(
            hours,
            [100 * t.cpu_allocated / result.cpu_capacity for t in result.ticks],
            ":",
            where="post",
            color="black",
            lw=1.2,
        )
    axis.set_title("GPUs held per queue (share of the fleet's GPUs)")
    axis.set_ylim(0, 100)
    axis.grid(alpha=0.3)


def _draw_waits(axis: Axes, result: Replay, queues: list[str], colour: dict[str, Colour]) -> None:
    """One box per queue: minutes from submission to start of the actions that started (the
    count beside the name); a symmetric-log axis, since most waits are one tick or less."""
    from matplotlib.ticker import ScalarFormatter

    boxes, labels, tints = [], [], []
    for queue in queues:
        waited = [
            (a.waited_s or 0.0) / 60
            for a in result.actions
            if a.queue == queue and a.started_at is not None
        ]
        boxes.append(waited or [0.0])
        labels.append(f"{queue} ({len(waited)})")
        tints.append(colour[queue])
    # The first queue on top: boxes go bottom up.
    drawn = axis.boxplot(
        boxes[::-1],
        orientation="horizontal",
        patch_artist=True,
        flierprops={"markersize": 3},
        medianprops={"color": "black"},
    )
    for patch, tint in zip(drawn["boxes"], tints[::-1], strict=True):
        patch.set_facecolor(tint)
        patch.set_alpha(0.8)
    axis.set_yticks(range(1, len(boxes) + 1), labels[::-1])
    axis.set_xscale("symlog", linthresh=1)
    axis.xaxis.set_major_formatter(ScalarFormatter())
    axis.set_xlabel("minutes from submission to start (symmetric log scale)")
    axis.set_title("Wait per queue (started actions; count in brackets)", fontsize=10)
    axis.grid(alpha=0.3, axis="x")
