// Inline SVG charts (no library, no CDN). Each returns an <svg> element sized by its viewBox.

const NS = "http://www.w3.org/2000/svg";

function s(tag, attrs = {}, text) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

function svg(width, height, label) {
  return s("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": label });
}

function extent(values, pad = 0.05) {
  let lo = Math.min(0, ...values);
  let hi = Math.max(0, ...values);
  if (hi - lo < 1e-9) { lo -= 1e-3; hi += 1e-3; }
  const m = (hi - lo) * pad;
  return [lo - m, hi + m];
}

// Round ticks ("nice numbers"): a step of 1, 2 or 5 × 10^k near (hi − lo) / n (the thresholds of
// Heckbert's and d3's algorithm), every multiple of it inside [lo, hi], each label written with the
// step's decimals (0, 0.05, 0.10, 0.15; never 0.041, 0.097, 0.153). Returns { step, values, labels }.
export function niceTicks(lo, hi, n = 4) {
  if (!(Number.isFinite(lo) && Number.isFinite(hi)) || hi <= lo) {
    const v = Number.isFinite(lo) ? lo : 0;
    return { step: 0, values: [v], labels: [String(v)] };
  }
  const raw = (hi - lo) / Math.max(1, n);
  const power = Math.floor(Math.log10(raw));
  const error = raw / 10 ** power;
  const factor = error >= Math.sqrt(50) ? 10 : error >= Math.sqrt(10) ? 5 : error >= Math.sqrt(2) ? 2 : 1;
  // a step below 1 is built from its reciprocal (0.05 = 1 / 20), so its multiples are exact decimals
  const inverse = power < 0 && factor < 10 ? 10 ** -power / factor : null;
  const step = inverse === null ? factor * 10 ** power : 1 / inverse;
  const at = (k) => (inverse === null ? k * step : k / inverse);
  const first = Math.ceil(inverse === null ? lo / step : lo * inverse - 1e-9);
  const last = Math.floor(inverse === null ? hi / step : hi * inverse + 1e-9);
  const digits = Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
  const values = [], labels = [];
  for (let k = first; k <= last; k++) {
    const text = at(k).toFixed(digits);
    values.push(Number(text));
    labels.push(Number(text) === 0 ? (0).toFixed(digits) : text);  // never "-0.00"
  }
  return { step, values, labels };
}

// [value, label] of each round tick in [lo, hi]
function ticks(lo, hi, n = 4) {
  const { values, labels } = niceTicks(lo, hi, n);
  return values.map((v, i) => [v, labels[i]]);
}

// Horizontal bars, one per column, from zero: positive green, negative red.
export function barChart(labels, values, title) {
  const rowH = 20, left = 200, right = 70, width = 560, top = 8;
  const height = top + rowH * labels.length + 22;
  const root = svg(width, height, title);
  const [lo, hi] = extent(values);
  const x = (v) => left + ((v - lo) / (hi - lo)) * (width - left - right);
  for (const [t, label] of ticks(lo, hi)) {
    root.append(s("line", { class: "grid-line", x1: x(t), x2: x(t), y1: top, y2: height - 20 }));
    root.append(s("text", { class: "tick", "data-axis": "x", x: x(t), y: height - 6, "text-anchor": "middle" }, label));
  }
  labels.forEach((label, i) => {
    const v = values[i];
    const y = top + i * rowH;
    root.append(s("text", { x: left - 6, y: y + 14, "text-anchor": "end" }, label));
    const x0 = x(0), x1 = x(v);
    const bar = s("rect", { class: v < 0 ? "bar-neg" : "bar-pos", x: Math.min(x0, x1), y: y + 3,
      width: Math.max(Math.abs(x1 - x0), v === 0 ? 0 : 1), height: rowH - 6 });
    bar.append(s("title", {}, `${label}: ${v}`));
    root.append(bar);
    root.append(s("text", { x: width - right + 6, y: y + 14 }, v.toFixed(4)));
  });
  root.append(s("line", { class: "axis", x1: x(0), x2: x(0), y1: top, y2: height - 20 }));
  return root;
}

