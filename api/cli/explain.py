"""`sluice explain ACTION`: why an action failed, why it waits, or where it runs.

    sluice explain train --file fixtures/seeds/eight-gpu-strict.yaml     # offline, one tick
    sluice explain train --file SNAPSHOT_DIR --json                      # an Arrow snapshot
    sluice explain train --server http://127.0.0.1:8000                  # a running service

Without --file the command asks a server: --server, else the global --url or SLUICE_URL.
The solver is imported only for --file, keeping the command quick against a server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from api.calls import Actions
from api.cli.context import FiniteRange, Remote, pass_remote
from api.cli.render import forecast_line
from api.client import SluiceClient


@click.command("explain")
@click.argument("action_id")
@click.option(
    "--file",
    "path",
    type=click.Path(path_type=Path, exists=True),
    help="A scenario file or an Arrow snapshot: explain offline after one tick of it.",
)
@click.option("--server", help="A Sluice server to ask [default: --url or SLUICE_URL].")
@click.option("--json", "as_json", is_flag=True, help="The explanation as JSON.")
@click.option(
    "--time-limit",
    type=FiniteRange(min=0.01),
    default=5.0,
    show_default=True,
    help="With --file: the tick's solver time limit in seconds.",
)
@pass_remote
def explain_command(
    remote: Remote,
    action_id: str,
    path: Path | None,
    server: str | None,
    as_json: bool,
    time_limit: float,
) -> None:
    """Why ACTION failed, why it waits (the limits that keep it out, with numbers) and what
    would let it run; or where it runs."""
    if path is not None:
        from solver import TickOptions
        from solver.explain.action import explain as explain_offline
        from solver.whatif.compare import load_snapshot

        options = TickOptions(time_limit_s=time_limit)
        explanation = explain_offline(load_snapshot(path), action_id, options=options)
        data = explanation.model_dump(mode="json", exclude_none=True)
    else:
        client = SluiceClient(server, remote.token) if server else remote.client
        data = client.json(Actions.explanation(action_id))
    click.echo(json.dumps(data, indent=2) if as_json else explanation_text(data))


def explanation_text(data: dict[str, Any]) -> str:
    """The explanation as a person reads it: the verdict, why, and what would change it."""
    state = data["state"] if data["code"] == data["state"] else f"{data['state']}, {data['code']}"
    lines = [f"{data['action']} ({data['queue']}): {state}"]
    if not data["items"]:
        lines.append(f"  {data['message']}")
    else:
        lines.append("why:")
        lines += [f"  - [{item['kind']}] {item['message']}" for item in data["items"]]
    if data["suggestions"]:
        lines.append("what would change it:")
        lines += [
            f"  {number}. {suggestion['message']}"
            for number, suggestion in enumerate(data["suggestions"], start=1)
        ]
    # Older services send neither list.
    if data.get("unproven"):
        lines.append("not proven (the re-run tick did not finish in time):")
        lines += [f"  - {suggestion['message']}" for suggestion in data["unproven"]]
    if data.get("ruled_out"):
        lines.append("ruled out:")
        lines += [f"  - {words}" for words in data["ruled_out"]]
    estimate = forecast_line(data)
    if estimate:
        lines.append(estimate)
    return "\n".join(lines)
