// "Replays": any stored episode step by step (GET /api/episodes/{ref}/frames), two side by side (B lists
// the stored episodes of A's task, split and seed), and a fork at the shown step into a new session that
// Play then drives (POST /api/episodes/{ref}/fork?step=k).
import { barChart } from "./charts.js";
import { $, api, clear, fill, fmt, h, kv, sectionRunner, signed, table } from "./dom.js";
import { describeAction, observationCards } from "./observation.js";
import { adoptSession } from "./play.js";

let overview = null;
const panes = { a: { data: null, k: 0 }, b: { data: null, k: 0 } };

export async function initReplays(ov) {
  overview = ov;
  fill($("#replays-source"), ["all", "eval", "served", "league"], "all",
    ["all stored episodes", "evaluation episodes", "served episodes", "league matches"]);
  fill($("#replays-task"), ["", ...ov.tasks.map((t) => t.task)], "", ["any task", ...ov.tasks.map((t) => t.task)]);
  $("#replays-source").addEventListener("change", () => loadList());
  $("#replays-task").addEventListener("change", () => loadList());
  $("#replays-refresh").addEventListener("click", () => loadList());
  for (const p of ["a", "b"]) {
    $(`#replay-${p}-episode`).addEventListener("change", (e) => guarded(() => choose(p, e.target.value)));
    $(`#replay-${p}-range`).addEventListener("input", (e) => seek(p, Number(e.target.value), true));
    $(`#replay-${p}-prev`).addEventListener("click", () => seek(p, panes[p].k - 1, true));
    $(`#replay-${p}-next`).addEventListener("click", () => seek(p, panes[p].k + 1, true));
    $(`#replay-${p}-fork`).addEventListener("click", () => guarded(() => fork(p)));
  }
  document.addEventListener("arena:stored", () => loadList(true));
  await loadList();
}

// panes load independently: A and B may load at once
const guarded = sectionRunner("#replays-status", () => {}, { exclusive: false });

function label(e) {
  const who = e.source === "eval" ? `run #${e.run_id} ${e.policy}`
    : e.source === "league" ? `league match ${e.league_index}: ${e.policy}`
      : `served ${e.created_at}${e.forked_from ? " (fork)" : ""}`;
  return `${who} · ${e.task}/${e.split} seed ${e.seed} · ${e.seat}${e.judge_mode !== "none" ? " · judged" : ""} · return ${signed(e.episode_return)}`;
}

export async function loadList(keep = false) {
  const params = new URLSearchParams({ source: $("#replays-source").value, limit: "200" });
  if ($("#replays-task").value) params.set("task", $("#replays-task").value);
  const status = $("#replays-status");
  let list;
  try {
    list = (await api(`/api/episodes?${params}`)).episodes;
  } catch (e) {
    status.classList.add("error");
    status.textContent = `Could not list stored episodes: ${e.message}`;
    return;
  }
  status.classList.remove("error");
  const select = $("#replay-a-episode");
  const previous = select.value;
  fill(select, list.map((e) => e.ref), keep ? previous : list[0]?.ref, list.map(label));
  $("#replays-body").hidden = !list.length;
  $("#replays-empty").hidden = !!list.length;
  if (!list.length) {
    status.textContent = "No stored episode yet: play one (Live arena or Play), or run an evaluation with --replays.";
    return;
  }
  status.textContent = `${list.length} stored episode${list.length === 1 ? "" : "s"} listed, newest first.`;
  if (!keep || !panes.a.data || select.value !== panes.a.data.ref) await guarded(() => choose("a", select.value));
}

async function choose(p, ref) {
  const pane = panes[p];
  if (!ref) {
    pane.data = null;
    renderPane(p);
    return;
  }
  pane.data = await api(`/api/episodes/${encodeURIComponent(ref)}/frames`);
  pane.k = Math.min(pane.k, pane.data.steps);
  const range = $(`#replay-${p}-range`);
  range.max = String(pane.data.steps);
  range.value = String(pane.k);
  renderPane(p);
  if (p === "a") await sameWorld();
}

