// Small DOM and number helpers. Text always goes through textContent: API data is never parsed as HTML.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export const $ = (sel) => document.querySelector(sel);

export function fmt(x, digits = 3) {
  if (x === null || x === undefined || Number.isNaN(x)) return "–";
  return Number(x).toFixed(digits);
}

export function signed(x, digits = 4) {
  if (x === null || x === undefined || Number.isNaN(x)) return "–";
  const s = Number(x).toFixed(digits);
  if (Number(s) === 0) return (0).toFixed(digits); // -1e-17 is a rounding residue, not a loss
  return s.startsWith("-") ? s : `+${s}`;
}

export function table(headers, rows) {
  if (!rows.length) return h("p", { class: "muted", text: "none" });
  return h("div", { class: "scroll" }, h("table", {},
    h("thead", {}, h("tr", {}, headers.map((x) => h("th", { scope: "col", text: x })))),
    h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c) => (c instanceof Node ? h("td", {}, c) : h("td", { text: c }))))))));
}

export async function api(path, options = {}) {
  const init = { ...options, headers: { "Content-Type": "application/json", ...(options.headers || {}) } };
  if (init.body !== undefined && typeof init.body !== "string") init.body = JSON.stringify(init.body);
  const res = await fetch(path, init);
  const body = await res.json().catch(() => null);
  if (!res.ok) {
    const err = body && body.error ? `${body.error.code}: ${body.error.message}` : `HTTP ${res.status}`;
    throw new Error(err);
  }
  return body;
}

// A label/value pair for a stats strip; data-value keeps the unrounded number for tests and tools.
export function kv(k, v, { id = null, value = null } = {}) {
  return h("div", {}, h("span", { class: "k", text: k }),
    h("span", { class: "v", id, "data-value": value === null ? null : String(value), text: v }));
}

export function fill(select, values, chosen, labels = null) {
  clear(select).append(...values.map((v, i) => h("option", { value: v, text: labels ? labels[i] : v, selected: v === chosen })));
}

// One async action at a time for a page section: a second click while one runs is ignored,
// `onBusy(true/false)` brackets the run (to disable buttons), and a failure is shown in the
// section's status line (`statusSelector`) with its error code, never swallowed.
export function sectionRunner(statusSelector, onBusy = () => {}, { exclusive = true } = {}) {
  let busy = false;
  const run = async (fn) => {
    if (exclusive && busy) return;
    busy = true;
    onBusy(true);
    const status = $(statusSelector);
    status.classList.remove("error");
    try {
      await fn();
    } catch (e) {
      status.classList.add("error");
      status.textContent = `Error: ${e.message}`;
    } finally {
      busy = false;
      onBusy(false);
    }
  };
  run.busy = () => busy;
  return run;
}

// Close a REST session this page opened (it may have idled out already: that is not an error).
export async function closeSession(id) {
  if (id) await api(`/api/sessions/${id}`, { method: "DELETE" }).catch(() => {});
}

// A session holds a server slot until it idles out: hand it back when the page goes away.
export function closeOnPageHide(currentId) {
  window.addEventListener("pagehide", () => {
    const id = currentId();
    if (id) fetch(`/api/sessions/${id}`, { method: "DELETE", keepalive: true }).catch(() => {});
  });
}

// A docstring paragraph (reStructuredText-ish) as plain text: ``code`` and **bold** marks dropped, a
// paragraph of "* item" lines as a list.
export function prose(paragraph) {
  const plain = (t) => t.replace(/\*\*|``/g, "");
  if (paragraph.startsWith("* ")) {
    return h("ul", {}, paragraph.slice(2).split(/ \* (?=\S)/).map((item) => h("li", { text: plain(item) })));
  }
  return h("p", { text: plain(paragraph) });
}
