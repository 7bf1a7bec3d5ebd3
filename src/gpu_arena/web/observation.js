// One seat's observation as tables and lists, shared by the live arena, Play and Replays.
// Every cell is a field of an observation the API returned; nothing is computed here but formatting.
import { fmt, h, signed, table } from "./dom.js";

export function jobsTable(obs) {
  return table(["job", "hours", "deadline", "value", "min rel.", "status", "realised"],
    obs.private_jobs.map((j) => [j.job_id, `${j.assigned_hours}/${j.gpu_hours_required}`, j.deadline_round, fmt(j.value, 2),
      fmt(j.min_reliability, 2), j.status, fmt(j.realized_value, 2)]));
}

export function blocksTable(obs) {
  return table(["block", "GPUs", "window", "hours", "rel.", "energy", "status", "job"],
    obs.owned_blocks.map((b) => [b.block_id, b.gpu_count, `[${b.start_round}, ${b.end_round})`, b.gpu_hours, fmt(b.reliability, 2),
      fmt(b.energy_cost, 2), b.status, b.job_id ?? b.reserved_for ?? "–"]));
}

export function marketTable(obs) {
  return table(["block", "owner", "GPUs", "window", "rel.", "status", "value to you"],
    obs.public_market.blocks.map((b) => [b.block_id, b.owner ?? "market", b.gpu_count, `[${b.start_round}, ${b.end_round})`,
      fmt(b.reliability, 2), b.status, b.marginal_value === null ? "–" : signed(b.marginal_value, 2)]));
}

export function offersTable(obs) {
  return table(["offer", "from → to", "gives", "asks", "pays", "asks pay", "expires", "value to you", "status"],
    obs.active_offers.map((o) => [o.offer_id, `${o.sender} → ${o.target}`, o.block_ids.join(", ") || "–",
      o.requested_block_ids.join(", ") || "–", fmt(o.payment, 2), fmt(o.requested_payment, 2), o.expires_round,
      signed(o.value_to_me, 2), o.status]));
}

export function coalitionsTable(obs) {
  return table(["coalition", "members", "job", "hours", "consented", "status"],
    obs.active_coalitions.map((c) => [c.coalition_id, c.members.join(", "), c.job_id, `${c.pooled_hours}/${c.gpu_hours_required}`,
      c.consented.join(", ") || "–", c.status]));
}

export function labsTable(obs) {
  return table(["lab", "budget", "reputation", "blocks", "finished"],
    obs.visible_labs.map((l) => [l.lab_id + (l.lab_id === obs.controlled_lab_id ? " (you)" : ""), fmt(l.budget, 2),
      fmt(l.reputation, 3), l.n_blocks, l.finished ? "yes" : "no"]));
}

// Auctions as a seat sees them (its own pitch's score and reasons only) or, in a replay, the whole truth.
export function auctionsBlock(auctions) {
  if (!auctions.length) return h("p", { class: "muted", text: "no contested resource" });
  return h("div", {}, auctions.map((a) => h("div", { class: "auction", "data-auction": a.auction_id },
    h("p", {}, h("strong", { text: `${a.block_id}` }),
      ` auction ${a.auction_id}, rounds ${a.opened_round}–${a.close_round}: ${a.status}`,
      a.winner ? `, won by ${a.winner} for ${fmt(a.price, 2)}` : ""),
    pitchesTable(Array.isArray(a.pitches) ? a.pitches : Object.values(a.pitches)))));
}

export function pitchesTable(pitches) {
  if (!pitches.length) return h("p", { class: "muted", text: "no pitch" });
  return h("div", { class: "scroll" }, h("table", { class: "pitches" },
    h("thead", {}, h("tr", {}, ["lab", "bid", "round", "pitch", "judge's score", "reasons"].map((x) => h("th", { scope: "col", text: x })))),
    h("tbody", {}, pitches.map((p) => h("tr", { "data-lab": p.lab_id },
      h("td", { text: p.lab_id + (p.counter_to ? ` (against ${p.counter_to})` : "") }),
      h("td", { class: "num", text: fmt(p.bid, 2) }), h("td", { text: p.round_index }),
      h("td", { class: "pitch", text: p.message || "–" }),
      h("td", { class: "num score", "data-value": p.score === null ? "" : String(p.score), text: p.score === null ? "–" : fmt(p.score, 4) }),
      h("td", {}, p.reasons && p.reasons.length ? h("ul", { class: "reasons" }, p.reasons.map((r) => h("li", { text: r }))) : "–"))))));
}

export function eventsList(obs) {
  const events = obs.public_market.events;
  return events.length ? events.map((e) => h("li", {}, h("strong", { text: `r${e.round_index} ${e.kind}: ` }), e.text))
    : [h("li", { class: "muted", text: "none yet" })];
}

export function messagesList(obs) {
  const msgs = obs.message_history;
  return msgs.length ? msgs.map((m) => h("li", {}, h("strong", { text: `r${m.round_index} ${m.sender}${m.target ? ` → ${m.target}` : ""}: ` }), m.text))
    : [h("li", { class: "muted", text: "none yet" })];
}

// All of it as cards, for sections that render an observation in one go.
export function observationCards(obs, { auctions = null } = {}) {
  const card = (title, body, wide = false) => h("article", { class: wide ? "card wide" : "card" }, h("h3", { text: title }), body);
  return [
    card("Your jobs", jobsTable(obs)), card("Your blocks", blocksTable(obs)),
    card("Market blocks", marketTable(obs)), card("Labs", labsTable(obs)),
    card("Offers", offersTable(obs)), card("Coalitions", coalitionsTable(obs)),
    card("Auctions and pitches", auctionsBlock(auctions ?? obs.public_market.auctions), true),
    card("Events and shocks", h("ul", { class: "log" }, eventsList(obs))),
    card("Messages", h("ul", { class: "log" }, messagesList(obs))),
  ];
}

export function describeAction(action) {
  if (!action || !Object.keys(action).length) return "–";
  if (action.rejected) return `rejected (${action.rejected})`;
  const { action_type, ...rest } = action;
  const parts = Object.entries(rest).map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`);
  return parts.length ? `${action_type} ${parts.join(" ")}` : action_type;
}

export function resultText(result) {
  return result.ok ? (result.message ? `ok: ${result.message}` : "ok") : `${result.code}: ${result.message}`;
}
