// "Play": a person takes a seat in a REST session of this page's own (POST /api/sessions; the id lives
// only in this page's memory, so two browsers never share an episode). The move form is built from
// the action space the server describes (GET /api/reference/actions: each type's fields and their JSON
// schema); the choices in it (labs, blocks, offers, jobs) come from the current observation.
import { barChart } from "./charts.js";
import { $, api, clear, closeOnPageHide, closeSession, fill, fmt, h, kv, sectionRunner, signed } from "./dom.js";
import { buildMoveFields, collectMove } from "./moveform.js";
import { describeAction, observationCards, resultText } from "./observation.js";

let overview = null;
let space = null; // /api/reference/actions
let session = null; // {id, view, steps, base, done, origin}
const run = sectionRunner("#play-status", setButtons);

export function initPlay(ov, actionSpace) {
  overview = ov;
  space = actionSpace;
  fill($("#play-task"), ov.tasks.map((t) => t.task), ov.tasks[0].task);
  fill($("#play-split"), ov.splits, "train");
  fill($("#play-opponents"), ov.policies.opponents, ov.policies.default_opponents);
  fill($("#play-judge"), ov.judge_modes, ov.judge_modes[0]);
  fill($("#play-auto-policy"), ov.policies.seat, ov.policies.seat.includes("rule_expert") ? "rule_expert" : ov.policies.seat[0]);
  seats();
  $("#play-task").addEventListener("change", seats);
  const types = space.action_types.map((t) => t.type);
  fill($("#play-action-type"), types, types.includes("wait") ? "wait" : types[0]);
  $("#play-action-type").addEventListener("change", () => { buildFields(); preview(); });
  $("#play-action").addEventListener("input", preview);
  $("#play-action").addEventListener("change", preview);
  $("#play-setup").addEventListener("submit", (e) => { e.preventDefault(); run(takeSeat); });
  $("#play-action").addEventListener("submit", (e) => { e.preventDefault(); run(() => move(collect())); });
  $("#play-auto").addEventListener("click", () => run(autoMove));
  closeOnPageHide(() => session?.id);
  setButtons();
}

// every seat a world of this task can have (a world with fewer labs refuses a higher seat: the error shows)
function seats() {
  const task = overview.tasks.find((t) => t.task === $("#play-task").value);
  const n = task.labs[1];
  fill($("#play-seat"), Array.from({ length: n }, (_, i) => `lab_${i}`), "lab_0");
}

function setButtons(busy = run.busy()) {
  const live = session && !session.done;
  $("#play-new").disabled = busy;
  $("#play-submit").disabled = busy || !live;
  $("#play-auto").disabled = busy || !live;
}

async function closeCurrent() {
  await closeSession(session?.id);
  session = null;
}

async function takeSeat() {
  await closeCurrent();
  const seed = Number.parseInt($("#play-seed").value, 10);
  if (!Number.isInteger(seed) || seed < 0) throw new Error("the seed must be a whole number ≥ 0");
  const view = await api("/api/sessions", {
    method: "POST",
    body: { task: $("#play-task").value, split: $("#play-split").value, seed, seat: $("#play-seat").value,
      opponents: $("#play-opponents").value, judge_mode: $("#play-judge").value },
  });
  start(view, null, 0);
  $("#play-status").textContent = `You are ${view.observation.controlled_lab_id} in session ${view.session_id.slice(0, 8)}…, ` +
    `${view.observation.task} (${view.observation.split}, seed ${view.observation.metadata.seed}). Choose a move.`;
}

// A forked session (Replays): the page drives it exactly like one it opened itself.
export async function adoptSession(view, origin) {
  await closeCurrent();
  start(view, origin, origin.cumulative ?? 0);
  $("#play-status").classList.remove("error");
  $("#play-status").textContent = `Forked from episode ${origin.ref} at step ${origin.step}: you now play ` +
    `${view.observation.controlled_lab_id} in session ${view.session_id.slice(0, 8)}…, round ${view.observation.round_index}.`;
  $("#play").scrollIntoView();
  $("#play-action-type").focus();
}

function start(view, origin, base) {
  session = { id: view.session_id, view, steps: [], base, done: view.done, origin };
  $("#play-body").hidden = false;
  $("#play-body").dataset.sessionId = view.session_id;
  $("#play-result").className = "result";
  $("#play-result").textContent = origin ? "Forked: the next move is yours." : "Your seat is ready: the next move is yours.";
  render();
  buildFields();
  preview();
}