// A line over steps 0..n (the cumulative reward), with the zero line.
export function lineChart(values, title) {
  const width = 560, height = 200, left = 50, right = 12, top = 10, bottom = 26;
  const root = svg(width, height, title);
  const pts = [0, ...values];
  const [lo, hi] = extent(pts);
  const n = Math.max(pts.length - 1, 1);
  const x = (i) => left + (i / n) * (width - left - right);
  const y = (v) => top + (1 - (v - lo) / (hi - lo)) * (height - top - bottom);
  for (const [t, label] of ticks(lo, hi)) {
    root.append(s("line", { class: "grid-line", x1: left, x2: width - right, y1: y(t), y2: y(t) }));
    root.append(s("text", { class: "tick", "data-axis": "y", x: left - 4, y: y(t) + 4, "text-anchor": "end" }, label));
  }
  root.append(s("line", { class: "axis", x1: left, x2: width - right, y1: y(0), y2: y(0) }));
  for (let i = 0; i <= n; i += Math.max(1, Math.ceil(n / 10))) {
    root.append(s("text", { x: x(i), y: height - 8, "text-anchor": "middle" }, String(i)));
  }
  root.append(s("polyline", { class: "line", points: pts.map((v, i) => `${x(i)},${y(v)}`).join(" ") }));
  pts.forEach((v, i) => {
    const dot = s("circle", { class: "mean", cx: x(i), cy: y(v), r: 3 });
    dot.append(s("title", {}, `step ${i}: ${v}`));
    root.append(dot);
  });
  return root;
}

// Mean with 95% CI whiskers, one row per (task, policy), grouped by task, on one shared x scale.
export function whiskerChart(rows, title) {
  const rowH = 22, groupGap = 26, left = 230, right = 20, width = 720, top = 8;
  const tasks = [...new Set(rows.map((r) => r.task))];
  const height = top + rows.length * rowH + tasks.length * groupGap + 26;
  const root = svg(width, height, title);
  const vals = rows.flatMap((r) => [r.mean, r.ci_low ?? r.mean, r.ci_high ?? r.mean]);
  const [lo, hi] = extent(vals);
  const x = (v) => left + ((v - lo) / (hi - lo)) * (width - left - right);
  const bottom = height - 20;
  for (const [t, label] of ticks(lo, hi, 5)) {
    root.append(s("line", { class: "grid-line", x1: x(t), x2: x(t), y1: top, y2: bottom }));
    root.append(s("text", { class: "tick", "data-axis": "x", x: x(t), y: height - 6, "text-anchor": "middle" }, label));
  }
  root.append(s("line", { class: "axis", x1: x(0), x2: x(0), y1: top, y2: bottom }));
  let y = top;
  for (const task of tasks) {
    y += groupGap;
    root.append(s("text", { x: 4, y: y - 8, "font-weight": "bold" }, task));
    for (const r of rows.filter((q) => q.task === task)) {
      const cy = y + rowH / 2;
      root.append(s("text", { x: left - 8, y: cy + 4, "text-anchor": "end" }, r.policy));
      const g = s("g", { "data-policy": r.policy, "data-task": task });
      const lo95 = r.ci_low ?? r.mean, hi95 = r.ci_high ?? r.mean;
      g.append(s("line", { class: "whisker", x1: x(lo95), x2: x(hi95), y1: cy, y2: cy }));
      g.append(s("line", { class: "whisker", x1: x(lo95), x2: x(lo95), y1: cy - 5, y2: cy + 5 }));
      g.append(s("line", { class: "whisker", x1: x(hi95), x2: x(hi95), y1: cy - 5, y2: cy + 5 }));
      const dot = s("circle", { class: "mean", cx: x(r.mean), cy, r: 4.5 });
      g.append(dot);
      g.append(s("title", {}, `${task} · ${r.policy}: mean ${r.mean.toFixed(4)}, 95% CI [${lo95.toFixed(4)}, ${hi95.toFixed(4)}], n=${r.n}`));
      root.append(g);
      y += rowH;
    }
  }
  return root;
}

