// Entry point: load the overview and the action space once, then build each section from them.
import { initArena } from "./arena.js";
import { initAutoEval } from "./autoeval.js";
import { initBeforeAfter } from "./beforeafter.js";
import { $, api } from "./dom.js";
import { renderGlance } from "./glance.js";
import { initJudge } from "./judge.js";
import { initLeaderboard } from "./leaderboard.js";
import { initMatches } from "./matches.js";
import { initPlay } from "./play.js";
import { initReference } from "./reference.js";
import { initReplays } from "./replays.js";
import { initResults, reloadResults } from "./results.js";
import { initTraining } from "./training.js";

async function main() {
  const status = $("#glance-status");
  let ov, reward, actions;
  try {
    [ov, reward, actions] = await Promise.all([api("/api/overview"), api("/api/reference/reward"), api("/api/reference/actions")]);
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
  initPlay(ov, actions);
  initMatches(ov, actions);
  initTraining(ov);
  await Promise.all([initResults(), initReplays(ov), initJudge(ov, reward), initReference(reward, actions),
    initBeforeAfter(ov), initLeaderboard()]);
  initAutoEval(ov.auto_eval, async () => {
    renderGlance(await api("/api/overview"));
    await reloadResults();
    document.dispatchEvent(new CustomEvent("arena:stored")); // Replays and Judge mode list the new episodes
  });
  document.body.dataset.ready = "true"; // tests wait for this
}

main();
