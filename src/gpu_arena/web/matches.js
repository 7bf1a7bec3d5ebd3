// "Matches": live matches in which several players hold seats of one episode (POST /api/matches).
// Starting one gives a link per remote seat: #match=<id>&seat=<lab>&token=<token>. The token stays in
// the link's fragment, which browsers never send to a server; the page sends it only as the
// Authorization header of that seat's own requests. A seat's page polls its seat once a second and
// redraws when the round resolves.
import { $, api, clear, fill, fmt, h, kv, sectionRunner, signed } from "./dom.js";
import { buildMoveFields, collectMove } from "./moveform.js";
import { observationCards, resultText } from "./observation.js";

const POLL_MS = 1000;
let overview = null;
let space = null; // /api/reference/actions
let held = null; // {match, seat, token, state, timer}
const run = sectionRunner("#match-status", setButtons, { exclusive: false });
// The background poll must not toggle the buttons: a poll in flight that disabled "Send" for its few
// milliseconds swallowed a click landing in that window (the move was never sent, the round never
// resolved). Only the person's own actions (start, send) hold the buttons.
const poll = sectionRunner("#match-status", () => {}, { exclusive: false });

export function initMatches(ov, actionSpace) {
  overview = ov;
  space = actionSpace;
  fill($("#match-task"), ov.tasks.map((t) => t.task), ov.tasks[0].task);
  fill($("#match-split"), ov.splits, "train");
  seatChoices();
  $("#match-task").addEventListener("change", seatChoices);
  const types = space.action_types.map((t) => t.type);
  fill($("#match-action-type"), types, types.includes("wait") ? "wait" : types[0]);
  $("#match-action-type").addEventListener("change", buildFields);
  $("#match-setup").addEventListener("submit", (e) => { e.preventDefault(); run(start); });
  $("#match-action").addEventListener("submit", (e) => { e.preventDefault(); run(send); });
  window.addEventListener("hashchange", () => run(openFromHash));
  run(openFromHash);
}

// one select per seat a world of this task can have: the first two remote, the rest the world's archetypes
function seatChoices() {
  const task = overview.tasks.find((t) => t.task === $("#match-task").value);
  const fallback = overview.policies.default_opponents;
  const kinds = ["remote", fallback, ...overview.policies.seat];
  const box = clear($("#match-seats"));
  for (let i = 0; i < task.labs[1]; i++) {
    const select = h("select", { id: `match-seat-lab_${i}`, "data-seat": `lab_${i}` });
    fill(select, kinds, i < 2 ? "remote" : fallback);
    box.append(h("label", {}, `lab_${i} `, select));
  }
  if (task.labs[0] !== task.labs[1]) {
    box.append(h("p", { class: "help", text: `Worlds of this task have ${task.labs[0]} or ${task.labs[1]} labs: a seat the world lacks is refused.` }));
  }
}

function setButtons(busy = run.busy()) {
  $("#match-new").disabled = busy;
  const live = held && held.state && !held.state.done && !held.state.acted;
  $("#match-submit").disabled = busy || !live;
}

async function start() {
  const seed = Number.parseInt($("#match-seed").value, 10);
  if (!Number.isInteger(seed) || seed < 0) throw new Error("the seed must be a whole number ≥ 0");
  const seats = {};
  for (const select of document.querySelectorAll("#match-seats select")) {
    if (select.value !== overview.policies.default_opponents) seats[select.dataset.seat] = select.value;
  }
  const created = await api("/api/matches", {
    method: "POST",
    body: { task: $("#match-task").value, split: $("#match-split").value, seed, seats,
      round_timeout_s: Number($("#match-timeout").value) },
  });
  const links = clear($("#match-links"));
  for (const [seat, token] of Object.entries(created.tokens)) {
    const href = `${location.origin}${location.pathname}#match=${created.match_id}&seat=${seat}&token=${token}`;
    links.append(h("li", {}, `${seat}: `, h("a", { href, class: "match-link", "data-seat": seat, text: href })));
  }
  $("#match-status").textContent = `Match ${created.match_id.slice(0, 8)}… started: share one link per remote seat ` +
    "(whoever has a link holds that seat), or open one here.";
}