async function move(action) {
  const view = await api(`/api/sessions/${session.id}/step`, { method: "POST", body: action });
  record(view, action, "you");
}

async function autoMove() {
  const policy = $("#play-auto-policy").value;
  const view = await api(`/api/sessions/${session.id}/autostep`, { method: "POST", body: { policy } });
  record(view, view.action, policy);
}

function record(view, action, who) {
  const round = session.view.observation.round_index; // the round the move was made in, as events number it
  const obs = view.observation;
  const reward = view.reward ?? 0;
  const before = session.steps.length ? session.steps[session.steps.length - 1].cumulative : session.base;
  session.steps.push({ step: view.step_count, round, action, who, result: obs.last_action_result,
    reward, cumulative: before + reward });
  session.view = view;
  session.done = view.done;
  const res = obs.last_action_result;
  const box = $("#play-result");
  box.className = res.ok ? "result ok" : "result error";
  box.setAttribute("role", res.ok ? "status" : "alert");
  const penalty = obs.reward_breakdown.invalid_action_penalty;
  box.textContent = res.ok ? `Done: ${res.message || res.code}.`
    : `Refused — ${res.code}: ${res.message}. It counted as a wait` + (penalty ? ` (invalid_action_penalty ${signed(penalty)}).` : " (no penalty: another move came first this round).");
  render();
  buildFields();
  preview();
}

function render() {
  const { view, steps } = session;
  const obs = view.observation;
  const last = steps.length ? steps[steps.length - 1] : null;
  const total = last ? last.cumulative : session.base;
  clear($("#play-stats")).append(
    kv("round", `${obs.round_index} / ${obs.max_rounds}`, { id: "play-round", value: obs.round_index }),
    kv("you are", obs.controlled_lab_id),
    kv("budget", fmt(obs.controlled_lab_budget, 2), { id: "play-budget", value: obs.controlled_lab_budget }),
    kv("reputation", fmt(obs.controlled_lab_reputation, 3)),
    kv("BATNA", fmt(obs.batna, 2)), kv("surplus over BATNA", signed(obs.surplus_over_batna, 2), { id: "play-surplus", value: obs.surplus_over_batna }),
    kv("last reward", last ? signed(last.reward) : "–", { id: "play-reward", value: last ? last.reward : null }),
    kv(session.origin ? "return (with the forked steps)" : "return so far", signed(total), { id: "play-cumulative", value: total }),
    kv("done", session.done ? "yes" : "no"));
  const cols = overview.reward_columns.all;
  const br = obs.reward_breakdown || {};
  clear($("#play-breakdown")).append(barChart(cols, cols.map((c) => br[c] ?? 0), "Reward breakdown of your last move"));
  const tbody = clear($("#play-moves tbody"));
  for (const s of steps) {
    tbody.append(h("tr", {}, h("td", { text: s.step }), h("td", { text: s.round }), h("td", { text: s.who }),
      h("td", {}, h("code", { text: describeAction(s.action) })),
      h("td", { class: s.result.ok ? "" : "neg", text: resultText(s.result) }),
      h("td", { class: `num ${s.reward < 0 ? "neg" : "pos"}`, text: signed(s.reward) }),
      h("td", { class: "num", text: signed(s.cumulative) })));
  }
  clear($("#play-observation")).append(...observationCards(obs));
  const status = $("#play-status");
  if (session.done) {
    status.classList.remove("error");
    status.textContent = `Episode finished: return ${signed(total)}.`;
    if (view.replay_id) {
      status.append(" ", h("a", { href: `/api/episodes/${view.replay_id}`, id: "play-replay", "data-replay-id": view.replay_id, text: "stored replay" }));
      document.dispatchEvent(new CustomEvent("arena:stored", { detail: { ref: view.replay_id } }));
    }
  }
  setButtons();
}

// ------------------------------------------------------------------ the move form (moveform.js)

function spec() {
  return space.action_types.find((t) => t.type === $("#play-action-type").value);
}

function buildFields() {
  const t = spec();
  $("#play-action-desc").textContent = t.description;
  if (!session) {
    clear($("#play-fields"));
    return;
  }
  buildMoveFields($("#play-fields"), "play", space, t, session.view.observation);
}

function collect() {
  return collectMove($("#play-fields"), spec());
}

function preview() {
  $("#play-json").textContent = session ? JSON.stringify(collect(), null, 1) : "";
}
