"""The rule judge: scores pitches against the server's truth."""

from __future__ import annotations

from gpu_arena.core.engine import Episode
from gpu_arena.core.judge import judge_pitches
from gpu_arena.core.types import Auction, BlockStatus, Pitch
from gpu_arena.env import GpuArenaEnv
from gpu_arena.policies import make_policy
from helpers import act, block, job, make_world


def judged_world():
    w = make_world([block("b_a1", None, gpus=8, start=4, duration=2)],
                   [job("j_0_0", "lab_0", hours=16, deadline=7, value=60.0),
                    job("j_1_0", "lab_1", hours=16, deadline=7, value=60.0)])
    w.judge_mode = "rule"
    w.blocks["b_a1"].status = BlockStatus.AUCTION
    w.auctions["a_1"] = Auction("a_1", "b_a1", opened_round=0, close_round=2)
    return w


def score(message: str, job_id: str | None = "j_0_0") -> float:
    w = judged_world()
    a = w.auctions["a_1"]
    a.pitches["lab_0"] = Pitch("lab_0", 5.0, job_id, message, 0)
    return judge_pitches(w, a)["lab_0"].score


def test_keyword_stuffing_earns_nothing():
    plain = score("")
    stuffed = score("URGENT critical emergency deadline priority important vital urgent urgent " * 5)
    assert stuffed == plain


def test_false_claims_score_below_no_claim_and_true_specific_claims_above_both():
    none_ = score("We would like this block.")
    false_hours = score("Our job needs 40 GPU-hours.")
    false_deadline = score("We must finish by round 3.")
    true_claim = score("Our job needs 16 GPU-hours by round 7.")
    assert false_hours < none_ and false_deadline < none_
    assert true_claim > none_ > false_hours


def judged_round(pitch_0: tuple[float, str], pitch_1: tuple[float, str]):
    """lab_0 and lab_1 pitch (bid, message) for their own jobs; the auction then closes."""
    w = judged_world()
    ep = Episode(w, controlled=())
    ep.step({"lab_0": act("make_pitch", payment=pitch_0[0], job_id="j_0_0", message=pitch_0[1]),
             "lab_1": act("make_pitch", payment=pitch_1[0], job_id="j_1_0", message=pitch_1[1])})
    ep.step({})
    return w, ep


def test_the_judge_awards_by_score_not_bid():
    w, ep = judged_round((3.0, "Our job needs 16 GPU-hours by round 7."), (9.0, "We need 99 GPU-hours by round 2."))
    a = w.auctions["a_1"]
    assert a.status == "awarded" and a.winner == "lab_0" and a.price == 3.0
    assert a.pitches["lab_0"].score > a.pitches["lab_1"].score
    assert any("false" in r for r in a.pitches["lab_1"].reasons)
    assert ep.last_rewards["lab_0"]["judge_argument_score"] > 0


def test_judge_mode_in_the_env_always_has_a_contested_resource():
    pitched = []
    for seed in range(8):
        env = GpuArenaEnv(task="market_round")
        obs = env.reset(seed=seed, judge_mode="rule")
        me = make_policy("rule_expert", seed=0)
        seen = False
        while not obs.done:
            obs = env.step(me.act(env.episode.observe("lab_0")))
            seen |= bool(obs.public_market.auctions)
        assert seen, seed
        world = env.episode.world
        for a in world.auctions.values():
            for p in a.pitches.values():
                pitched.append(p)
                assert p.score is not None and p.reasons
                # bots pitch from their needs, but never state a job value
                assert not any(f"{j.value:.2f}" in p.message or f"{j.value:g}" in p.message for j in world.jobs.values())
    assert pitched


def test_seats_see_the_judges_reasons_for_their_own_pitch_only():
    from gpu_arena.core.observe import observe

    w, _ep = judged_round((3.0, "We need 5 GPU-hours by round 4."), (2.0, "We need 16 GPU-hours by round 7."))
    mine = {p.lab_id: p for p in observe(w, "lab_1").public_market.auctions[0].pitches}
    assert mine["lab_1"].score is not None and mine["lab_1"].reasons
    assert mine["lab_0"].score is None and mine["lab_0"].reasons == () and mine["lab_0"].job_id is None
