// The first-run evaluation (server setting auto_eval): while it runs, say so, and reload the numbers
// that depend on it as each split lands in the store.
import { $, api, fmt } from "./dom.js";

const POLL_MS = 2000;

export function initAutoEval(status, onStored) {
  let seen = status ? status.completed_splits.length : 0;
  const tick = async () => {
    let s;
    try {
      s = await api("/api/auto-eval");
    } catch {
      setTimeout(tick, POLL_MS * 3); // the server restarting: try again later
      return;
    }
    show(s);
    if (s.completed_splits.length !== seen || s.state !== "running") {
      seen = s.completed_splits.length;
      await onStored();
    }
    if (s.state === "running") setTimeout(tick, POLL_MS);
  };
  show(status);
  if (status && status.state === "running") setTimeout(tick, POLL_MS);
}

function show(s) {
  const box = $("#autoeval-status");
  const results = $("#results-autoeval");
  if (!s || !["running", "done", "failed"].includes(s.state)) {
    box.hidden = true;
    results.hidden = true;
    return;
  }
  box.hidden = false;
  box.dataset.state = s.state;
  box.classList.toggle("error", s.state === "failed");
  let text;
  if (s.state === "running") {
    text = `An evaluation is in progress: the store was empty, so this server is evaluating ${s.policies.length} policies on ` +
      `${s.tasks.length} tasks × ${s.seeds} seeds (${s.splits.join(" then ")}; ${s.episodes} episodes), ` +
      `running for ${fmt(s.elapsed_s, 0)} s. Results appear here as each split is stored` +
      (s.completed_splits.length ? ` (done: ${s.completed_splits.join(", ")}).` : ".");
  } else if (s.state === "done") {
    text = `The first-run evaluation finished in ${fmt(s.elapsed_s, 0)} s: ${s.message}.`;
  } else {
    text = `The first-run evaluation failed: ${s.message}`;
  }
  box.textContent = text;
  results.hidden = s.state !== "running";
  results.textContent = s.state === "running" ? text : "";
}
