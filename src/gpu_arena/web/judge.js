// "Judge mode": the pitches of a judged round with each score and the judge's reasons, from a stored
// judged episode (its replay: GET /api/episodes/{ref}/frames), or from one played here and now in a
// session of this page's own (POST /api/sessions with judge_mode "rule", then autostep to the end).
import { $, api, clear, closeSession, fill, fmt, h, prose, sectionRunner } from "./dom.js";
import { auctionsBlock } from "./observation.js";
import { showInReplays } from "./replays.js";

let weights = null;

export async function initJudge(ov, reward) {
  weights = reward.judge.weights;
  const tasks = ov.tasks.map((t) => t.task);
  fill($("#judge-task"), tasks, tasks.includes("market_round") ? "market_round" : tasks[0]); // three labs: rivals pitch
  fill($("#judge-policy"), ov.policies.seat, ov.policies.seat.includes("rule_expert") ? "rule_expert" : ov.policies.seat[0]);
  const w = weights;
  $("#judge-formula").textContent = `score = ${w.urgency} × urgency + ${w.evidence} × evidence + ${w.fairness} × fairness`;
  clear($("#judge-doc")).append(...reward.judge.doc.slice(1, 3).map(prose));
  $("#judge-episode").addEventListener("change", (e) => guarded(() => show(e.target.value)));
  $("#judge-form").addEventListener("submit", (e) => { e.preventDefault(); guarded(playJudged); });
  $("#judge-open").addEventListener("click", () => guarded(() => showInReplays($("#judge-episode").value)));
  document.addEventListener("arena:stored", () => guarded(() => loadList(true)));
  await guarded(() => loadList(false));
}

const guarded = sectionRunner("#judge-status", (busy) => { $("#judge-run").disabled = busy; });

async function loadList(keep, chosen = null) {
  const list = (await api("/api/episodes?judge_mode=rule&limit=100")).episodes;
  const select = $("#judge-episode");
  const want = chosen ?? (keep ? select.value : list[0]?.ref);
  fill(select, list.map((e) => e.ref), want, list.map((e) =>
    `${e.source === "eval" ? `run #${e.run_id} ${e.policy}` : `served ${e.created_at}`} · ${e.task}/${e.split} seed ${e.seed}`));
  if (!list.length) fill(select, [""], "", ["(none stored yet)"]);
  $("#judge-open").disabled = !list.length;
  if (!list.length) {
    $("#judge-status").textContent = "No judged episode is stored yet: play one here (or in Play with judge mode rule).";
    $("#judge-body").hidden = true;
    return;
  }
  if (!keep || chosen) await show(select.value);
}

async function playJudged() {
  const seed = Number.parseInt($("#judge-seed").value, 10);
  if (!Number.isInteger(seed) || seed < 0) throw new Error("the seed must be a whole number ≥ 0");
  const policy = $("#judge-policy").value;
  $("#judge-status").textContent = "Playing a judged episode…";
  let view = await api("/api/sessions", { method: "POST", body: { task: $("#judge-task").value, seed, judge_mode: "rule" } });
  const sid = view.session_id;
  try {
    while (!view.done) view = await api(`/api/sessions/${sid}/autostep`, { method: "POST", body: { policy } });
  } finally {
    await closeSession(sid);
  }
  if (!view.replay_id) throw new Error("the episode finished but this server does not store episodes");
  await loadList(true, view.replay_id);
}

async function show(ref) {
  const data = await api(`/api/episodes/${encodeURIComponent(ref)}/frames`);
  const last = data.frames[data.frames.length - 1];
  const auctions = last.auctions;
  const pitches = auctions.reduce((n, a) => n + Object.keys(a.pitches).length, 0);
  const body = $("#judge-body");
  body.hidden = false;
  body.dataset.ref = ref;
  $("#judge-status").textContent = `${data.task}/${data.split} seed ${data.seed}, ${data.steps} rounds: ` +
    `${auctions.length} contested resource${auctions.length === 1 ? "" : "s"}, ${pitches} pitch${pitches === 1 ? "" : "es"}. ` +
    "A finished episode hides nothing: every pitch's score and reasons are shown (a live seat sees only its own).";
  clear($("#judge-auctions")).append(auctionsBlock(auctions));
  const winners = auctions.filter((a) => a.winner).map((a) => `${a.winner} won ${a.block_id} for ${fmt(a.price, 2)}`);
  $("#judge-outcome").textContent = winners.length ? winners.join("; ") : "No block was awarded.";
}
