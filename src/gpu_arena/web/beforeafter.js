// "Before vs after": one holdout world of a pipeline run (gpu-arena train pipeline) played by the SFT
// start and by the trained model, side by side, from the pipeline's stored evaluation replays
// (GET /api/training/pipelines/{id}/compare?task=&seed=). The default world is the training task's
// seed where the two returns differ most. Each side opens in Replays for the step-by-step view.
import { seriesChart } from "./charts.js";
import { $, api, clear, fill, h, kv, sectionRunner, signed } from "./dom.js";
import { describeAction } from "./observation.js";
import { showInReplays } from "./replays.js";

const ROLES = ["sft", "trained"];
let current = null; // the shown comparison
const guarded = sectionRunner("#ba-status");

export async function initBeforeAfter(ov) {
  const status = $("#ba-status");
  $("#ba-command").textContent = ov.training.pipeline_command;
  let runs;
  try {
    runs = (await api("/api/training/runs?kind=pipeline&limit=100")).runs
      .filter((r) => r.summary && r.summary.evidence);
  } catch (e) {
    status.classList.add("error");
    status.textContent = `Could not list pipeline runs: ${e.message}`;
    return;
  }
  $("#ba-empty").hidden = !!runs.length;
  $("#ba-form").hidden = !runs.length;
  if (!runs.length) {
    status.textContent = "No pipeline run with evidence in the store yet.";
    return;
  }
  fill($("#ba-run"), runs.map((r) => String(r.id)), String(runs[0].id), runs.map((r) => {
    const ev = r.summary.evidence;
    return `#${r.id} · ${r.preset ?? "–"} · ${ev.rl_method ?? "rl"} · ${ev.task ?? ""} · ${r.created_at}`;
  }));
  $("#ba-run").addEventListener("change", () => guarded(() => load()));
  $("#ba-task").addEventListener("change", () => guarded(() => load($("#ba-task").value)));
  $("#ba-seed").addEventListener("change", () => guarded(() => load($("#ba-task").value, $("#ba-seed").value)));
  for (const role of ROLES) {
    $(`#ba-${role}-open`).addEventListener("click", () => guarded(() => showInReplays(current.sides[role].ref)));
  }
  await guarded(() => load());
}

async function load(task = null, seed = null) {
  const params = new URLSearchParams();
  if (task) params.set("task", task);
  if (seed !== null && seed !== "") params.set("seed", seed);
  const id = $("#ba-run").value;
  $("#ba-status").textContent = `Loading pipeline run #${id}…`;
  const data = await api(`/api/training/pipelines/${encodeURIComponent(id)}/compare?${params}`);
  current = data;
  render(data);
}

function render(d) {
  fill($("#ba-task"), d.tasks, d.task);
  fill($("#ba-seed"), d.seeds.map((s) => String(s.seed)), String(d.seed),
    d.seeds.map((s) => `seed ${s.seed} · trained − SFT ${signed(s.diff)}${s.seed === d.default_seed ? " (largest gap)" : ""}`));
  $("#ba-status").textContent = `Pipeline run #${d.run_id}, evaluation run #${d.eval_run_id}: ${d.seeds.length} holdout ` +
    `world${d.seeds.length === 1 ? "" : "s"} of ${d.task} played by both.`;
  const body = $("#ba-body");
  body.hidden = false;
  Object.assign(body.dataset, { runId: String(d.run_id), task: d.task, seed: String(d.seed) });
  const gap = clear($("#ba-summary"));
  gap.append(`Holdout world ${d.task} seed ${d.seed}: trained − start (SFT) = `,
    h("strong", { id: "ba-diff", "data-value": String(d.diff), class: d.diff > 0 ? "pos" : d.diff < 0 ? "neg" : null, text: signed(d.diff) }),
    d.diff === 0 ? " (the two episodes return the same)" : "");
  const lines = ROLES.map((role) => {
    const rounds = d.sides[role].rounds;
    return { name: d.sides[role].label, step: [0, ...rounds.map((_, i) => i + 1)], value: [0, ...rounds.map((r) => r.cumulative)] };
  });
  clear($("#ba-chart")).append(seriesChart(lines, `Return so far by round, ${d.task} seed ${d.seed}`));
  clear($("#ba-seeds")).append(grid(["holdout seed", "start (SFT)", "trained", "trained − SFT"], d.seeds.map((s) => {
    const pick = h("button", { type: "button", class: "toggle", "aria-pressed": String(s.seed === d.seed), text: String(s.seed),
      "aria-label": `show holdout seed ${s.seed}` });
    pick.addEventListener("click", () => guarded(() => load(d.task, String(s.seed))));
    return { attrs: { "data-seed": String(s.seed) }, cells: [pick, signed(s.sft), signed(s.trained), signed(s.diff)] };
  })));
  for (const role of ROLES) renderSide(role, d.sides[role]);
  renderOverall(d.task, d.task_summary);
}

const share = (v) => (v === null || v === undefined ? "–" : v.toFixed(3));

// the whole task beside the one world: every role's row and the paired comparisons, from the evidence
function renderOverall(task, summary) {
  const { roles = [], comparisons = [] } = summary ?? {};
  clear($("#ba-overall-roles")).append(grid(["policy", "n", "mean return", "deal rate", "gain share", "surplus"],
    roles.map((r) => ({ attrs: { "data-role": r.role, "data-mean": String(r.mean) },
      cells: [r.role, String(r.n), signed(r.mean), share(r.deal_rate), share(r.gain_share), signed(r.surplus_over_batna, 2)] }))));
  clear($("#ba-overall-comparisons")).append(grid([`${task}: comparison`, "mean difference", "95% CI", "wins / losses"],
    comparisons.map((c) => ({ attrs: { "data-comparison": c.comparison, "data-value": String(c.mean_diff) },
      cells: [c.comparison, signed(c.mean_diff), `[${signed(c.ci_low)}, ${signed(c.ci_high)}]`, `${c.wins} / ${c.losses}`] }))));
}

function renderSide(role, side) {
  const pane = $(`#ba-${role}`);
  pane.dataset.ref = side.ref ?? "";
  const valid = side.rounds.filter((r) => r.ok).length;
  clear($(`#ba-${role}-stats`)).append(
    kv("episode return", signed(side.episode_return), { id: `ba-${role}-return`, value: side.episode_return }),
    kv("rounds", String(side.rounds.length), { id: `ba-${role}-rounds-n`, value: side.rounds.length }),
    kv("valid actions", `${valid} / ${side.rounds.length}`), kv("seat", side.seat));
  $(`#ba-${role}-policy`).textContent = side.policy;
  clear($(`#ba-${role}-rounds`)).append(grid(["round", "action", "result", "reward", "return so far", "other seats"],
    side.rounds.map((r) => ({ attrs: { "data-round": String(r.round) }, cells: [String(r.round), describeAction(r.action),
      r.ok ? "ok" : r.code ?? "–", signed(r.reward), signed(r.cumulative),
      h("span", { class: "others", text: Object.entries(r.others).map(([lid, a]) => `${lid}: ${describeAction(a)}`).join("; ") || "–" })] }))));
  $(`#ba-${role}-open`).disabled = !side.ref;
}

// a table whose rows carry attributes (data-seed, data-round) for tools and tests; cells are text or nodes
function grid(headers, rows) {
  return h("div", { class: "scroll" }, h("table", {},
    h("thead", {}, h("tr", {}, headers.map((x) => h("th", { scope: "col", text: x })))),
    h("tbody", {}, rows.map((r) => h("tr", r.attrs, r.cells.map((c) => (c instanceof Node ? h("td", {}, c) : h("td", { text: c }))))))));
}