async function openFromHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  if (!params.get("match") || !params.get("seat") || !params.get("token")) return;
  if (held?.timer) clearTimeout(held.timer);
  held = { match: params.get("match"), seat: params.get("seat"), token: params.get("token"), state: null, timer: null };
  $("#match-seat").hidden = false;
  await refresh();
  document.querySelector("#matches").scrollIntoView();
}

async function seatApi(path, options = {}) {
  return api(`/api/matches/${held.match}/seats/${held.seat}${path}`,
    { ...options, headers: { Authorization: `Bearer ${held.token}` } });
}

async function refresh() {
  const current = held;
  let state;
  try {
    state = await seatApi("");
  } finally {
    // one polling chain per seat while the match runs (a failed poll is shown and retried)
    if (current === held && !(held.state && held.state.done)) {
      clearTimeout(held.timer);
      held.timer = setTimeout(() => poll(refresh), POLL_MS);
    }
  }
  if (current !== held) return; // another seat was opened meanwhile
  const before = held.state;
  // answers can cross on the wire: never step back to an older round, or to "not acted" in the same one
  if (before && (state.round < before.round || (state.round === before.round && before.acted && !state.acted && !state.done))) return;
  const changed = !before || before.round !== state.round || before.done !== state.done || before.acted !== state.acted;
  held.state = state;
  if (changed) render();
  if (state.done) clearTimeout(held.timer);
}

async function send() {
  const spec = space.action_types.find((t) => t.type === $("#match-action-type").value);
  const accepted = await seatApi("/act", { method: "POST", body: collectMove($("#match-fields"), spec) });
  $("#match-result").className = "result ok";
  $("#match-result").textContent = accepted.resolved ? `Round ${accepted.round} resolved with your move.`
    : `Move sent for round ${accepted.round}; waiting for ${accepted.waiting_for.join(", ")}.`;
  await refresh();
}

function render() {
  const s = held.state;
  const obs = s.observation;
  clear($("#match-stats")).append(
    kv("match", `${s.match_id.slice(0, 8)}…`),
    kv("you are", s.seat, { id: "match-you" }),
    kv("round", `${s.round} / ${obs.max_rounds}`, { id: "match-round", value: s.round }),
    kv("budget", fmt(obs.controlled_lab_budget, 2)),
    kv("surplus over BATNA", signed(obs.surplus_over_batna, 2)),
    kv("last reward", signed(obs.reward ?? 0), { id: "match-reward", value: obs.reward ?? 0 }),
    kv("waiting for", s.done ? "–" : (s.waiting_for.join(", ") || "–"), { id: "match-waiting" }),
    kv("done", s.done ? "yes" : "no", { id: "match-done" }));
  const result = $("#match-result");
  if (s.notice) {
    result.className = "result error";
    result.textContent = s.notice;
  } else if (s.round > 0 && !s.acted) {
    result.className = obs.last_action_result.ok ? "result ok" : "result error";
    result.textContent = `Your last move: ${resultText(obs.last_action_result)}.`;
  }
  if (s.done) {
    result.className = "result ok";
    result.textContent = "The match is over.";
    if (s.replay_id) result.append(" ", h("a", { href: `/api/episodes/${s.replay_id}`, id: "match-replay", "data-replay-id": s.replay_id, text: "stored replay" }));
  } else if (s.acted) {
    result.className = "result ok";
    result.textContent = `Move sent for round ${s.round}; waiting for ${s.waiting_for.join(", ")}.`;
  }
  clear($("#match-observation")).append(...observationCards(obs));
  buildFields();
  setButtons();
}

function buildFields() {
  const spec = space.action_types.find((t) => t.type === $("#match-action-type").value);
  $("#match-action-desc").textContent = spec.description;
  if (held?.state) buildMoveFields($("#match-fields"), "match", space, spec, held.state.observation);
}
