"""The replay report as one PNG: allocation over time, then each queue's wait distribution;
with several replays (`--compare`) each is drawn next to the others.

matplotlib is the optional extra `report` (docs/dependencies.md): imported here only, and
drawn with the Agg backend, so no display is needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from solver.replay.simulate import Replay

PNG_DPI = 110


def draw_report(results: Mapping[str, Replay], title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    named = len(results) > 1
    queues = sorted({a.queue for result in results.values() for a in result.actions})
    figure, (usage, waits) = plt.subplots(
        2, 1, figsize=(10, 4 + max(4, 0.5 * len(queues) * len(results))), layout="constrained"
    )
    figure.suptitle(title, fontsize=13)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for index, (name, result) in enumerate(results.items()):
        hours = [(t.time - result.start).total_seconds() / 3600 for t in result.ticks]
        for style, label, values, capacity in (
            ("-", "GPU", [t.gpu_allocated for t in result.ticks], result.gpu_capacity),
            (":", "CPU", [t.cpu_allocated for t in result.ticks], result.cpu_capacity),
        ):
            if capacity:
                usage.step(
                    hours,
                    [100 * v / capacity for v in values],
                    style,
                    where="post",
                    color=colours[index % len(colours)],
                    label=f"{label}, {name}" if named else label,
                )
    usage.set_title("Allocation over time (share of the fleet at full scale)")
    usage.set_xlabel("simulated hours from the trace start")
    usage.set_ylabel("allocated, %")
    usage.set_ylim(0, 105)
    usage.grid(alpha=0.3)
    usage.legend(loc="upper right")

    boxes, labels, tints = [], [], []
    for queue in queues:
        for index, (name, result) in enumerate(results.items()):
            started = [
                (a.waited_s or 0.0) / 60
                for a in result.actions
                if a.queue == queue and a.started_at is not None
            ]
            if started:
                boxes.append(started)
                labels.append(
                    f"{queue}, {name} ({len(started)})" if named else f"{queue} ({len(started)})"
                )
                tints.append(colours[index % len(colours)])
    if boxes:
        drawn = waits.boxplot(boxes, orientation="horizontal", patch_artist=True)
        for patch, tint in zip(drawn["boxes"], tints, strict=True):
            patch.set_facecolor(tint)
            patch.set_alpha(0.35)
        waits.set_yticks(range(1, len(boxes) + 1), labels)
        waits.invert_yaxis()  # queues top to bottom in name order
    waits.set_title("Wait from submission to start, per queue (started actions)")
    waits.set_xlabel("minutes waited")
    waits.grid(alpha=0.3, axis="x")
    figure.savefig(path, dpi=PNG_DPI)
    plt.close(figure)
