"""``gpu-arena demo`` and ``gpu-arena play``: one episode in the terminal, played by a policy
(``demo``) or by any mix of seats, a person included (``play``)."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from ..core.opponents import DEFAULT_OPPONENTS
from ..core.types import COMPONENT_COLUMNS
from .console import console, quiet_libraries
from .options import judge_options, opponents_spec


def demo(
    task: str = typer.Option("market_round", help="single_trade | market_round | coalition_market"),
    seed: int = typer.Option(7, help="world seed"),
    split: str = typer.Option("train", help="train | holdout"),
    policy: str = typer.Option("rule_expert", help="policy driving the controlled seat (lab_0)"),
    opponents: str = typer.Option(DEFAULT_OPPONENTS, help="policy for every other seat (archetypes: the world's mix)"),
    as_json: bool = typer.Option(False, "--json", help="print the transcript and metrics as JSON"),
) -> None:
    """Play one episode in-process and show every round: actions, results and reward columns."""
    from ..env import GpuArenaEnv
    from ..policies import make_policy
    from ..rollout import play_seat

    env = GpuArenaEnv()
    try:
        obs = env.reset(seed=seed, task=task, split=split, opponents=opponents)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    try:
        driver = make_policy(policy, seed=seed)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    episode = env.episode
    assert episode is not None
    table = Table(title=f"{task}/{split} seed {seed}: lab_0 = {policy}, others = {opponents}")
    for col in ("round", "lab_0 action", "result", "reward", "largest component", "others"):
        table.add_column(col)
    def row(action: Any, obs: Any) -> None:
        br = obs.reward_breakdown
        top = max(COMPONENT_COLUMNS, key=lambda c: abs(br[c]))
        others = ", ".join(f"{lid}:{r.code if not r.ok else 'ok'}" for lid, r in sorted(episode.last_results.items())
                           if lid != "lab_0")
        res = obs.last_action_result
        table.add_row(str(obs.round_index), escape(action_parts(action)[0]), "ok" if res.ok else res.code,
                      f"{obs.reward:+.4f}", f"{top} {br[top]:+.4f}", others)

    played = play_seat(env, driver, obs, on_step=row)
    total, obs = played.episode_return, played.last or obs
    metrics = env.metrics()
    if as_json:
        print(json.dumps({"transcript": episode.transcript, "metrics": metrics}, indent=2, default=str))
        return
    console.print(table)
    lab = metrics["labs"]["lab_0"]
    console.print(f"return {total:+.4f} (= surplus over BATNA {lab['surplus_over_batna']:+.2f} / scale "
                  f"{obs.reward_scale:.2f} + penalties); welfare {metrics['welfare']:.2f} of optimum "
                  f"{metrics['optimum']:.2f} ({metrics['welfare_ratio']:.1%})")


def action_parts(action: object) -> tuple[str, dict[str, Any]]:
    """An action's type and its other non-default fields, as the terminal shows them; a move the
    engine refuses before its rules read it is ``[code]`` with no fields."""
    from ..core.records import action_record
    from ..core.serialize import coerce_action
    from ..core.types import RejectedAction

    if isinstance(action, RejectedAction):
        return f"[{action.code}]", {}
    core = coerce_action(action)
    if isinstance(core, RejectedAction):
        return f"[{core.code}]", {}
    record = action_record(core)
    if isinstance(record, RejectedAction):
        return f"[{record.code}]", {}
    return str(core.action_type), {k: v for k, v in record.items() if k != "action_type"}


def action_text(action: object) -> str:
    kind, args = action_parts(action)
    return kind + (" " + json.dumps(args) if args else "")



def play(
    task: str = typer.Option("single_trade", help="single_trade | market_round | coalition_market"),
    seed: int = typer.Option(7, help="world seed"),
    split: str = typer.Option("train", help="train | holdout"),
    seat: str = typer.Option("lab_0", help="the seat you (or --me) play"),
    me: str = typer.Option("human", help="'human' (type actions) or any policy name, e.g. "
                                         "llm:openai:<model>@<base_url> or rule_expert"),
    opponents: str = typer.Option(DEFAULT_OPPONENTS, help="one policy for every other seat, a list in seat order "
                                                     "(a,b,c) or seat=policy pairs (lab_1=llm:hf:<path>,lab_2=selfish)"),
    judge_mode: str = typer.Option("none", help="none | rule"),
    judge: str | None = typer.Option(None, help="a model judge added to the rule judge, "
                                                "llm:openai:<model>@<base_url> (turns judge mode on)"),
    verbose: bool = typer.Option(False, "--verbose", help="the libraries' own progress bars and logs (llm:hf: models)"),
) -> None:
    """Play one episode in the terminal against any mix of seats (scripted, LLM or you)."""
    # a local model's weights load when its seat first moves: their progress bars would cut into the tables
    with quiet_libraries(any("llm:hf:" in spec for spec in (me, opponents, judge or "")), verbose):
        _play(task, seed, split, seat, me, opponents, judge_mode, judge)


def _play(task: str, seed: int, split: str, seat: str, me: str, opponents: str, judge_mode: str,
          judge: str | None) -> None:
    from rich.panel import Panel
    from rich.text import Text

    from ..core.worldgen import generate_world
    from ..env import GpuArenaEnv
    from ..llm import ChatAgent, FormatError, json_mode_instruction, parse_action, render_turn
    from ..llm.prompts import RenderMemory
    from ..llm.shortform import expand
    from ..policies import make_policy, make_seat_policy
    from ..rollout import play_seat

    judge_mode, judge = judge_options(judge_mode, judge)
    try:
        world = generate_world(task, split, seed, judge_mode=judge_mode)
        spec = opponents_spec(opponents)
        if seat not in world.labs:
            raise ValueError(f"unknown seat {seat!r}; this world has {', '.join(world.labs)}")
        names: dict[str, str] = spec.for_seats([lid for lid in world.labs if lid != seat])
        # built here (as the environment would) so their LLM ledgers can be shown at the end
        seats = {lid: make_seat_policy(world, lid, n) for lid, n in names.items()}
        driver = None if me == "human" else make_policy(me, seed=seed)
        env = GpuArenaEnv(task=task, split=split, seat=seat, opponents=seats, judge_mode=judge_mode, judge=judge)
        obs = env.reset(seed=seed)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    episode = env.episode
    assert episode is not None
    console.print(f"[bold]{task}/{split} seed {seed}[/bold]: you are {seat} ({me}); "
                  + ", ".join(f"{lid}: {n}" for lid, n in names.items()))
    memory = RenderMemory()
    stopped = False

    def choose(view: Any, obs: Any) -> Any:
        nonlocal stopped
        if driver is None:
            console.print(Panel(Text(render_turn(view, memory)), title=f"round {obs.round_index}", expand=False))
            while True:
                try:
                    text = typer.prompt("action (JSON, an action type, '?' for the list, 'q' to quit)")
                except (typer.Abort, EOFError):
                    text = "q"
                text = text.strip()
                if text == "?":
                    console.print(json_mode_instruction(), markup=False)
                    continue
                if text == "q":
                    stopped = True
                    return None
                action = parse_action(json.dumps({"action_type": text}) if text.isidentifier() else text)
                if isinstance(action, FormatError):
                    console.print(f"[red]{action.code}[/red]: {escape(str(action.message))}")
                    continue
                # the short forms as an LLM agent's: form_coalition with its job alone is the planner's, and
                # allocate_to_job() leaves the blocks promised to a coalition gathering consents
                return expand(action, view)
        action = driver.act(view)
        if isinstance(driver, ChatAgent):
            conv = driver.conversation(seat)
            reply = conv.transcript[-1] if conv else {}
            said = reply.get("content") or json.dumps([c["function"] for c in reply.get("tool_calls") or []])
            console.print(Panel(Text(str(said)[:600]), title=f"{seat} says (round {obs.round_index})", expand=False))
        return action

    def show(_action: Any, _obs: Any) -> None:
        rnd = episode.transcript[-1]
        table = Table(title=f"round {rnd['round']} (order {', '.join(rnd['order'])})")
        for col in ("seat", "policy", "action", "result", "reward"):
            table.add_column(col)
        for lid in world.labs:  # the same labs as the episode's (reading its world could move it)
            act = rnd["actions"].get(lid, {})
            shown = f"[{act['rejected']}]" if "rejected" in act else action_text(act) if act else "-"
            ok, code = rnd["results"].get(lid, [True, "-"])
            table.add_row(lid + (" *" if lid == seat else ""), escape(me if lid == seat else names[lid]), escape(shown),
                          "ok" if ok else f"[red]{code}[/red]", f"{rnd['rewards'].get(lid, 0.0):+.4f}")
        console.print(table)

    total = play_seat(env, driver, obs, choose=choose, on_step=show).episode_return
    if stopped:
        console.print("stopped")
        return
    metrics = env.metrics()
    lab = metrics["labs"][seat]
    console.print(f"[bold]return {total:+.4f}[/bold]; surplus over BATNA {lab['surplus_over_batna']:+.2f}; "
                  f"welfare {metrics['welfare']:.2f} of optimum {metrics['optimum']:.2f} ({metrics['welfare_ratio']:.1%})")
    agents: dict[str, object] = {lid: p for lid, p in [(seat, driver), *seats.items()] if isinstance(p, ChatAgent)}
    if env.judge is not None and hasattr(env.judge, "ledger"):
        agents["judge"] = env.judge
    if agents:
        table = Table(title="LLM ledgers")
        for col in ("seat", "calls", "prompt tok/call", "completion tok/call", "model s/call", "format errors"):
            table.add_column(col)
        for lid, agent in agents.items():
            d = agent.ledger.to_dict()  # type: ignore[attr-defined]
            table.add_row(lid, str(d["calls"]), f"{d['prompt_tokens_per_call']:.0f}",
                          f"{d['completion_tokens_per_call']:.0f}", f"{d['model_s_per_call']:.2f}",
                          str(d["format_errors"]))
        console.print(table)

