// "Play": a person takes a seat in a REST session of this page's own (POST /api/sessions; the id lives
// only in this page's memory, so two browsers never share an episode). The move form is built from
// the action space the server describes (GET /api/reference/actions: each type's fields and their JSON
// schema); the choices in it (labs, blocks, offers, jobs) come from the current observation.
import { barChart } from "./charts.js";
import { $, api, clear, closeOnPageHide, closeSession, fill, fmt, h, kv, sectionRunner, signed } from "./dom.js";
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

// ------------------------------------------------------------------ the move form, from the schema

function spec() {
  return space.action_types.find((t) => t.type === $("#play-action-type").value);
}

function choices(name, obs, type) {
  const me = obs.controlled_lab_id;
  const others = obs.visible_labs.filter((l) => l.lab_id !== me);
  switch (name) {
    case "target_lab_id":
    case "member_lab_ids":
      return others.map((l) => ({ value: l.lab_id, label: `${l.lab_id} (budget ${fmt(l.budget, 2)}, reputation ${fmt(l.reputation, 2)})` }));
    case "block_ids":
      return obs.owned_blocks.map((b) => ({ value: b.block_id, label: `${b.block_id}: ${b.gpu_count} GPUs, rounds ${b.start_round}–${b.end_round - 1}, ${b.status}` }));
    case "requested_block_ids":
      return obs.public_market.blocks.filter((b) => b.owner && b.owner !== me)
        .map((b) => ({ value: b.block_id, label: `${b.block_id} of ${b.owner}: ${b.gpu_count} GPUs, rounds ${b.start_round}–${b.end_round - 1}` +
          (b.marginal_value === null ? "" : `, worth ${signed(b.marginal_value, 2)} to you`) }));
    case "offer_id":
      return obs.active_offers.filter((o) => type !== "accept_offer" && type !== "counter_offer" || o.direction === "incoming")
        .map((o) => ({ value: o.offer_id, label: `${o.offer_id}: ${o.direction} ${o.sender} → ${o.target}, worth ${signed(o.value_to_me, 2)} to you` }));
    case "coalition_id":
      return obs.active_coalitions.map((c) => ({ value: c.coalition_id, label: `${c.coalition_id}: ${c.members.join(", ")} for ${c.job_id} (${c.status})` }));
    case "job_id":
      return obs.private_jobs.map((j) => ({ value: j.job_id, label: `${j.job_id}: ${j.gpu_hours_required} GPU-h by round ${j.deadline_round} (${j.status})` }));
    default:
      return null;
  }
}

function fieldLabel(f) {
  return f.required ? `${f.name} (required)` : f.name;
}

function widget(f, obs, type) {
  const id = `play-f-${f.name}`;
  const kind = f.schema.type;
  const help = f.description || f.schema.description || "";
  const opts = choices(f.name, obs, type);
  if (f.name === "conditions") {
    return h("fieldset", { class: "field", "data-field": f.name, "data-kind": "flags" }, h("legend", { text: fieldLabel(f) }),
      space.condition_keys.map((k) => h("label", { class: "check" }, h("input", { type: "checkbox", id: `${id}-${k}`, value: k }), ` ${k}`)),
      help ? h("p", { class: "help", text: help }) : null);
  }
  if (f.name === "shares") {
    const labs = [obs.controlled_lab_id, ...obs.visible_labs.map((l) => l.lab_id).filter((l) => l !== obs.controlled_lab_id)];
    return h("fieldset", { class: "field", "data-field": f.name, "data-kind": "shares" }, h("legend", { text: fieldLabel(f) }),
      labs.map((l) => h("label", { class: "inline" }, `${l} `, h("input", { type: "number", id: `${id}-${l}`, "data-lab": l, min: "0", max: "1", step: "0.05" }))),
      h("p", { class: "help", text: "one share for you and each member, summing to 1; empty: not a member" }));
  }
  if (kind === "array" && opts) {
    return h("fieldset", { class: "field", "data-field": f.name, "data-kind": "multi" }, h("legend", { text: fieldLabel(f) }),
      opts.length ? opts.map((o) => h("label", { class: "check" }, h("input", { type: "checkbox", id: `${id}-${o.value}`, value: o.value }), ` ${o.label}`))
        : h("p", { class: "muted", text: "none available" }),
      help ? h("p", { class: "help", text: help }) : null);
  }
  const describedBy = help ? `${id}-help` : null;
  let control;
  if (opts) {
    const none = f.required ? (opts.length ? [] : [{ value: "", label: "(none available)" }]) : [{ value: "", label: "(none)" }];
    control = h("select", { id, "data-field": f.name, "data-kind": "string", "aria-describedby": describedBy },
      [...none, ...opts].map((o, i) => h("option", { value: o.value, text: o.label, selected: i === 0 })));
  } else if (kind === "number" || kind === "integer") {
    const limits = f.name === "expires_in" ? space.limits[type === "form_coalition" ? "coalition_expires_in" : "offer_expires_in"] : null;
    control = h("input", { id, type: "number", "data-field": f.name, "data-kind": kind, min: kind === "integer" ? "1" : "0",
      max: limits ? String(limits.max) : null, step: kind === "integer" ? "1" : "0.01", "aria-describedby": describedBy,
      placeholder: limits ? `default ${limits.default}` : null });
  } else if (kind === "array") {
    control = h("input", { id, type: "text", "data-field": f.name, "data-kind": "list", "aria-describedby": describedBy, placeholder: "ids, comma-separated" });
  } else {
    control = h("input", { id, type: "text", "data-field": f.name, "data-kind": "string", "aria-describedby": describedBy,
      maxlength: f.name === "message" ? String(space.limits.max_message_chars) : null });
  }
  return h("div", { class: "field" }, h("label", { for: id, text: fieldLabel(f) }), control,
    help ? h("p", { class: "help", id: describedBy, text: help }) : null);
}

function buildFields() {
  const t = spec();
  $("#play-action-desc").textContent = t.description;
  const box = clear($("#play-fields"));
  if (!session) return;
  const obs = session.view.observation;
  if (!t.fields.length) box.append(h("p", { class: "muted", text: "This action takes no arguments." }));
  for (const f of t.fields) box.append(widget(f, obs, t.type));
}

function collect() {
  const t = spec();
  const action = { action_type: t.type };
  for (const f of t.fields) {
    const el = document.querySelector(`#play-fields [data-field="${f.name}"]`);
    if (!el) continue;
    const kind = el.dataset.kind;
    let v;
    if (kind === "multi") {
      v = [...el.querySelectorAll("input:checked")].map((c) => c.value);
      if (!v.length) v = undefined;
    } else if (kind === "flags") {
      const on = [...el.querySelectorAll("input:checked")].map((c) => c.value);
      v = on.length ? Object.fromEntries(on.map((k) => [k, true])) : undefined;
    } else if (kind === "shares") {
      const pairs = [...el.querySelectorAll("input")].filter((i) => i.value !== "").map((i) => [i.dataset.lab, Number(i.value)]);
      v = pairs.length ? Object.fromEntries(pairs) : undefined;
    } else if (kind === "list") {
      const ids = el.value.split(",").map((x) => x.trim()).filter(Boolean);
      v = ids.length ? ids : undefined;
    } else if (kind === "number" || kind === "integer") {
      v = el.value === "" ? undefined : Number(el.value);
    } else {
      v = el.value === "" ? undefined : el.value;
    }
    if (v !== undefined) action[f.name] = v;
  }
  return action;
}

function preview() {
  $("#play-json").textContent = session ? JSON.stringify(collect(), null, 1) : "";
}
