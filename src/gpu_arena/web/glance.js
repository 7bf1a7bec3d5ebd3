// "At a glance": the code's registries, the latest evaluation run, the latest training runs and the latest
// pipeline's evidence, all from /api/overview.
import { $, clear, fmt, h, signed, table } from "./dom.js";
import { ciText } from "./pipeline.js";

export function renderGlance(ov) {
  // rows of the store changed by hand leave their sections empty: say so, and which (GET /api/overview →
  // store_problems), instead of letting an empty Latest evaluation pass for "no run yet"
  const problems = ov.store_problems || [];
  const note = clear($("#store-problems"));
  note.hidden = problems.length === 0;
  if (problems.length) {
    note.append(h("strong", { text: "The store holds rows this server cannot read; their sections are empty. " }),
      problems.join(" "));
  }

  clear($("#glance-tasks")).append(table(["task", "labs", "rounds", "shocks"],
    ov.tasks.map((t) => [t.task, range(t.labs), range(t.rounds), range(t.shocks)])));

  clear($("#glance-actions")).append(...ov.action_types.map((a) => h("li", { text: a })));

  const rc = ov.reward_columns;
  clear($("#glance-rewards")).append(
    h("p", {}, h("strong", { text: "Components " }), `(partition the position-value change): ${rc.components.join(", ")}`),
    h("p", {}, h("strong", { text: "Penalties: " }), rc.penalties.join(", ")),
    h("p", {}, h("strong", { text: "Step reward: " }), h("code", { text: rc.total })));

  const p = ov.policies;
  const named = new Set([...p.baselines, ...p.archetypes]);
  const others = p.seat.filter((n) => !named.has(n));
  const families = p.all.filter((n) => n.includes(":"));
  // Element.append writes null as the text "null": leave absent paragraphs out instead
  clear($("#glance-policies")).append(...[
    h("p", {}, h("strong", { text: "Baselines: " }), p.baselines.join(", ")),
    h("p", {}, h("strong", { text: "Opponent archetypes: " }), p.archetypes.join(", ")),
    others.length ? h("p", {}, h("strong", { text: "Other: " }), others.join(", ")) : null,
    families.length ? h("p", {}, h("strong", { text: "Families (plug-ins): " }), families.join(", ")) : null,
  ].filter(Boolean));

  const ev = ov.latest_eval;
  const box = clear($("#glance-eval"));
  if (!ev) {
    box.append(h("p", { id: "glance-no-eval", text: "No evaluation run in the store yet; see Results for the command that makes one." }));
  } else {
    box.append(h("dl", { class: "stats", id: "glance-eval-stats" },
      stat("run", `#${ev.id}`), stat("created", ev.created_at), stat("commit", ev.git_commit ? ev.git_commit.slice(0, 10) : "–"),
      stat("split", ev.splits.join(", ")), stat("episodes", ev.episodes), stat("duration", `${fmt(ev.duration_s, 1)} s`),
      stat("tasks", ev.tasks.join(", ")), stat("policies", ev.policies.join(", "))));
  }

  // the newest SFT, expert-iteration and GRPO runs of the store (GET /api/overview → training.latest); their
  // curves are in Training
  const tr = ov.training;
  const tbox = clear($("#glance-training"));
  const latest = ["sft", "rft", "grpo"].map((k) => tr.latest && tr.latest[k]).filter(Boolean);
  if (!latest.length) {
    tbox.append(h("p", { id: "glance-no-training", text: "No training run in the store yet; see Training for the commands." }));
  } else {
    tbox.append(h("dl", { class: "stats", id: "glance-training-stats" }, ...latest.map((r) =>
      stat(`${r.kind} run`, `#${r.id} ${r.preset ?? ""} ${r.status}, ${r.n_logs} logs${r.duration_s == null ? "" : `, ${fmt(r.duration_s, 1)} s`}`))));
  }
  renderPipeline(tr);
}

// the newest pipeline with evidence (training.pipeline): trained − SFT start and trained − no_negotiation on
// the training task, paired by holdout seed, and the command that made it
function renderPipeline(tr) {
  const box = clear($("#glance-pipeline"));
  const p = tr.pipeline;
  if (!p) {
    box.append(h("p", { id: "glance-no-pipeline", text: "No training pipeline in the store yet; this command runs one (SFT, RL, holdout evaluation):" }),
      h("pre", {}, h("code", { text: tr.pipeline_command })));
    return;
  }
  box.append(h("dl", { class: "stats", id: "glance-pipeline-stats", "data-run-id": String(p.run_id) },
    ...p.rows.map((r) => h("div", { "data-comparison": r.comparison },
      h("dt", { text: `${r.label} on ${r.task}` }),
      h("dd", { class: "v", "data-value": String(r.mean_diff), text: signed(r.mean_diff), style: "margin:0" }),
      h("dd", { class: "muted", text: `95% CI ${ciText(r)}, n=${r.n}`, style: "margin:0" })))),
    h("p", { class: "help", text: `pipeline run #${p.run_id} · preset ${p.preset ?? "–"} · RL ${p.rl_method ?? "–"} · ${p.created_at}` +
      (p.commit ? ` · commit ${p.commit.slice(0, 10)}` : "") }),
    h("pre", {}, h("code", { id: "glance-pipeline-command", text: p.command ?? "–" })),
    h("p", {}, h("a", { href: "#before-after", text: "Before vs after" }), " · ", h("a", { href: "#training", text: "its curves" })));
  if (!p.rows.length) box.append(h("p", { class: "muted", text: "Its evidence has no comparison on the training task." }));
}

function stat(k, v) {
  return h("div", {}, h("dt", { text: k }), h("dd", { class: "v", text: v, style: "margin:0" }));
}

function range(pair) {
  return pair[0] === pair[1] ? String(pair[0]) : `${pair[0]}–${pair[1]}`;
}