// B: the other stored episodes of A's world (task, split, seed), e.g. another policy or before/after training
async function sameWorld() {
  const a = panes.a.data;
  const params = new URLSearchParams({ task: a.task, split: a.split, seed: String(a.seed), limit: "100" });
  const list = (await api(`/api/episodes?${params}`)).episodes.filter((e) => e.ref !== a.ref);
  const select = $("#replay-b-episode");
  const keep = panes.b.data && list.some((e) => e.ref === panes.b.data.ref) ? panes.b.data.ref : list[0]?.ref ?? "";
  fill(select, ["", ...list.map((e) => e.ref)], keep, [`(none${list.length ? "" : ": no other episode of this world is stored"})`, ...list.map(label)]);
  await choose("b", keep);
}

function seek(p, k, fromUser) {
  const pane = panes[p];
  if (!pane.data) return;
  pane.k = Math.max(0, Math.min(pane.data.steps, k));
  $(`#replay-${p}-range`).value = String(pane.k);
  renderPane(p);
  const other = p === "a" ? "b" : "a";
  if (fromUser && $("#replays-sync").checked && panes[other].data) seek(other, pane.k, false);
}

async function fork(p) {
  const pane = panes[p];
  const frame = pane.data.frames[pane.k];
  const view = await api(`/api/episodes/${encodeURIComponent(pane.data.ref)}/fork?step=${pane.k}`, { method: "POST" });
  await adoptSession(view, { ref: pane.data.ref, step: pane.k, cumulative: frame.cumulative });
}

function renderPane(p) {
  const pane = panes[p];
  const body = $(`#replay-${p}-body`);
  body.hidden = !pane.data;
  $(`#replay-${p}-controls`).hidden = !pane.data;
  if (!pane.data) return;
  const d = pane.data;
  const f = d.frames[pane.k];
  const obs = f.observation;
  body.dataset.ref = d.ref;
  body.dataset.step = String(pane.k);
  $(`#replay-${p}-range`).setAttribute("aria-valuetext", `step ${pane.k} of ${d.steps}, round ${f.round_index}`);
  $(`#replay-${p}-step`).textContent = `step ${pane.k} / ${d.steps}`;
  $(`#replay-${p}-prev`).disabled = pane.k === 0;
  $(`#replay-${p}-next`).disabled = pane.k === d.steps;
  // a fork must leave a round to play
  $(`#replay-${p}-fork`).disabled = pane.k >= d.steps;
  clear($(`#replay-${p}-stats`)).append(
    kv("policy", d.source === "eval" ? d.policy : `${d.policy} (served)`), kv("seat", d.seat),
    kv("round", `${f.round_index} / ${f.max_rounds}`, { id: `replay-${p}-round`, value: f.round_index }),
    kv("reward", f.reward === null ? "–" : signed(f.reward), { id: `replay-${p}-reward`, value: f.reward }),
    kv("return so far", signed(f.cumulative), { id: `replay-${p}-cumulative`, value: f.cumulative }),
    kv("budget", fmt(obs.controlled_lab_budget, 2), { id: `replay-${p}-budget`, value: obs.controlled_lab_budget }),
    kv("episode return", signed(d.episode_return), { id: `replay-${p}-return`, value: d.episode_return }),
    kv("done", f.done ? "yes" : "no"));
  const rnd = f.round;
  clear($(`#replay-${p}-round-table`)).append(rnd
    ? table(["seat", "action", "result", "reward"], Object.keys(rnd.rewards).sort().map((lid) => [
      lid + (lid === d.seat ? " *" : ""), describeAction(rnd.actions[lid]),
      rnd.results[lid] ? (rnd.results[lid][0] ? "ok" : rnd.results[lid][1]) : "–", signed(rnd.rewards[lid])]))
    : h("p", { class: "muted", text: "the reset: no round played yet" }));
  const cols = overview.reward_columns.all;
  const br = obs.reward_breakdown || {};
  clear($(`#replay-${p}-breakdown`)).append(barChart(cols, cols.map((c) => br[c] ?? 0), `Reward breakdown at step ${pane.k}`));
  clear($(`#replay-${p}-observation`)).append(...observationCards(obs, { auctions: f.auctions }));
}

// Judge mode opens an episode here ("open in Replays").
export async function showInReplays(ref) {
  $("#replays-source").value = "all";
  $("#replays-task").value = "";
  await loadList(true);
  $("#replay-a-episode").value = ref;
  await choose("a", ref);
  $("#replays").scrollIntoView();
  $("#replay-a-range").focus();
}
