// "Training": a placeholder until the training store is served (the overview says so; the commands
// listed are the ones this installation's CLI has).
import { $, clear, h } from "./dom.js";

export function initTraining(ov) {
  const t = ov.training;
  $("#training-status").textContent = `Placeholder: ${t.message}.`;
  clear($("#training-commands")).append(...t.commands.map((c) => h("pre", {}, h("code", { text: c }))));
}
