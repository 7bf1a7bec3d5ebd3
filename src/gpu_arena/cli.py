"""The ``gpu-arena`` command."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from .core.tasks import task_params
from .core.types import ACTION_TYPES, COMPONENT_COLUMNS, REWARD_COLUMNS, TASKS

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="GPU Arena: AI labs bargain for scarce GPUs before a deadline.")
console = Console()


@app.command()
def demo(
    task: str = typer.Option("market_round", help="single_trade | market_round | coalition_market"),
    seed: int = typer.Option(7, help="world seed"),
    split: str = typer.Option("train", help="train | holdout"),
    policy: str = typer.Option("random_valid", help="policy driving the controlled seat (lab_0)"),
    opponents: str = typer.Option("no_negotiation", help="policy for every other seat"),
    as_json: bool = typer.Option(False, "--json", help="print the transcript and metrics as JSON"),
) -> None:
    """Play one episode in-process and show every round: actions, results and reward columns."""
    from .env import GpuArenaEnv
    from .policies import make_policy

    env = GpuArenaEnv()
    try:
        obs = env.reset(seed=seed, task=task, split=split, opponents=opponents)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    driver = make_policy(policy, seed=seed)
    episode = env.episode
    assert episode is not None
    table = Table(title=f"{task}/{split} seed {seed}: lab_0 = {policy}, others = {opponents}")
    for col in ("round", "lab_0 action", "result", "reward", "largest component", "others"):
        table.add_column(col)
    total = 0.0
    while not obs.done:
        action = driver.act(episode.observe("lab_0"))
        obs = env.step(action)
        total += obs.reward or 0.0
        br = obs.reward_breakdown
        top = max(COMPONENT_COLUMNS, key=lambda c: abs(br[c]))
        others = ", ".join(f"{lid}:{r.code if not r.ok else 'ok'}" for lid, r in sorted(episode.last_results.items())
                           if lid != "lab_0")
        res = obs.last_action_result
        table.add_row(str(obs.round_index), action.action_type, "ok" if res.ok else res.code,
                      f"{obs.reward:+.4f}", f"{top} {br[top]:+.4f}", others)
    metrics = env.metrics()
    if as_json:
        print(json.dumps({"transcript": episode.transcript, "metrics": metrics}, indent=2, default=str))
        return
    console.print(table)
    lab = metrics["labs"]["lab_0"]
    console.print(f"return {total:+.4f} (= surplus over BATNA {lab['surplus_over_batna']:+.2f} / scale "
                  f"{obs.reward_scale:.2f} + penalties); welfare {metrics['welfare']:.2f} of optimum "
                  f"{metrics['optimum']:.2f} ({metrics['welfare_ratio']:.1%})")


@app.command()
def tasks() -> None:
    """List the tasks with their sizes per split."""
    table = Table(title="tasks")
    for col in ("task", "split", "labs", "rounds", "jobs/lab", "blocks/lab", "shocks"):
        table.add_column(col)
    for t in TASKS:
        for s in ("train", "holdout"):
            p = task_params(t, s)
            table.add_row(t, s, *(f"{lo}-{hi}" for lo, hi in (p.n_labs, p.rounds, p.jobs_per_lab,
                                                               p.blocks_per_lab, p.n_shocks)))
    console.print(table)


@app.command()
def schema() -> None:
    """Print the action types, reward columns and the action JSON schema."""
    from .models import ArenaAction

    print(json.dumps({"action_types": list(ACTION_TYPES), "reward_columns": list(REWARD_COLUMNS),
                      "action_schema": ArenaAction.model_json_schema()}, indent=2))


@app.command()
def policies() -> None:
    """List the registered policies."""
    from .policies import policy_names

    for name in policy_names():
        console.print(name)


if __name__ == "__main__":  # pragma: no cover
    app()
