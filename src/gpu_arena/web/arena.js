// "Live arena": a REST session of this page's own, stepped round by round by a server-side policy
// (POST /api/sessions/{id}/autostep). Everything shown is the session's real observation.
import { barChart, lineChart } from "./charts.js";
import { $, api, clear, closeOnPageHide, closeSession, fill, fmt, h, sectionRunner, signed } from "./dom.js";
import { blocksTable, coalitionsTable, describeAction, eventsList, jobsTable, messagesList, offersTable } from "./observation.js";

let overview = null;
let session = null; // {id, steps: [...], cumulative, done, view}
const run = sectionRunner("#arena-status", setButtons);

export function initArena(ov) {
  overview = ov;
  fill($("#arena-task"), ov.tasks.map((t) => t.task), ov.tasks[0].task);
  fill($("#arena-split"), ov.splits, "train");
  fill($("#arena-opponents"), [ov.policies.default_opponents, ...ov.policies.seat], ov.policies.default_opponents);
  fill($("#arena-policy"), ov.policies.seat, ov.policies.seat.includes("rule_expert") ? "rule_expert" : ov.policies.seat[0]);
  $("#arena-form").addEventListener("submit", (e) => { e.preventDefault(); run(newEpisode); });
  $("#arena-step").addEventListener("click", () => run(stepOnce));
  $("#arena-play").addEventListener("click", () => run(playToEnd));
  closeOnPageHide(() => session?.id);
}

function setButtons(busy = run.busy()) {
  const live = session && !session.done;
  $("#arena-new").disabled = busy;
  $("#arena-step").disabled = busy || !live;
  $("#arena-play").disabled = busy || !live;
}

async function newEpisode() {
  await closeSession(session?.id);
  session = null;
  const seed = Number.parseInt($("#arena-seed").value, 10);
  if (!Number.isInteger(seed) || seed < 0) throw new Error("the seed must be a whole number ≥ 0");
  const view = await api("/api/sessions", {
    method: "POST",
    body: { task: $("#arena-task").value, split: $("#arena-split").value, seed, opponents: $("#arena-opponents").value },
  });
  session = { id: view.session_id, steps: [], cumulative: 0, done: view.done, view };
  $("#arena-body").hidden = false;
  render();
}

async function stepOnce() {
  const round = session.view.observation.round_index; // the round the move is made in, as events number it
  const view = await api(`/api/sessions/${session.id}/autostep`, { method: "POST", body: { policy: $("#arena-policy").value } });
  const obs = view.observation;
  const reward = view.reward ?? 0;
  session.cumulative += reward;
  session.steps.push({ step: view.step_count, round, action: view.action, result: obs.last_action_result,
    reward, cumulative: session.cumulative, breakdown: obs.reward_breakdown });
  session.done = view.done;
  session.view = view;
  render();
}

async function playToEnd() {
  while (session && !session.done) {
    await stepOnce();
    await new Promise((r) => setTimeout(r, 120)); // let a person watch the rounds go by
  }
}

function render() {
  const { view, steps } = session;
  const obs = view.observation;
  const status = $("#arena-status");
  if (session.done) {
    const replay = view.replay_id;
    status.textContent = `Episode finished after ${steps.length} steps: return ${signed(session.cumulative)}.`;
    if (replay) {
      status.append(" ", h("a", { href: `/api/episodes/${replay}`, id: "arena-replay", "data-replay-id": replay, text: "stored replay" }));
      document.dispatchEvent(new CustomEvent("arena:stored", { detail: { ref: replay } })); // Replays lists it
    }
  } else {
    status.textContent = `Session ${session.id.slice(0, 8)}…, ${obs.task} (${obs.split}, seed ${obs.metadata.seed}): round ${obs.round_index} of ${obs.max_rounds}.`;
  }

  const cum = h("span", { class: "v", id: "arena-cumulative", "data-value": String(session.cumulative), text: signed(session.cumulative) });
  const last = steps.length ? steps[steps.length - 1] : null;
  clear($("#arena-stats")).append(
    kv("round", `${obs.round_index} / ${obs.max_rounds}`), kv("lab", obs.controlled_lab_id),
    kv("budget", fmt(obs.controlled_lab_budget, 2)), kv("reputation", fmt(obs.controlled_lab_reputation, 3)),
    kv("BATNA", fmt(obs.batna, 2)), kv("surplus over BATNA", signed(obs.surplus_over_batna, 2)),
    kv("last reward", last ? signed(last.reward) : "–"), h("div", {}, h("span", { class: "k", text: "cumulative reward" }), cum),
    kv("done", session.done ? "yes" : "no"));

  const cols = overview.reward_columns.all;
  const br = obs.reward_breakdown || {};
  clear($("#arena-breakdown")).append(barChart(cols, cols.map((c) => br[c] ?? 0), "Reward breakdown of the last step"));
  clear($("#arena-cumulative-chart")).append(lineChart(steps.map((s) => s.cumulative), "Cumulative reward by step"));

  const tbody = clear($("#arena-steps tbody"));
  for (const s of steps) {
    tbody.append(h("tr", {}, h("td", { text: s.step }), h("td", { text: s.round }), h("td", {}, h("code", { text: describeAction(s.action) })),
      h("td", { class: s.result.ok ? "" : "neg", text: s.result.ok ? s.result.code : `${s.result.code}: ${s.result.message}` }),
      h("td", { class: `num ${s.reward < 0 ? "neg" : "pos"}`, text: signed(s.reward) }), h("td", { class: "num", text: signed(s.cumulative) })));
  }

  clear($("#arena-jobs")).append(jobsTable(obs));
  clear($("#arena-blocks")).append(blocksTable(obs));
  clear($("#arena-offers")).append(offersTable(obs));
  clear($("#arena-coalitions")).append(coalitionsTable(obs));
  clear($("#arena-events")).append(...eventsList(obs));
  clear($("#arena-messages")).append(...messagesList(obs));
  setButtons();
}

function kv(k, v) {
  return h("div", {}, h("span", { class: "k", text: k }), h("span", { class: "v", text: v }));
}
