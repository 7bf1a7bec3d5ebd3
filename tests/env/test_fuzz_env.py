"""Fuzz the environment's step with arbitrary, mostly ill-typed actions: it must never raise,
every error is structured, and an invalid action leaves the world as a wait would."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_arena import GpuArenaEnv
from gpu_arena.core.types import REWARD_COLUMNS, Action

FIELDS = ["action_type", "target_lab_id", "offer_id", "coalition_id", "block_ids", "requested_block_ids", "job_id",
          "payment", "requested_payment", "message", "conditions", "member_lab_ids", "shares", "expires_in"]
ACTIONS = ["send_offer", "accept_offer", "reject_offer", "counter_offer", "make_pitch", "counter_pitch",
           "reserve_capacity", "release_capacity", "form_coalition", "commit_to_coalition", "allocate_to_job",
           "send_message", "wait", "finish"]

# lone surrogates: a Python str may hold them, UTF-8 (and so JSON out) cannot
surrogates = st.text(st.characters(categories=["Cs"]), min_size=1, max_size=3).map(lambda t: f"hi {t}")
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10**12, 10**12), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30), st.sampled_from(["lab_0", "lab_1", "lab_2", "b_0_0", "b_1_0", "j_0_0", "o_1", "c_1"]),
    surrogates)
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=30),
                                                      st.dictionaries(st.text(max_size=10), inner, max_size=6)),
                      max_leaves=40)
actions = st.one_of(
    st.dictionaries(st.sampled_from([*FIELDS, "bogus"]), values, max_size=8).map(
        lambda d: d if "action_type" in d else {**d, "action_type": "send_offer"}),
    st.fixed_dictionaries({"action_type": st.sampled_from(ACTIONS)},
                          optional={f: values for f in FIELDS[1:]}),
    st.fixed_dictionaries({"action_type": st.sampled_from(ACTIONS), "message": surrogates},
                          optional={"target_lab_id": st.sampled_from(["lab_1", "lab_2"]), "payment": st.just(1.0)}),
    # core actions (an in-process policy's) with any value in any field, arrays included
    st.builds(lambda kind, name, value: Action(kind, **{name: value}), st.sampled_from(ACTIONS),
              st.sampled_from(FIELDS[1:]), st.one_of(values, st.just(np.array(["b_0_0", "b_1_0"])),
                                                     st.just(np.float64(1.5)), st.just(np.array([]))).filter(
                  lambda v: v is not None)),
    st.text(max_size=60), st.none(), st.integers(), st.lists(scalars, max_size=4))


@settings(max_examples=600)
@given(st.sampled_from(["single_trade", "market_round", "coalition_market"]), st.integers(0, 50),
       st.lists(actions, min_size=1, max_size=6))
def test_step_never_raises_and_errors_are_structured(task, seed, script):
    env = GpuArenaEnv(task=task, opponents="random_valid")
    obs = env.reset(seed=seed)
    for raw in script:
        if obs.done:
            break
        obs = env.step(raw)
        res = obs.last_action_result
        assert isinstance(res.code, str) and res.code and isinstance(res.message, str)
        assert set(obs.reward_breakdown) == set(REWARD_COLUMNS)
        assert all(math.isfinite(v) for v in obs.reward_breakdown.values())
        assert -1.0 <= obs.reward <= 1.0
        if not res.ok:
            assert obs.reward_breakdown["invalid_action_penalty"] < 0
        obs.model_dump_json()  # whatever was accepted still renders
        world = env.state.world
        assert all(math.isfinite(lab["budget"]) and lab["budget"] >= -1e-9 for lab in world["labs"])
