// Purser dashboard: renders the store's snapshot and keeps it live with
// Server-Sent Events. Everything from the store goes in as text
// (textContent), never as HTML: the store holds agents' output.
"use strict";

const token = new URLSearchParams(location.search).get("token");
const withToken = (path) => token ? path + "?token=" + encodeURIComponent(token) : path;

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
  return e;
}

function fmtTime(s) {
  const d = new Date(s);
  return isNaN(d) || d.getFullYear() < 2000 ? "" : d.toLocaleTimeString();
}

function gauge(g, prefix) {
  const head = el("div", { class: "head" }, el("b", {}, g.metric), el("span", {}, g.used));
  const box = el("div", { class: "gauge", "data-metric": g.metric, "data-tier": g.tier || "NONE" }, head);
  if (!g.enforced) {
    box.append(el("div", { class: "note" }, g.note));
    return box;
  }
  const track = el("div", {
    class: "track", role: "meter", "aria-label": prefix + " " + g.metric,
    "aria-valuemin": "0", "aria-valuemax": "100", "aria-valuenow": g.fill.toFixed(1), "aria-valuetext": g.label,
  });
  const fill = el("div", { class: "fill" });
  fill.style.width = g.fill + "%";
  track.append(fill);
  for (const [name, letter] of [["optimal", "O"], ["warning", "W"], ["hard", "H"]]) {
    const line = g[name];
    if (!line) continue;
    const m = el("div", { class: "mark", title: name + " line: " + line.value }, el("span", { "aria-hidden": "true" }, letter));
    m.style.left = "calc(" + line.at + "% - 1px)";
    track.append(m);
  }
  box.append(track, el("div", { class: "note" }, "tier " + g.tier + " · " + g.note));
  return box;
}

function gauges(b, prefix) {
  const box = el("div", { class: "gauges" });
  for (const g of b.gauges) box.append(gauge(g, prefix));
  return box;
}

function spendChart(points) {
  if (points.length === 0) return el("p", { class: "empty" }, "No spend recorded yet.");
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "spend");
  svg.setAttribute("viewBox", "0 0 560 90");
  svg.setAttribute("preserveAspectRatio", "none");
  const last = points[points.length - 1];
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", "Spend over time: " + points.length + " entries, now " + last.label + ", " + last.tokens + " tokens");
  const t0 = new Date(points[0].at).getTime(), t1 = new Date(last.at).getTime();
  // Plot dollars when any are known, else tokens.
  const useUSD = points.some((p) => p.usd > 0);
  const val = (p) => useUSD ? p.usd : p.tokens;
  const top = Math.max(...points.map(val)) || 1;
  const xy = points.map((p) => {
    const x = t1 > t0 ? (new Date(p.at).getTime() - t0) / (t1 - t0) * 550 + 5 : 280;
    const y = 85 - val(p) / top * 80;
    return x.toFixed(1) + "," + y.toFixed(1);
  });
  const line = document.createElementNS(ns, "polyline");
  line.setAttribute("points", (points.length === 1 ? ["5,85"] : []).concat(xy).join(" "));
  svg.append(line);
  return el("figure", {}, svg, el("figcaption", { class: "note" },
    (useUSD ? "Cumulative spend: " : "Cumulative tokens (no dollar figure known): ") + last.label + " · " + last.tokens + " tokens"));
}

function degradeTimeline(ds) {
  if (ds.length === 0) return el("p", { class: "empty" }, "No degrade actions.");
  const ol = el("ol", { class: "timeline" });
  for (const d of ds) {
    ol.append(el("li", {}, fmtTime(d.at) + " · iteration " + d.iteration + " · ", el("b", {}, d.action),
      " at " + d.tier + " (" + d.scope + " " + d.metric + ")" + (d.why ? ": " + d.why : "")));
  }
  return ol;
}

function callsTable(calls) {
  if (calls.length === 0) return el("p", { class: "empty" }, "No calls yet.");
  const tb = el("tbody");
  for (const c of calls) {
    tb.append(el("tr", {}, el("td", {}, c.iteration), el("td", {}, c.kind + (c.attempt > 1 ? " (retry " + (c.attempt - 1) + ")" : "")),
      el("td", {}, c.model), el("td", {}, fmtTime(c.started)), el("td", {}, c.duration || "running"),
      el("td", {}, c.outcome || "running"), el("td", {}, c.tokens), el("td", {}, c.money), el("td", {}, c.source), el("td", {}, c.error)));
  }
  const head = el("tr", {}, ...["iter", "kind", "model", "started", "took", "outcome", "tokens", "money", "usage source", "error"].map((h) => el("th", { scope: "col" }, h)));
  return el("table", {}, el("thead", {}, head), tb);
}

