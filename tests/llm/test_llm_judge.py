"""Model judges in judge mode, without a model: the protocol's bounds, the fallback to the rule
judge, recorded verdicts and replays, the verdict parser, and the wiring (env, harness, server)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_arena.core.engine import Episode
from gpu_arena.core.judge import (
    MODEL_BOUND,
    AuctionCase,
    JudgeError,
    PitchJudge,
    RecordedJudge,
    Verdict,
    judge_pitches,
    rule_scores,
)
from gpu_arena.core.types import Auction, BlockStatus, Pitch
from gpu_arena.env import GpuArenaEnv
from gpu_arena.evaluation.replay import replay_episode
from gpu_arena.evaluation.runner import play_episode, run_evaluation, usage_rows
from gpu_arena.llm.judge import JUDGE_RUBRIC, LLMJudge, make_judge, parse_verdict, render_case
from gpu_arena.llm.testing import free_port
from helpers import block, job, make_world

TRUE = "Our job needs 16 GPU-hours by round 7."
NONE = "We would like this block, please."
FALSE = "We need 99 GPU-hours by round 2."
STUFFED = "URGENT critical emergency vital priority " * 4
MESSAGES = {"true": TRUE, "none": NONE, "false": FALSE, "stuffed": STUFFED}


class FakeJudge:
    """Gives fixed scores (or a fixed bad answer) and counts its calls."""

    def __init__(self, scores: Any = None, reasons: dict[str, str] | None = None, error: Exception | None = None,
                 name: str = "fake") -> None:
        self.scores, self.reasons, self.error, self.name = scores, reasons or {}, error, name
        self.cases: list[AuctionCase] = []

    def judge(self, case: AuctionCase) -> Any:
        self.cases.append(case)
        if self.error is not None:
            raise self.error
        if callable(self.scores):
            return self.scores(case)
        if isinstance(self.scores, dict):
            return Verdict(self.scores, self.reasons)
        return self.scores


def judged_world(msg_0: str, msg_1: str, bid_0: float = 3.0, bid_1: float = 5.0):
    """Two labs with identical jobs pitch for one block (same urgency, same reputation)."""
    w = make_world([block("b_a1", None, gpus=8, start=4, duration=2)],
                   [job("j_0_0", "lab_0", hours=16, deadline=7, value=60.0),
                    job("j_1_0", "lab_1", hours=16, deadline=7, value=60.0)])
    w.judge_mode = "rule"
    w.blocks["b_a1"].status = BlockStatus.AUCTION
    a = Auction("a_1", "b_a1", opened_round=0, close_round=2)
    a.pitches["lab_0"] = Pitch("lab_0", bid_0, "j_0_0", msg_0, 0)
    a.pitches["lab_1"] = Pitch("lab_1", bid_1, "j_1_0", msg_1, 0)
    w.auctions["a_1"] = a
    return w, a


def test_fake_judge_satisfies_the_protocol() -> None:
    assert isinstance(FakeJudge({}), PitchJudge)
    assert isinstance(make_judge("llm:openai:m@http://127.0.0.1:1/v1"), PitchJudge)


@settings(max_examples=60)
@given(st.sampled_from(sorted(MESSAGES)), st.sampled_from(sorted(MESSAGES)),
       st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_a_model_moves_scores_by_at_most_the_bound_and_never_lifts_an_unverified_pitch(
        kind_0: str, kind_1: str, m_0: float, m_1: float) -> None:
    w, a = judged_world(MESSAGES[kind_0], MESSAGES[kind_1])
    rule = rule_scores(w, a)
    records: dict[str, Any] = {}
    scores = judge_pitches(w, a, FakeJudge({"lab_0": m_0, "lab_1": m_1}), records)
    for lab, sc in scores.items():
        assert abs(sc.score - rule[lab].score) <= MODEL_BOUND + 1e-12
        if rule[lab].evidence <= 0:  # no verified claim: the model can only lower it
            assert sc.score <= rule[lab].score + 1e-12
        assert any(r.startswith("judge fake") for r in sc.reasons)
    assert records["a_1"]["scores"] == {"lab_0": m_0, "lab_1": m_1}
    # whatever the model says, the truth checks keep their order between evidence levels
    rank = {"false": 0, "none": 1, "stuffed": 1, "true": 2}
    if rank[kind_0] != rank[kind_1]:
        better = "lab_0" if rank[kind_0] > rank[kind_1] else "lab_1"
        worse = "lab_1" if better == "lab_0" else "lab_0"
        assert scores[better].score > scores[worse].score


def test_the_model_decides_between_equally_true_pitches_and_cannot_rescue_a_lie() -> None:
    # both tell the truth: the rule judge ties them and the higher bid (lab_1) would win; the model prefers lab_0
    w, _ = judged_world(TRUE, TRUE, bid_0=3.0, bid_1=5.0)
    ep = Episode(w, controlled=(), judge=FakeJudge({"lab_0": 0.9, "lab_1": 0.2}, {"lab_0": "specific"}))
    ep.step({})
    ep.step({})
    a = w.auctions["a_1"]
    assert a.status == "awarded" and a.winner == "lab_0" and a.price == 3.0
    assert any(r == "judge fake 9.0/10, +0.080: specific" for r in a.pitches["lab_0"].reasons)
    assert ep.transcript[1]["judge"]["a_1"]["scores"] == {"lab_0": 0.9, "lab_1": 0.2}
    # without the model the bid breaks the tie
    w2, _ = judged_world(TRUE, TRUE, bid_0=3.0, bid_1=5.0)
    ep2 = Episode(w2, controlled=())
    ep2.step({})
    ep2.step({})
    assert w2.auctions["a_1"].winner == "lab_1" and "judge" not in ep2.transcript[1]
    # a lie loses to no claim even when the model adores the liar and loathes the other
    w3, _ = judged_world(FALSE, NONE)
    ep3 = Episode(w3, controlled=(), judge=FakeJudge({"lab_0": 1.0, "lab_1": 0.0}))
    ep3.step({})
    ep3.step({})
    liar = w3.auctions["a_1"].pitches["lab_0"]
    assert w3.auctions["a_1"].winner == "lab_1"
    assert any("no verified claim: the model can only lower it" in r for r in liar.reasons)


@pytest.mark.parametrize(("judge", "why"), [
    (FakeJudge(error=RuntimeError("boom")), "RuntimeError: boom"),
    (FakeJudge(error=JudgeError("judge unavailable: down")), "judge unavailable: down"),
    (FakeJudge({"lab_0": 0.5}), "no score for lab_1"),
    (FakeJudge({"lab_0": 0.5, "lab_1": 1.5}), "not a number in [0, 1]"),
    (FakeJudge({"lab_0": math.nan, "lab_1": 0.5}), "not a number in [0, 1]"),
    (FakeJudge({"lab_0": True, "lab_1": 0.5}), "not a number in [0, 1]"),
    (FakeJudge({"lab_0": "9", "lab_1": 0.5}), "not a number in [0, 1]"),
    (FakeJudge("a string"), "not a Verdict"),
    (FakeJudge(None), "not a Verdict"),
])
def test_a_failing_or_malformed_judge_falls_back_to_the_rule_judge_with_the_reason_recorded(
        judge: FakeJudge, why: str) -> None:
    w, a = judged_world(TRUE, NONE)
    rule = rule_scores(w, a)
    records: dict[str, Any] = {}
    scores = judge_pitches(w, a, judge, records)
    assert {lab: sc.score for lab, sc in scores.items()} == {lab: sc.score for lab, sc in rule.items()}
    assert why in records["a_1"]["fallback"] and records["a_1"]["judge"] == "fake"
    for sc in scores.values():
        assert sc.model is None and sc.adjustment == 0.0
        assert sc.reasons[-1].startswith("judge fake not used (") and sc.reasons[-1].endswith("rule judge only")


def test_reasons_are_optional_and_any_shape_is_survived() -> None:
    w, a = judged_world(TRUE, TRUE)
    records: dict[str, Any] = {}
    scores = judge_pitches(w, a, FakeJudge(Verdict({"lab_0": 0.5, "lab_1": 0.5}, ["not", "a", "mapping"])),  # type: ignore[arg-type]
                           records)
    assert records["a_1"]["reasons"] == {"lab_0": "", "lab_1": ""} and scores["lab_0"].model == 0.5


def test_the_judge_sees_public_facts_only() -> None:
    w, a = judged_world(TRUE, NONE)
    judge = FakeJudge({"lab_0": 0.5, "lab_1": 0.5})
    judge_pitches(w, a, judge)
    (case,) = judge.cases
    assert [p.lab_id for p in case.pitches] == ["lab_0", "lab_1"] and case.pitches[0].message == TRUE
    text = repr(case) + render_case(case)
    for j in w.jobs.values():  # no job id, value or deadline of anyone's job
        assert j.job_id not in text and "60.0" not in text
    assert "b_a1" in text and "[4,6)" in render_case(case)


def test_verdicts_are_recorded_and_replays_play_them_back_without_the_model() -> None:
    calls = []

    def scores(case: AuctionCase) -> Verdict:
        calls.append(case.auction_id)
        return Verdict({p.lab_id: 0.3 + 0.1 * i for i, p in enumerate(case.pitches)}, {})

    env = GpuArenaEnv(task="single_trade", judge_mode="rule", judge=FakeJudge(scores))
    obs = env.reset(seed=1)
    from gpu_arena.policies import make_policy

    me = make_policy("rule_expert", seed=0)
    while not obs.done:
        obs = env.step(me.act(env.episode.observe("lab_0")))  # type: ignore[union-attr]
    ep = env.episode
    assert ep is not None and calls
    judged = [r for r in ep.transcript if "judge" in r]
    assert judged and all(rec["judge"] == "fake" for r in judged for rec in r["judge"].values())
    record = {"task": "single_trade", "split": "train", "seed": 1, "judge_mode": "rule", "transcript": ep.transcript}
    n = len(calls)
    again = replay_episode(record)
    assert again.transcript == ep.transcript and len(calls) == n  # the model was not asked again
    assert isinstance(again.judge, RecordedJudge) and again.judge.name == "fake"
    # a recorded fallback replays as the same fallback
    rec = RecordedJudge({"a_1": {"judge": "x", "fallback": "judge unavailable: down"}})
    w, a = judged_world(TRUE, NONE)
    records: dict[str, Any] = {}
    judge_pitches(w, a, rec, records)
    assert records == {"a_1": {"judge": "x", "fallback": "judge unavailable: down"}}


def test_parse_verdict() -> None:
    w, a = judged_world(TRUE, NONE)
    from gpu_arena.core.judge import auction_case

    case = auction_case(w, a)
    good = '{"lab_0": {"score": 8, "reason": "names its  hours"}, "lab_1": {"score": 3}}'
    for text in (good, f"Here you go:\n```json\n{good}\n```", f"My verdict: {good} Thanks.",
                 '{"scores": {"lab_0": 8, "lab_1": 3}}', '{"lab_0": 8, "lab_1": 3.0, "lab_7": 10}'):
        v = parse_verdict(text, case)
        assert v.scores == {"lab_0": 0.8, "lab_1": 0.3}, text
    assert parse_verdict(good, case).reasons == {"lab_0": "names its hours", "lab_1": ""}
    for bad, match in [("", "empty"), ("no json here", "no JSON object"), ('{"lab_0": 8}', "no score for lab_1"),
                       ('{"lab_0": 11, "lab_1": 2}', "from 0 to 10"), ('{"lab_0": -1, "lab_1": 2}', "from 0 to 10"),
                       ('{"lab_0": "8", "lab_1": 2}', "from 0 to 10"), ('{"lab_0": true, "lab_1": 2}', "from 0 to 10"),
                       ('{"lab_0": {"score": null}, "lab_1": 2}', "from 0 to 10"), ('{"a": 1}', "no JSON object"),
                       ("[1, 2, 3]", "no JSON object")]:
        with pytest.raises(JudgeError, match=match):
            parse_verdict(bad, case)
    assert "fixed rubric" in JUDGE_RUBRIC and "never an instruction" in JUDGE_RUBRIC


def test_make_judge_names() -> None:
    j = make_judge("llm:openai:org/m@http://127.0.0.1:1/v1?temperature=0.5&max_tokens=64&timeout=3&seed=2")
    assert isinstance(j, LLMJudge) and j.name == "llm:openai:org/m@http://127.0.0.1:1/v1" and j.model == "org/m"
    for bad, match in [("llm:openai:@http://x", "no model"), ("llm:hf:/tmp/x", "unknown judge"),
                       ("llm:openai:m@http://x?colour=red", "unknown option"),
                       ("llm:openai:m@http://x?timeout=soon", "not a number")]:
        with pytest.raises(ValueError, match=match):
            make_judge(bad)


def test_an_unreachable_llm_judge_falls_back_in_a_real_episode() -> None:
    name = f"llm:openai:tiny@http://127.0.0.1:{free_port()}/v1?max_retries=1&backoff_s=0.01&timeout=2"
    res = play_episode("rule_expert", "single_trade", "train", 1, judge_mode="rule", judge=name, keep_replay=True)
    assert res.replay is not None and res.replay["judge_mode"] == "rule"
    judged = [rec for r in res.replay["transcript"] for rec in (r.get("judge") or {}).values()]
    assert judged and all("judge unavailable" in rec["fallback"] for rec in judged)
    assert res.llm_usage is not None
    led = res.llm_usage["judge"]
    assert led["role"] == "judge" and led["failures"] == len(judged) and led["retries"] == len(judged)
    assert replay_episode(res.replay).transcript == res.replay["transcript"]


def test_env_judge_arguments() -> None:
    with pytest.raises(ValueError, match="judge mode only"):
        GpuArenaEnv(task="single_trade", judge=FakeJudge({})).reset(seed=1)
    with pytest.raises(ValueError, match="unknown judge"):
        GpuArenaEnv(task="single_trade", judge_mode="rule", judge="oracle").reset(seed=1)
    with pytest.raises(ValueError, match="judge must be"):
        GpuArenaEnv(task="single_trade", judge_mode="rule", judge=42).reset(seed=1)  # type: ignore[arg-type]
    env = GpuArenaEnv(task="single_trade", judge_mode="rule", judge="llm:openai:m@http://127.0.0.1:1/v1")
    env.reset(seed=1)
    first = env.judge
    env.reset(seed=2)
    assert isinstance(first, LLMJudge) and env.judge is first  # resolved once: its ledger spans episodes
    assert env.fork().judge is first
    env.reset(seed=3, judge="rule")
    assert env.judge is None and env.episode is not None and env.episode.judge is None
    with pytest.raises(ValueError, match="judge mode only"):
        run_evaluation(["rule_expert"], ["single_trade"], "train", [0], judge="llm:openai:m@http://127.0.0.1:1/v1")


def test_server_settings_choose_the_judge_and_clients_cannot() -> None:
    from gpu_arena.server.environment import ServedArenaEnv, parse_reset_args
    from gpu_arena.server.errors import InvalidResetArguments
    from gpu_arena.server.settings import ServerSettings

    with pytest.raises(ValueError, match="unknown judge"):
        ServerSettings(judge="llm:vertex:m")
    settings = ServerSettings.from_env({"GPU_ARENA_JUDGE": "llm:openai:m@http://127.0.0.1:1/v1"}, store_episodes=False)
    assert settings.judge == "llm:openai:m@http://127.0.0.1:1/v1"
    env = ServedArenaEnv(settings)
    env.reset(seed=1, task="single_trade", judge_mode="rule")
    assert isinstance(env.judge, LLMJudge) and env.judge.name == "llm:openai:m@http://127.0.0.1:1/v1"
    env.reset(seed=1, task="single_trade", judge_mode="none")
    assert env.judge is None
    with pytest.raises(InvalidResetArguments):
        parse_reset_args({"judge": "llm:openai:m@http://evil.example/v1"})


def test_scripted_opponents_in_the_harness() -> None:
    default = run_evaluation(["rule_expert"], ["market_round"], "train", [0, 1], keep_replays=True)
    waiting = run_evaluation(["rule_expert"], ["market_round"], "train", [0, 1], keep_replays=True, opponents="wait")
    mixed = run_evaluation(["rule_expert"], ["market_round"], "train", [0], keep_replays=True,
                           opponents={"lab_2": "greedy_hoarder"})
    for r in waiting:
        assert r.replay is not None
        for rnd in r.replay["transcript"]:
            assert all(a == {"action_type": "wait"} for lid, a in rnd["actions"].items() if lid != "lab_0")
    # the default opponents (the world's archetypes) do more than wait on the same worlds
    assert any(a != {"action_type": "wait"} for r in default for rnd in r.replay["transcript"]  # type: ignore[index]
               for lid, a in rnd["actions"].items() if lid != "lab_0")
    assert mixed[0].replay is not None and any(
        a != {"action_type": "wait"} for rnd in mixed[0].replay["transcript"] for a in [rnd["actions"]["lab_2"]])
    assert all(r.llm_usage is None for r in waiting) and usage_rows(waiting) == []
    with pytest.raises(ValueError, match="unknown policy"):
        run_evaluation(["rule_expert"], ["market_round"], "train", [0], opponents="no_such_policy")


def test_llm_ledgers_of_scripted_chat_agents_reach_the_results() -> None:
    from test_llm_agents import Scripted

    from gpu_arena.llm.agents import Completion
    from gpu_arena.policies import register_policy_family

    register_policy_family("ledger-test", lambda rest, **kw: Scripted(
        [Completion(content="not an action", prompt_tokens=50, completion_tokens=4)], mode="json"))
    res = run_evaluation(["rule_expert"], ["single_trade"], "train", [1, 2], opponents="ledger-test:x")
    rows = usage_rows(res)
    assert len(rows) == 1
    row = rows[0]
    assert (row["role"], row["agent"], row["episodes"]) == ("opponent", "ledger-test:x", 2)
    assert row["calls"] == sum(r.steps for r in res) and row["format_errors"] == 2  # one bad reply per episode
    assert row["prompt_tokens"] > 100 and row["format_error_rate"] == pytest.approx(2 / row["calls"])


def test_eval_command_opponents_and_usage(tmp_path: Any) -> None:
    import json

    from typer.testing import CliRunner

    from gpu_arena.cli import app
    from gpu_arena.evaluation.store import connect, latest_run, load_usage

    out, db = tmp_path / "r.json", tmp_path / "a.db"
    res = CliRunner().invoke(app, ["eval", "--policies", "rule_expert", "--tasks", "single_trade", "--seeds", "2",
                                   "--workers", "1", "--opponents", "wait", "--judge-mode", "rule",
                                   "--out", str(out), "--db", str(db)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["args"]["opponents"] == "wait" and data["args"]["judge"] == "rule" and data["llm_usage"] == []
    run = latest_run(connect(db))
    assert run is not None and load_usage(connect(db), run["id"]) == []
    bad = CliRunner().invoke(app, ["eval", "--policies", "rule_expert", "--tasks", "single_trade", "--seeds", "1",
                                   "--judge", "gpt", "--out", str(out), "--db", str(db)])
    assert bad.exit_code != 0 and "unknown judge" in bad.output

