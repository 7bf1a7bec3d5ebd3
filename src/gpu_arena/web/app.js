// Entry point: load the overview once, then build each section from it.
import { initArena } from "./arena.js";
import { $, api } from "./dom.js";
import { renderGlance } from "./glance.js";
import { initResults } from "./results.js";

async function main() {
  const status = $("#glance-status");
  let ov;
  try {
    ov = await api("/api/overview");
  } catch (e) {
    status.classList.add("error");
    status.textContent = `Could not reach the server's API: ${e.message}`;
    return;
  }
  $("#version").textContent = ov.version;
  renderGlance(ov);
  status.hidden = true;
  $("#glance-body").hidden = false;
  initArena(ov);
  await initResults();
  document.body.dataset.ready = "true"; // tests wait for this
}

main();
