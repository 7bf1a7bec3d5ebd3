// The move form, built from the action space the server describes (GET /api/reference/actions: each
// type's fields and their JSON schema), with choices from the seat's own observation (its blocks, the
// others' blocks, offers, jobs, the other labs). Play and the match seat pages share it.
import { fmt, h, signed } from "./dom.js";

function choices(name, obs, type) {
  const me = obs.controlled_lab_id;
  const others = obs.visible_labs.filter((l) => l.lab_id !== me);
  switch (name) {
    case "target_lab_id":
    case "member_lab_ids":
      return others.map((l) => ({ value: l.lab_id, label: `${l.lab_id} (budget ${fmt(l.budget, 2)}, reputation ${fmt(l.reputation, 2)})` }));
    case "block_ids":
      return obs.owned_blocks.map((b) => ({ value: b.block_id, label: `${b.block_id}: ${b.gpu_count} GPUs, rounds ${b.start_round}–${b.end_round - 1}, ${b.status}` }));
    case "requested_block_ids":
      return obs.public_market.blocks.filter((b) => b.owner && b.owner !== me)
        .map((b) => ({ value: b.block_id, label: `${b.block_id} of ${b.owner}: ${b.gpu_count} GPUs, rounds ${b.start_round}–${b.end_round - 1}` +
          (b.marginal_value === null ? "" : `, worth ${signed(b.marginal_value, 2)} to you`) }));
    case "offer_id":
      return obs.active_offers.filter((o) => type !== "accept_offer" && type !== "counter_offer" || o.direction === "incoming")
        .map((o) => ({ value: o.offer_id, label: `${o.offer_id}: ${o.direction} ${o.sender} → ${o.target}, worth ${signed(o.value_to_me, 2)} to you` }));
    case "coalition_id":
      return obs.active_coalitions.map((c) => ({ value: c.coalition_id, label: `${c.coalition_id}: ${c.members.join(", ")} for ${c.job_id} (${c.status})` }));
    case "job_id":
      return obs.private_jobs.map((j) => ({ value: j.job_id, label: `${j.job_id}: ${j.gpu_hours_required} GPU-h by round ${j.deadline_round} (${j.status})` }));
    default:
      return null;
  }
}

function fieldLabel(f) {
  return f.required ? `${f.name} (required)` : f.name;
}

function widget(f, obs, type, prefix, space) {
  const id = `${prefix}-f-${f.name}`;
  const kind = f.schema.type;
  const help = f.description || f.schema.description || "";
  const opts = choices(f.name, obs, type);
  if (f.name === "conditions") {
    return h("fieldset", { class: "field", "data-field": f.name, "data-kind": "flags" }, h("legend", { text: fieldLabel(f) }),
      space.condition_keys.map((k) => h("label", { class: "check" }, h("input", { type: "checkbox", id: `${id}-${k}`, value: k }), ` ${k}`)),
      help ? h("p", { class: "help", text: help }) : null);
  }
  if (f.name === "shares") {
    const labs = [obs.controlled_lab_id, ...obs.visible_labs.map((l) => l.lab_id).filter((l) => l !== obs.controlled_lab_id)];
    return h("fieldset", { class: "field", "data-field": f.name, "data-kind": "shares" }, h("legend", { text: fieldLabel(f) }),
      labs.map((l) => h("label", { class: "inline" }, `${l} `, h("input", { type: "number", id: `${id}-${l}`, "data-lab": l, min: "0", max: "1", step: "0.05" }))),
      h("p", { class: "help", text: "one share for you and each member, summing to 1; empty: not a member" }));
  }
  if (kind === "array" && opts) {
    return h("fieldset", { class: "field", "data-field": f.name, "data-kind": "multi" }, h("legend", { text: fieldLabel(f) }),
      opts.length ? opts.map((o) => h("label", { class: "check" }, h("input", { type: "checkbox", id: `${id}-${o.value}`, value: o.value }), ` ${o.label}`))
        : h("p", { class: "muted", text: "none available" }),
      help ? h("p", { class: "help", text: help }) : null);
  }
  const describedBy = help ? `${id}-help` : null;
  let control;
  if (opts) {
    const none = f.required ? (opts.length ? [] : [{ value: "", label: "(none available)" }]) : [{ value: "", label: "(none)" }];
    control = h("select", { id, "data-field": f.name, "data-kind": "string", "aria-describedby": describedBy },
      [...none, ...opts].map((o, i) => h("option", { value: o.value, text: o.label, selected: i === 0 })));
  } else if (kind === "number" || kind === "integer") {
    const limits = f.name === "expires_in" ? space.limits[type === "form_coalition" ? "coalition_expires_in" : "offer_expires_in"] : null;
    control = h("input", { id, type: "number", "data-field": f.name, "data-kind": kind, min: kind === "integer" ? "1" : "0",
      max: limits ? String(limits.max) : null, step: kind === "integer" ? "1" : "0.01", "aria-describedby": describedBy,
      placeholder: limits ? `default ${limits.default}` : null });
  } else if (kind === "array") {
    control = h("input", { id, type: "text", "data-field": f.name, "data-kind": "list", "aria-describedby": describedBy, placeholder: "ids, comma-separated" });
  } else {
    control = h("input", { id, type: "text", "data-field": f.name, "data-kind": "string", "aria-describedby": describedBy,
      maxlength: f.name === "message" ? String(space.limits.max_message_chars) : null });
  }
  return h("div", { class: "field" }, h("label", { for: id, text: fieldLabel(f) }), control,
    help ? h("p", { class: "help", id: describedBy, text: help }) : null);
}

// fill ``root`` with the fields of action type ``spec`` for observation ``obs``; ids start with ``prefix``
export function buildMoveFields(root, prefix, space, spec, obs) {
  root.replaceChildren();
  if (!spec.fields.length) root.append(h("p", { class: "muted", text: "This action takes no arguments." }));
  for (const f of spec.fields) root.append(widget(f, obs, spec.type, prefix, space));
}

// the action the fields in ``root`` describe (fields left empty are left out)
export function collectMove(root, spec) {
  const action = { action_type: spec.type };
  for (const f of spec.fields) {
    const el = root.querySelector(`[data-field="${f.name}"]`);
    if (!el) continue;
    const kind = el.dataset.kind;
    let v;
    if (kind === "multi") {
      v = [...el.querySelectorAll("input:checked")].map((c) => c.value);
      if (!v.length) v = undefined;
    } else if (kind === "flags") {
      const on = [...el.querySelectorAll("input:checked")].map((c) => c.value);
      v = on.length ? Object.fromEntries(on.map((k) => [k, true])) : undefined;
    } else if (kind === "shares") {
      const pairs = [...el.querySelectorAll("input")].filter((i) => i.value !== "").map((i) => [i.dataset.lab, Number(i.value)]);
      v = pairs.length ? Object.fromEntries(pairs) : undefined;
    } else if (kind === "list") {
      const ids = el.value.split(",").map((x) => x.trim()).filter(Boolean);
      v = ids.length ? ids : undefined;
    } else if (kind === "number" || kind === "integer") {
      v = el.value === "" ? undefined : Number(el.value);
    } else {
      v = el.value === "" ? undefined : el.value;
    }
    if (v !== undefined) action[f.name] = v;
  }
  return action;
}