// Lines over logged steps (x = the step numbers as logged), one per series, with a legend.
// series: [{ name, step: [..], value: [..] }]. Used by Training for loss, reward and rates.
export function seriesChart(series, title) {
  const width = 560, left = 56, right = 12, top = 10, bottom = 26, legendH = 16 * series.length;
  const height = 200 + legendH;
  const plotBottom = height - bottom - legendH;
  const root = svg(width, height, title);
  const xs = series.flatMap((q) => q.step), ys = series.flatMap((q) => q.value);
  let x0 = Math.min(...xs), x1 = Math.max(...xs);
  if (x1 - x0 < 1e-9) { x0 -= 1; x1 += 1; }
  let lo = Math.min(...ys), hi = Math.max(...ys);
  if (hi - lo < 1e-9) { lo -= Math.abs(lo) * 0.05 + 1e-3; hi += Math.abs(hi) * 0.05 + 1e-3; }
  const pad = (hi - lo) * 0.05;
  lo -= pad; hi += pad;
  const x = (v) => left + ((v - x0) / (x1 - x0)) * (width - left - right);
  const y = (v) => top + (1 - (v - lo) / (hi - lo)) * (plotBottom - top);
  for (const [t, label] of ticks(lo, hi)) {
    root.append(s("line", { class: "grid-line", x1: left, x2: width - right, y1: y(t), y2: y(t) }));
    root.append(s("text", { class: "tick", "data-axis": "y", x: left - 4, y: y(t) + 4, "text-anchor": "end" }, label));
  }
  // steps are whole numbers: a short run gets one label per step, never the same label twice
  const few = x1 - x0 <= 4;
  const xTicks = few ? xs.filter((v, i) => xs.indexOf(v) === i) : niceTicks(x0, x1).values;
  for (const t of xTicks) {
    root.append(s("text", { class: few ? "step" : "tick", "data-axis": "x", x: x(t), y: plotBottom + 16,
      "text-anchor": "middle" }, String(t)));
  }
  series.forEach((q, k) => {
    const cls = `line series-${k % 4}`;
    const g = s("g", { "data-series": q.name });
    g.append(s("polyline", { class: cls, points: q.step.map((st, i) => `${x(st)},${y(q.value[i])}`).join(" ") }));
    q.step.forEach((st, i) => {
      const dot = s("circle", { class: `mean series-${k % 4}`, cx: x(st), cy: y(q.value[i]), r: 2.5 });
      dot.append(s("title", {}, `${q.name} at step ${st}: ${q.value[i]}`));
      g.append(dot);
    });
    root.append(g);
    const ly = plotBottom + 30 + 16 * k;
    root.append(s("line", { class: cls, x1: left, x2: left + 18, y1: ly - 4, y2: ly - 4 }));
    root.append(s("text", { x: left + 24, y: ly }, q.name));
  });
  return root;
}

// A matrix of cells (rows × cols), each coloured by its value on a diverging scale around zero
// (green above, red below, grey where there is no value); ``cells[i][j]`` is {value, title} or null.
// ``onPick(i, j)`` is called when a cell is clicked or chosen with Enter.
export function heatMap(rows, cols, cells, title, onPick = null) {
  const cw = 64, ch = 26, left = 130, top = 96;
  const width = left + cols.length * cw + 110, height = top + rows.length * ch + 10;
  const root = svg(width, height, title);
  const values = cells.flat().filter((c) => c && Number.isFinite(c.value)).map((c) => Math.abs(c.value));
  const span = Math.max(1e-9, ...values);
  // column names slant up and to the right, from above their column, clear of the cells
  cols.forEach((c, j) => root.append(s("text", { x: left + j * cw + cw / 2, y: top - 6, "text-anchor": "start",
    transform: `rotate(-35 ${left + j * cw + cw / 2} ${top - 6})`, class: "hm-label" }, c)));
  rows.forEach((r, i) => {
    root.append(s("text", { x: left - 6, y: top + i * ch + ch / 2 + 4, "text-anchor": "end", class: "hm-label" }, r));
    cols.forEach((_c, j) => {
      const cell = cells[i][j];
      const v = cell ? cell.value : null;
      const share = v === null ? 0 : Math.min(1, Math.abs(v) / span);
      const fill = v === null ? "#e5e7eb" : v >= 0 ? `rgba(22, 163, 74, ${0.15 + 0.85 * share})` : `rgba(220, 38, 38, ${0.15 + 0.85 * share})`;
      const g = s("g", { class: cell ? "cell pickable" : "cell", "data-row": rows[i], "data-col": cols[j],
        ...(cell ? { tabindex: 0, role: "button", "aria-label": cell.title } : {}) });
      g.append(s("rect", { x: left + j * cw + 1, y: top + i * ch + 1, width: cw - 2, height: ch - 2, fill }));
      if (cell) {
        g.append(s("title", {}, cell.title));
        g.append(s("text", { x: left + j * cw + cw / 2, y: top + i * ch + ch / 2 + 4, "text-anchor": "middle", class: "cell-label" },
          v.toFixed(Math.abs(v) >= 10 ? 0 : 1)));
        if (onPick) {
          g.addEventListener("click", () => onPick(i, j));
          g.addEventListener("keydown", (e) => { if (e.key === "Enter") onPick(i, j); });
        }
      }
      root.append(g);
    });
  });
  return root;
}
