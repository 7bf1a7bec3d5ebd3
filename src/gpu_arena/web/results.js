// "Results": the latest stored evaluation run for a split, as a table and a whisker chart.
import { whiskerChart } from "./charts.js";
import { $, api, clear, fmt, h, signed } from "./dom.js";

let current = "holdout";

export function initResults() {
  for (const b of document.querySelectorAll("#results .toggle")) {
    b.addEventListener("click", () => loadResults(b.dataset.split));
  }
  return loadResults(current);
}

export async function loadResults(split) {
  current = split;
  for (const b of document.querySelectorAll("#results .toggle")) {
    b.setAttribute("aria-pressed", String(b.dataset.split === split));
  }
  const status = $("#results-status");
  status.classList.remove("error");
  status.textContent = `Loading ${split} results…`;
  let data;
  try {
    data = await api(`/api/results/latest?split=${encodeURIComponent(split)}`);
  } catch (e) {
    status.classList.add("error");
    status.textContent = `Could not load results: ${e.message}`;
    return;
  }
  const empty = !data.run || !data.rows.length;
  $("#results-empty").hidden = !empty;
  $("#results-body").hidden = empty;
  if (empty) {
    status.textContent = `No ${split} evaluation in the store.`;
    $("#results-command").textContent = data.command;
    return;
  }
  const r = data.run;
  status.textContent = `Run #${r.id} (${split}), ${r.created_at}, commit ${r.git_commit ? r.git_commit.slice(0, 10) : "unknown"}: ` +
    `${r.episodes} episodes in ${fmt(r.duration_s, 1)} s. Returns are normalised episode sums; whiskers are 95% bootstrap CIs.`;
  $("#results-body").dataset.runId = String(r.id);
  clear($("#results-chart")).append(whiskerChart(data.rows, `Mean return with 95% CI, ${split}`));
  const body = clear($("#results-table tbody"));
  for (const row of data.rows) {
    const ci = row.ci_low === null || row.ci_high === null ? "–" : `[${signed(row.ci_low)}, ${signed(row.ci_high)}]`;
    body.append(h("tr", { "data-task": row.task, "data-policy": row.policy },
      h("td", { text: row.task }), h("td", { text: row.policy }), h("td", { class: "num", text: row.n }),
      h("td", { class: "num mean", text: signed(row.mean) }), h("td", { class: "num", text: ci }),
      h("td", { class: "num", text: fmt(row.welfare_ratio) }), h("td", { class: "num", text: signed(row.surplus_over_batna, 2) }),
      h("td", { class: "num", text: fmt(row.deal_rate, 2) }), h("td", { class: "num", text: fmt(row.breach_rate, 2) }),
      h("td", { class: "num", text: fmt(row.invalid_rate) })));
  }
}

export function reloadResults() {
  return loadResults(current);
}
