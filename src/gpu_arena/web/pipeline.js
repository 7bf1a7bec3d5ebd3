// A pipeline run (gpu-arena train pipeline) in Training: its stages (status, wall time, stage run), the
// evidence's paired comparisons by holdout seed, and each stage's own curves: the SFT run's loss, the
// RL run's return (sampled and greedy) and valid-action rate. GET /api/training/pipelines/{id} names
// the stage runs; their curves come from GET /api/training/runs/{stage run}.
import { api, fmt, h, signed } from "./dom.js";

// the RL return chart's title names what "reward" means for the run's kind
export function returnTitle(kind) {
  if (kind === "grpo") return "Episode return (GRPO reward)";
  return kind === "rft" ? "Episode return (expert iteration: sampled, greedy)" : "Episode return";
}

const STAGES = ["data", "sft", "rl", "select", "eval"];
const STAGE_CHARTS = {
  sft: () => [["Loss", ["loss"]], ["Next-token accuracy (SFT)", ["mean_token_accuracy"]]],
  rl: (kind) => [[returnTitle(kind), ["reward", "greedy_reward"]],
    ["Valid-action and format-error rates", ["arena/valid_action_rate", "arena/format_error_rate"]]],
};

export function ciText(row) {
  return row.ci_low == null || row.ci_high == null ? "–" : `[${signed(row.ci_low)}, ${signed(row.ci_high)}]`;
}

// `charts`: where curves go; `drawCharts(container, run, specs, stage)` draws them (training.js);
// `current()`: false once another run was chosen meanwhile (then nothing more is drawn)
export async function showPipeline(run, box, charts, drawCharts, current) {
  let view;
  try {
    view = await api(`/api/training/pipelines/${encodeURIComponent(run.id)}`);
  } catch (e) {
    box.append(h("p", { class: "error", text: `Could not load pipeline run ${run.id}: ${e.message}` }));
    return;
  }
  if (!current()) return;
  box.append(h("p", {}, "Command: ", h("code", { id: "training-pipeline-command", text: view.command ?? "–" })),
    h("h3", { text: "Stages" }), stageTable(view));
  const ev = view.evidence;
  if (ev) {
    box.append(h("h3", { text: "Evidence: paired differences by holdout seed (first − second)" }),
      comparisonTable(ev.comparisons || []),
      h("p", { class: "help" }, "The same holdout worlds side by side: ", h("a", { href: "#before-after", text: "Before vs after" }), "."));
  } else {
    box.append(h("p", { class: "muted", id: "training-pipeline-no-evidence",
      text: view.error ? `No evidence: ${view.error}` : "No evidence yet: the pipeline has not finished its evaluation stage." }));
  }
  for (const stage of ["sft", "rl"]) {
    const id = view.stage_runs[stage];
    if (id == null) continue;
    let stageRun;
    try {
      stageRun = await api(`/api/training/runs/${encodeURIComponent(id)}`);
    } catch (e) {
      charts.append(h("p", { class: "error", text: `Could not load the ${stage} stage's run #${id}: ${e.message}` }));
      continue;
    }
    if (!current()) return;
    const drawn = drawCharts(charts, stageRun, STAGE_CHARTS[stage](stageRun.kind), stage);
    if (!drawn.length) charts.append(h("p", { text: `The ${stage} stage's run #${id} logged no curves yet.` }));
  }
}

function details(info) {
  return Object.entries(info)
    .filter(([k, v]) => !["status", "wall_s", "run_id", "evidence", "step", "elapsed_s", "stage", "error", "select"].includes(k)
      && v !== null && typeof v !== "object")
    .map(([k, v]) => `${k} ${typeof v === "number" && !Number.isInteger(v) ? fmt(v, 3) : v}`).join(", ");
}

function stageTable(view) {
  const rows = STAGES.filter((s) => view.stages[s]).map((s) => {
    const info = view.stages[s];
    const id = view.stage_runs[s];
    const ran = id == null ? "–" : s === "eval" ? `evaluation run #${id}` : `training run #${id}`;
    return h("tr", { "data-stage": s }, h("td", { text: s }), h("td", { text: info.status ?? "–" }),
      h("td", { class: "num", text: info.wall_s == null ? "–" : fmt(info.wall_s, 1) }), h("td", { text: ran }),
      h("td", { text: info.error ?? details(info) }));
  });
  if (!rows.length) return h("p", { class: "muted", text: "No stage finished yet." });
  return h("div", { class: "scroll" }, h("table", { id: "training-pipeline-stages" },
    h("thead", {}, h("tr", {}, ["stage", "status", "seconds", "run", "details"].map((x) => h("th", { scope: "col", text: x })))),
    h("tbody", {}, rows)));
}

function comparisonTable(comparisons) {
  if (!comparisons.length) return h("p", { class: "muted", text: "no comparison" });
  return h("div", { class: "scroll" }, h("table", { id: "training-pipeline-evidence" },
    h("thead", {}, h("tr", {}, ["task", "split", "comparison", "n", "mean difference", "95% CI", "wins / losses"]
      .map((x) => h("th", { scope: "col", text: x })))),
    h("tbody", {}, comparisons.map((c) => h("tr", { "data-task": c.task, "data-comparison": c.comparison },
      h("td", { text: c.task }), h("td", { text: c.split }), h("td", { text: c.comparison }),
      h("td", { class: "num", text: c.n }),
      h("td", { class: "num mean", "data-value": String(c.mean_diff), text: signed(c.mean_diff) }),
      h("td", { class: "num", text: ciText(c) }), h("td", { class: "num", text: `${c.wins} / ${c.losses}` }))))));
}
