// "Reference": reward design and action space (from the code, via /api/reference/*), one SFT sample,
// downloadable artifacts (/api/artifacts) and runnable API examples against this very server.
import { $, api, clear, h, prose, table } from "./dom.js";

export async function initReference(reward, actions) {
  renderReward(reward);
  renderActions(actions);
  const [sft, artifacts, examples] = await Promise.all([
    api("/api/reference/sft-sample"), api("/api/artifacts"), api("/api/reference/examples")]);
  renderSft(sft);
  renderArtifacts(artifacts);
  renderExamples(examples);
}

function renderReward(reward) {
  clear($("#ref-reward-doc")).append(...reward.doc.map(prose));
  const moved = (c) => {
    if (c.kind === "penalty") return `${c.what} (${c.each} each, at most ${c.cap} a step)`;
    if (c.kind === "total") return c.what;
    return c.moved_by.map((m) => {
      const how = [...m.actions.map((a) => `action ${a}`), ...m.clock.map((x) => `clock: ${x}`)].join("; ");
      return `${m.category} (${m.part}): ${m.what}${how ? `. By ${how}` : ""}`;
    }).join(" | ");
  };
  clear($("#ref-reward")).append(table(["column", "kind", "what moves it"],
    reward.columns.map((c) => [h("code", { text: c.name }), c.kind, moved(c)])));
  $("#ref-reward").querySelector("table").id = "ref-reward-table";
}

function renderActions(space) {
  clear($("#ref-actions-doc")).append(prose(space.doc[0]));
  clear($("#ref-actions")).append(table(["action type", "fields (* required)", "what it does"],
    space.action_types.map((t) => [h("code", { text: t.type }),
      t.fields.length ? t.fields.map((f) => `${f.name}${f.required ? "*" : ""}`).join(", ") : "–", t.description])));
  $("#ref-actions").querySelector("table").id = "ref-actions-table";
  const l = space.limits;
  $("#ref-limits").textContent = `Limits: messages up to ${l.max_message_chars} characters, lists up to ${l.max_list} ids, ` +
    `payments up to ${l.max_payment}, ${l.max_open_offers} open offers and ${l.max_open_proposals} open coalition proposals per lab; ` +
    `offers expire after ${l.offer_expires_in.default} rounds by default (at most ${l.offer_expires_in.max}), ` +
    `coalition proposals after ${l.coalition_expires_in.default} (at most ${l.coalition_expires_in.max}). ` +
    `Offer conditions: ${space.condition_keys.join(", ")}.`;
}

function renderSft(sft) {
  const box = clear($("#ref-sft"));
  if (!sft.dataset) {
    box.append(h("p", { id: "ref-sft-none", text: `No SFT dataset was found (searched ${sft.searched}). This command makes one:` }),
      h("pre", {}, h("code", { text: sft.command })));
    return;
  }
  box.append(h("p", {}, `From ${sft.dataset.name} (${sft.dataset.bytes} bytes, ${sft.dataset.modified}); `,
    h("a", { href: sft.dataset.download, text: "download the dataset" }), "."));
  if (sft.dataset.provenance) {
    box.append(h("details", {}, h("summary", { text: "Provenance" }),
      h("pre", { class: "sample", tabindex: "0" }, h("code", { text: JSON.stringify(sft.dataset.provenance, null, 1) }))));
  }
  if (sft.sample === null) {
    box.append(h("p", { class: "error", text: sft.problem }));
    return;
  }
  box.append(h("pre", { class: "sample", id: "ref-sft-sample", tabindex: "0" }, h("code", { text: JSON.stringify(sft.sample, null, 1) })));
}

function renderArtifacts(data) {
  const box = clear($("#ref-artifacts"));
  if (!data.artifacts.length) {
    box.append(h("p", { class: "muted", text: "The store holds no evaluation run yet: nothing to download." }));
  } else {
    box.append(h("ul", { id: "ref-artifact-list" }, data.artifacts.map((a) => h("li", {},
      h("a", { href: a.href, download: "" , text: a.kind === "dataset" ? `SFT dataset (${a.name})`
        : `${a.kind} of run #${a.run_id}, ${a.split} (${a.format}${a.rows === null ? "" : `, ${a.rows} ${a.kind === "replays" ? "episodes" : "rows"}`})` })))));
  }
  box.append(h("p", { class: "muted", text: `One episode's replay: ${data.episode_replay}.` }));
}

function renderExamples(ex) {
  $("#ref-docs-link").href = "/docs";
  $("#ref-openapi-link").href = "/openapi.json";
  clear($("#ref-examples")).append(...ex.examples.map((e) => h("div", { class: "example" },
    h("h4", { text: `${e.title} (${e.language})` }),
    h("pre", { tabindex: "0" }, h("code", { "data-language": e.language, text: e.code })))));
}
