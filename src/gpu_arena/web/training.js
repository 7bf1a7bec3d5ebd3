// "Training": runs from the store (GET /api/training/runs) and, for the chosen run, its logged
// curves (GET /api/training/runs/{id}): loss, GRPO reward, valid-action rate, per-column rewards.
// Nothing is drawn that the API did not return; with no runs the section says so and shows the commands.
import { seriesChart } from "./charts.js";
import { $, api, clear, fmt, h } from "./dom.js";

// charts, in order: [title, [metric names]] (a chart is drawn only when one of its series was logged)
const CHARTS = [
  ["Loss", ["loss"]],
  ["Episode return (GRPO reward)", ["reward"]],
  ["Reward spread across a group", ["reward_std"]],
  ["Valid-action and format-error rates", ["arena/valid_action_rate", "arena/format_error_rate"]],
  ["Next-token accuracy (SFT)", ["mean_token_accuracy"]],
  ["Tokens per second", ["tokens_per_s"]],
];

function summaryText(run) {
  const parts = [`#${run.id} ${run.kind}`, run.preset ? `preset ${run.preset}` : null, run.status,
    `${run.n_logs} logs to step ${run.last_step ?? "–"}`, run.duration_s == null ? null : `${fmt(run.duration_s, 1)} s`];
  return parts.filter(Boolean).join(" · ");
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
    body.append(h("tr", { "data-run": String(r.id) },
      h("td", {}, choose), h("td", { text: r.kind }), h("td", { text: r.preset ?? "–" }),
      h("td", { text: r.model ?? "–" }), h("td", { text: r.status }), h("td", { class: "num", text: r.n_logs }),
      h("td", { class: "num", text: r.duration_s == null ? "–" : fmt(r.duration_s, 1) }),
      h("td", { text: r.created_at })));
  }
  await showRun(runs[0].id);
}

async function showRun(id) {
  for (const b of document.querySelectorAll("#training-table button[data-run]")) {
    b.setAttribute("aria-pressed", String(b.dataset.run === String(id)));
  }
  const run = await api(`/api/training/runs/${encodeURIComponent(id)}`);
  $("#training-run").dataset.runId = String(run.id);
  $("#training-run-summary").textContent = summaryText(run);
  const charts = clear($("#training-charts"));
  const series = run.series;
  const drawn = [];
  const columns = Object.keys(series).filter((k) => k.startsWith("rewards/") && k.endsWith("/mean"));
  const specs = [...CHARTS];
  // per-component rewards: four columns per chart, so each line stays readable
  for (let i = 0; i < columns.length; i += 4) specs.push([`Reward columns (${i / 4 + 1})`, columns.slice(i, i + 4)]);
  for (const [title, names] of specs) {
    const lines = names.filter((n) => series[n] && series[n].step.length)
      .map((n) => ({ name: n.replace(/^rewards\//, "").replace(/\/mean$/, ""), step: series[n].step, value: series[n].value }));
    if (!lines.length) continue;
    drawn.push(title);
    const last = lines.map((q) => `${q.name} ${fmt(q.value[q.value.length - 1], 4)}`).join(", ");
    charts.append(h("figure", { class: "card chart", "data-chart": title },
      seriesChart(lines, `${title}, run ${run.id}`),
      h("figcaption", { text: `${title} — last: ${last}` })));
  }
  if (!drawn.length) charts.append(h("p", { text: "This run logged no numeric metrics yet." }));
}
