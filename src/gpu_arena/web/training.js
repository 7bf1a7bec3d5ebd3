// "Training": runs from the store (GET /api/training/runs) and, for the chosen run, its logged
// curves (GET /api/training/runs/{id}): loss, RL reward (GRPO, expert iteration), valid-action rate,
// per-column rewards. A pipeline run (gpu-arena train pipeline) shows its stages' curves and its
// evidence instead (pipeline.js). Nothing is drawn that the API did not return; with no runs the
// section says so and shows the commands.
import { seriesChart } from "./charts.js";
import { $, api, clear, fmt, h } from "./dom.js";
import { returnTitle, showPipeline } from "./pipeline.js";

// charts, in order: [title, [metric names]] (a chart is drawn only when one of its series was logged)
function chartSpecs(kind) {
  return [
    ["Loss", ["loss"]],
    [returnTitle(kind), ["reward", "greedy_reward"]],
    ["Reward spread across a group", ["reward_std"]],
    ["Valid-action and format-error rates", ["arena/valid_action_rate", "arena/format_error_rate"]],
    ["Episodes kept (expert iteration)", ["kept"]],
    ["Next-token accuracy (SFT)", ["mean_token_accuracy"]],
    ["Tokens per second", ["tokens_per_s"]],
  ];
}

function summaryText(run) {
  const parts = [`#${run.id} ${run.kind}`, run.preset ? `preset ${run.preset}` : null, run.status,
    `${run.n_logs} logs to step ${run.last_step ?? "–"}`, run.duration_s == null ? null : `${fmt(run.duration_s, 1)} s`];
  return parts.filter(Boolean).join(" · ");
}

// the stage runs a pipeline's summary names (none while it runs)
function stageRuns(r) {
  const ev = r.summary && r.summary.evidence;
  return ev && ev.runs ? ev.runs : null;
}

function kindText(r) {
  const runs = r.kind === "pipeline" ? stageRuns(r) : null;
  return runs ? `pipeline (sft #${runs.sft ?? "–"}, rl #${runs.rl ?? "–"})` : r.kind;
}

export async function initTraining(ov) {
  const t = ov.training;
  const status = $("#training-status");
  clear($("#training-commands")).append(...t.commands.map((c) => h("pre", {}, h("code", { text: c }))));
  let data;
  try {
    data = await api("/api/training/runs");
  } catch (e) {
    status.classList.add("error");
    status.textContent = `Could not load training runs: ${e.message}`;
    return;
  }
  const runs = data.runs;
  $("#training-body").hidden = !runs.length;
  if (!runs.length) {
    status.textContent = "No training runs in the store yet. These commands make one:";
    return;
  }
  status.textContent = `${runs.length} training run${runs.length > 1 ? "s" : ""} in the store, newest first.`;
  const body = clear($("#training-table tbody"));
  for (const r of runs) {
    const choose = h("button", { type: "button", class: "toggle", "data-run": String(r.id), text: `#${r.id}`,
      "aria-label": `show curves of training run ${r.id}` });
    choose.addEventListener("click", () => showRun(r.id));
    body.append(h("tr", { "data-run": String(r.id), "data-kind": r.kind },
      h("td", {}, choose), h("td", { text: kindText(r) }), h("td", { text: r.preset ?? "–" }),
      h("td", { text: r.model ?? "–" }), h("td", { text: r.status }), h("td", { class: "num", text: r.n_logs }),
      h("td", { class: "num", text: r.duration_s == null ? "–" : fmt(r.duration_s, 1) }),
      h("td", { text: r.created_at })));
  }
  // the newest pipeline with evidence shows every stage at once; else the newest run
  const first = runs.find((r) => r.kind === "pipeline" && stageRuns(r)) || runs[0];
  await showRun(first.id);
}

let shown = 0; // the latest click wins: an older answer arriving late is dropped

async function showRun(id) {
  const token = ++shown;
  for (const b of document.querySelectorAll("#training-table button[data-run]")) {
    b.setAttribute("aria-pressed", String(b.dataset.run === String(id)));
  }
  const status = $("#training-status");
  let run;
  try {
    run = await api(`/api/training/runs/${encodeURIComponent(id)}`);
  } catch (e) {
    status.classList.add("error");
    status.textContent = `Could not load training run ${id}: ${e.message}`;
    return;
  }
  if (token !== shown) return;
  $("#training-run").dataset.runId = String(run.id);
  $("#training-run-summary").textContent = summaryText(run);
  const charts = clear($("#training-charts"));
  const pipeline = clear($("#training-pipeline"));
  pipeline.hidden = run.kind !== "pipeline";
  if (run.kind === "pipeline") {
    await showPipeline(run, pipeline, charts, drawCharts, () => token === shown);
    return;
  }
  const drawn = drawCharts(charts, run, chartSpecs(run.kind));
  if (!drawn.length) charts.append(h("p", { text: "This run logged no numeric metrics yet." }));
}

// Append one figure per spec whose series the run logged; a pipeline's `stage` ("sft", "rl") marks and
// names its figures. Returns the titles drawn.
export function drawCharts(container, run, specs, stage = null) {
  const series = run.series;
  const drawn = [];
  const columns = Object.keys(series).filter((k) => k.startsWith("rewards/") && k.endsWith("/mean"));
  const all = [...specs];
  // per-component rewards: four columns per chart, so each line stays readable
  if (!stage) for (let i = 0; i < columns.length; i += 4) all.push([`Reward columns (${i / 4 + 1})`, columns.slice(i, i + 4)]);
  for (const [title, names] of all) {
    const lines = names.filter((n) => series[n] && series[n].step.length)
      .map((n) => ({ name: n.replace(/^rewards\//, "").replace(/\/mean$/, ""), step: series[n].step, value: series[n].value }));
    if (!lines.length) continue;
    const name = stage ? `${stage.toUpperCase()} stage (${run.kind} run #${run.id}): ${title}` : title;
    drawn.push(title);
    const last = lines.map((q) => `${q.name} ${fmt(q.value[q.value.length - 1], 4)}`).join(", ");
    container.append(h("figure", { class: "card chart", "data-chart": title, "data-stage": stage, "data-run": String(run.id) },
      seriesChart(lines, `${name}, run ${run.id}`),
      h("figcaption", { text: `${name} — last: ${last}` })));
  }
  return drawn;
}
