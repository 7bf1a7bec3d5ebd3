// "Leaderboard": the newest league in the store (GET /api/league): each entrant's OpenSkill rating
// (mu ± sigma, the conservative mu − 3σ), cross-play matches and mean surplus, and the cross-play
// heat-map (the row entrant's mean surplus when it met the column's); a cell lists its matches.
import { heatMap } from "./charts.js";
import { $, api, clear, fmt, h, signed } from "./dom.js";
import { showInReplays } from "./replays.js";

const LINKS = 12; // a pairing lists its first matches as links into Replays

export async function initLeaderboard() {
  const status = $("#leaderboard-status");
  let data;
  try {
    data = await api("/api/league");
  } catch (e) {
    status.classList.add("error");
    status.textContent = `Could not load the league: ${e.message}`;
    return;
  }
  if (!data.league) {
    status.textContent = "No league in the store yet. Run one with:";
    status.after(h("pre", { id: "leaderboard-command" }, h("code", { text: data.command })));
    return;
  }
  status.textContent = `League on ${data.tasks.join(", ")} (seed ${data.seed}): ${data.total} matches. ` +
    "Ratings: OpenSkill Plackett–Luce, ranked by surplus over BATNA in each cross-play match.";
  $("#leaderboard-body").hidden = false;
  const tbody = clear($("#leaderboard-table tbody"));
  data.entrants.forEach((r, i) => {
    tbody.append(h("tr", { "data-entrant": r.name },
      h("td", { class: "num", text: i + 1 }), h("td", { text: r.name }),
      h("td", { class: "num", text: `${fmt(r.mu, 2)} ± ${fmt(r.sigma, 2)}` }),
      h("td", { class: "num", text: fmt(r.conservative, 2) }), h("td", { class: "num", text: r.matches }),
      h("td", { class: "num", text: r.mean_surplus === null ? "–" : signed(r.mean_surplus, 2) }),
      h("td", { class: "num", text: r.self_play.mean === null ? "–" : signed(r.self_play.mean, 2) })));
  });
  const names = data.entrants.map((r) => r.name);
  const byPair = new Map(data.cross_play.map((c) => [`${c.entrant}|${c.opponent}`, c]));
  const cells = names.map((a) => names.map((b) => {
    const c = byPair.get(`${a}|${b}`);
    return c ? { value: c.mean, title: `${a} against ${b}: mean surplus ${signed(c.mean, 2)} ` +
      `[${signed(c.ci[0], 2)}, ${signed(c.ci[1], 2)}] over ${c.n} matches`, pair: c } : null;
  }));
  const pick = (i, j) => {
    const c = cells[i][j].pair;
    const box = clear($("#leaderboard-pair"));
    box.append(h("p", { text: `${c.entrant} against ${c.opponent}: mean surplus ${signed(c.mean, 2)}, 95% CI ` +
      `[${signed(c.ci[0], 2)}, ${signed(c.ci[1], 2)}], ${c.n} matches (league match numbers):` }),
    h("p", { class: "mono", id: "leaderboard-matches", text: c.match_indices.join(", ") }),
    h("p", {}, "Open in Replays: ", ...c.refs.slice(0, LINKS).flatMap((ref, k) => [k ? ", " : "", replayLink(ref, c.match_indices[k])])));
  };
  clear($("#leaderboard-heatmap")).append(heatMap(names, names, cells,
    "Cross-play: the row entrant's mean surplus when it met the column's", pick));
}

function replayLink(ref, index) {
  const a = h("a", { href: "#replays", class: "league-replay", "data-ref": ref, text: `match ${index}` });
  a.addEventListener("click", (e) => { e.preventDefault(); showInReplays(ref); });
  return a;
}