function sharesTable(shares, col) {
  const tb = el("tbody");
  for (const s of shares) {
    tb.append(el("tr", {}, el("td", {}, s.name), el("td", {}, s.calls), el("td", {}, s.tokens), el("td", {}, s.money)));
  }
  const head = el("tr", {}, ...[col, "calls", "tokens", "money"].map((h) => el("th", { scope: "col" }, h)));
  return el("table", { "data-shares": col }, el("thead", {}, head), tb);
}

function details(key, title, body) {
  return el("details", { "data-key": key }, el("summary", {}, title), body);
}

function task(t) {
  const shown = t.state === "BLOCKED" || t.state === "FAILED" || t.state === "DONE" ? t.state : t.budget.tier;
  const art = el("article", { class: "task", id: "task-" + t.id, "data-task": t.id, "data-state": t.state, "data-tier": t.budget.tier, "aria-label": "task " + t.id });
  art.append(el("h3", {}, el("span", {}, t.id),
    el("span", { class: "badge " + shown, "data-badge": "" }, shown),
    el("span", { class: "note" }, "state " + t.state + " · budget " + t.budget.summary + " · money " + t.budget.money)));
  if (t.goal) art.append(el("p", { class: "goal" }, t.goal));
  if (t.reason) art.append(el("p", { class: "reason" }, "Why: " + t.reason));
  // A forecast of the tokens alone (the money unknown) is a forecast too.
  const forecasting = t.forecast && (t.forecast.ok || (t.forecast.tokens && t.forecast.tokens.ok));
  if (t.forecastText) art.append(el("p", { class: "forecast", "data-forecast": forecasting ? "1" : "0" }, t.forecastText));
  art.append(gauges(t.budget, "task " + t.id));
  art.append(details(t.id + "/spend", "Spend over time", spendChart(t.spend)));
  art.append(details(t.id + "/degrades", "Degrade actions (" + t.degrades.length + ")", degradeTimeline(t.degrades)));
  art.append(details(t.id + "/calls", "Calls (" + t.calls.length + ")", callsTable(t.calls)));
  if (t.models.length > 0) art.append(details(t.id + "/models", "Per model (" + t.models.length + ")", sharesTable(t.models, "model")));
  // Who spent it: shown only when a sub-agent spent some of it.
  if (t.agents.length > 0) art.append(details(t.id + "/agents", "Per sub-agent (" + t.agents.length + ")", sharesTable(t.agents, "agent")));
  for (const d of t.docs) art.append(details(t.id + "/" + d.name, d.name, el("pre", {}, d.text)));
  return art;
}

// budgetNode is a named budget and, nested under it, its children.
function budgetNode(n) {
  const li = el("li", { "data-budget": n.name, "data-tier": n.tier.toUpperCase() },
    el("b", {}, n.name), " ",
    el("span", { class: "badge " + n.tier.toUpperCase() }, n.tier.toUpperCase()), " ",
    el("span", { class: "note" }, n.summary));
  if (n.children.length > 0) {
    const ul = el("ul", {});
    for (const c of n.children) ul.append(budgetNode(c));
    li.append(ul);
  }
  return li;
}

function renderBudgets(budgets) {
  const box = document.getElementById("budgets");
  if (!budgets || budgets.length === 0) {
    box.replaceChildren();
    box.hidden = true;
    return;
  }
  const ul = el("ul", { class: "tree" });
  for (const n of budgets) ul.append(budgetNode(n));
  box.replaceChildren(el("h2", {}, "Named budgets"), ul);
  box.hidden = false;
}

function render(snap) {
  renderBudgets(snap.budgets);
  const main = document.getElementById("runs");
  const open = new Set([...main.querySelectorAll("details[open]")].map((d) => d.dataset.key));
  const frag = document.createDocumentFragment();
  if (snap.runs.length === 0) frag.append(el("p", { class: "empty" }, "Nothing has run yet."));
  for (const r of snap.runs) {
    const sec = el("section", { class: "run", "data-run": r.id }, el("h2", {}, "Run " + r.id));
    if (r.budget) {
      sec.append(el("p", {}, "Run budget: ", el("span", { class: "badge " + r.budget.tier }, r.budget.tier), " " + r.budget.summary + " · money " + r.budget.money));
      sec.append(gauges(r.budget, "run " + r.id));
    }
    for (const t of r.tasks) sec.append(task(t));
    frag.append(sec);
  }
  main.replaceChildren(frag);
  for (const d of main.querySelectorAll("details")) if (open.has(d.dataset.key)) d.open = true;
}

function setLive(on, text) {
  const live = document.getElementById("live");
  live.dataset.live = on ? "1" : "0";
  live.textContent = text;
  live.classList.toggle("error", !on);
}

function connect() {
  const es = new EventSource(withToken("events"));
  es.addEventListener("snapshot", (e) => {
    render(JSON.parse(e.data));
    setLive(true, "live · updated " + new Date().toLocaleTimeString());
  });
  es.addEventListener("error", (e) => {
    if (e.data) setLive(false, "cannot read the store: " + e.data);
    else setLive(false, "disconnected; reconnecting…");
  });
}

connect();
