"""The replay report as one PNG: allocation over time, then each queue's wait distribution.

matplotlib is the optional extra `report` (docs/dependencies.md): imported here only, and
drawn with the Agg backend, so no display is needed.
"""

from __future__ import annotations

from pathlib import Path

from solver.replay.simulate import Replay

PNG_DPI = 110


def draw_report(result: Replay, title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    queues = sorted({a.queue for a in result.actions})
    hours = [(t.time - result.start).total_seconds() / 3600 for t in result.ticks]
    figure, (usage, waits) = plt.subplots(
        2, 1, figsize=(10, 8), gridspec_kw={"height_ratios": [1, 1]}, layout="constrained"
    )
    figure.suptitle(title, fontsize=13)
    for label, values, capacity in (
        ("GPU", [t.gpu_allocated for t in result.ticks], result.gpu_capacity),
        ("CPU", [t.cpu_allocated for t in result.ticks], result.cpu_capacity),
    ):
        if capacity:
            usage.step(hours, [100 * v / capacity for v in values], where="post", label=label)
    usage.set_title("Allocation over time (share of the fleet at full scale)")
    usage.set_xlabel("simulated hours from the trace start")
    usage.set_ylabel("allocated, %")
    usage.set_ylim(0, 105)
    usage.grid(alpha=0.3)
    usage.legend(loc="upper right")

    per_queue = [
        [(a.waited_s or 0.0) / 60 for a in result.actions if a.queue == q and a.started_at]
        for q in queues
    ]
    shown = [(q, w) for q, w in zip(queues, per_queue, strict=True) if w]
    if shown:
        waits.boxplot([w for _, w in shown], orientation="horizontal", showfliers=True)
        waits.set_yticks(range(1, len(shown) + 1), [f"{q} ({len(w)})" for q, w in shown])
    waits.set_title("Wait from submission to start, per queue (started actions)")
    waits.set_xlabel("minutes waited")
    waits.grid(alpha=0.3, axis="x")
    figure.savefig(path, dpi=PNG_DPI)
    plt.close(figure)
