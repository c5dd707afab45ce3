// turnkit view: the page. Plain JavaScript, no libraries, nothing loaded from outside the server.
// Views: #runs, #episodes, #search; state lives in the URL hash (so a view can be linked and reloaded).
// All text from the folders is put in the page with textContent, never as HTML, and no element gets a style
// attribute: the server's Content-Security-Policy (style-src 'self') blocks inline styles, so looks live in
// style.css (classes) and colours in SVG presentation attributes.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const COLORS = ["#2f6fd6", "#e07b1f"];  // run 1, run 2: the same as --a and --b in style.css (.sw.c0, .sw.c1)
const EPISODES = ["eval", "rollouts"];  // the kinds of folder that hold a trajectories.jsonl

// ------------------------------------------------------------------------------------------ helpers
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) el.append(c instanceof Node ? c : String(c));
  return el;
}
function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) el.setAttribute(k, v);
  for (const c of children.flat()) if (c) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}
function fmt(v, digits = 3) {
  if (v === null || v === undefined || v === "") return "–";
  if (typeof v !== "number") return String(v);
  if (Number.isInteger(v)) return String(v);
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-3 || a >= 1e5) ? v.toExponential(2) : v.toFixed(digits);
}
function parseHash() {
  const [view, query] = location.hash.replace(/^#/, "").split("?");
  return { view: view || "runs", params: Object.fromEntries(new URLSearchParams(query || "")) };
}
function link(view, params) {
  const q = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== "" && v !== null && v !== undefined));
  const text = q.toString();
  return "#" + view + (text ? "?" + text : "");
}
function go(view, params) { location.hash = link(view, params); }
async function api(route, params) {
  const reply = await fetch("/api/" + route + "?" + new URLSearchParams(params || {}));
  let body;
  try { body = await reply.json(); } catch (e) { throw new Error(`${route}: the server answered ${reply.status} without JSON`); }
  if (!reply.ok) throw new Error(body.error || `${route}: HTTP ${reply.status}`);
  return body;
}
function problems(list) {
  return (list || []).map((p) => h("div", { class: "problem", "data-file": p.file, "data-line": p.line ?? "" }, p.text));
}
function notice(message) {
  const box = document.getElementById("notice");
  box.replaceChildren(...(message ? [h("div", { class: "problem", id: "error" }, message)] : []));
}
function badge(text, cls) { return h("span", { class: "badge " + (cls || "") }, text); }
function flatten(obj, prefix = "", out = {}) {
  if (obj === null || typeof obj !== "object" || Array.isArray(obj)) { out[prefix || "(value)"] = obj; return out; }
  for (const [k, v] of Object.entries(obj)) {
    const key = prefix ? prefix + "." + k : k;
    if (v !== null && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length) flatten(v, key, out);
    else out[key] = v;
  }
  return out;
}
function label(id) { return id === "." ? ROOT_NAME : id; }  // the root by its folder's name
function plural(n, word) { return `${n} ${word}${n === 1 ? "" : "s"}`; }
function under(id, src) { return src.id !== id && (id === "." || src.id.startsWith(id + "/")); }
function swatch(i) { return h("span", { class: "sw c" + i }); }
function show(v) { return typeof v === "object" && v !== null ? JSON.stringify(v) : fmt(v, 4); }

// ------------------------------------------------------------------------------------------ state
let SOURCES = [];
let ROOT_NAME = ".";
async function loadSources() {
  const body = await api("sources");
  SOURCES = body.sources;
  ROOT_NAME = body.root.split(/[\\/]/).filter(Boolean).pop() || body.root;
  document.getElementById("root").textContent = body.root;
  return body;
}
// The header's tabs follow the folder picked last: Episodes opens its episodes (or the first evaluation under
// it), Search its trees, Runs the run it belongs to.
function nearest(id, kinds) {
  const fits = (src) => src.kinds.some((k) => kinds.includes(k));
  const own = SOURCES.find((src) => src.id === id);
  if (own && fits(own)) return id;
  const below = SOURCES.filter((src) => fits(src) && under(id, src));
  const pick = below.find((src) => !src.kinds.includes("rollouts")) || below[0];
  if (pick) return pick.id;
  const above = SOURCES.filter((src) => fits(src) && under(src.id, { id })).sort((a, b) => b.id.length - a.id.length);
  return above.length ? above[0].id : "";
}
function tabs(id) {
  if (!id) return;
  for (const [view, kinds] of [["runs", ["run", "eval", "synth"]], ["episodes", EPISODES], ["search", ["synth"]]]) {
    document.getElementById("nav-" + view).setAttribute("href", link(view, { id: nearest(id, kinds) }));
  }
}
function sidebar(view, kinds, current, extra) {
  const aside = document.getElementById("sources");
  const list = SOURCES.filter((src) => src.kinds.some((k) => kinds.includes(k)));
  aside.replaceChildren(
    h("h3", {}, view === "runs" ? "Runs" : view === "episodes" ? "Episode files" : "Synth folders"),
    ...(list.length ? list.map((src) => h("a", { href: link(view, { id: src.id }), class: src.id === current ? "active" : "", "data-source": src.id },
      label(src.id), h("div", { class: "kinds" }, src.kinds.join(" · ")))) : [h("p", { class: "muted" }, "none here")]),
    extra || "",
  );
}

// ------------------------------------------------------------------------------------------ runs
function chart(key, runs) {
  const W = 320, H = 150, L = 54, R = 8, T = 8, B = 22;
  const pts = runs.flatMap((r) => r.series[key] || []);
  const xs = pts.map((p) => p[0]), ys = pts.map((p) => p[1]);
  let [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  if (y0 === y1) { y0 -= Math.abs(y0) * 0.1 || 1; y1 += Math.abs(y1) * 0.1 || 1; }
  const X = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
  const Y = (y) => T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, "data-key": key },
    s("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }),
    s("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }),
    s("text", { class: "tick", x: L - 4, y: T + 8, "text-anchor": "end" }, fmt(y1)),
    s("text", { class: "tick", x: L - 4, y: H - B, "text-anchor": "end" }, fmt(y0)),
    s("text", { class: "tick", x: L, y: H - 6 }, fmt(x0)),
    s("text", { class: "tick", x: W - R, y: H - 6, "text-anchor": "end" }, "step " + fmt(x1)));
  runs.forEach((r, i) => {
    const series = r.series[key] || [];
    if (!series.length) return;
    svg.append(s("polyline", { fill: "none", stroke: COLORS[i], "stroke-width": 1.6, points: series.map((p) => `${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`).join(" "), "data-run": r.id }));
    if (series.length <= 40) series.forEach((p) => svg.append(s("circle", { cx: X(p[0]).toFixed(1), cy: Y(p[1]).toFixed(1), r: 2, fill: COLORS[i] }, s("title", {}, `${r.id} step ${p[0]}: ${fmt(p[1], 4)}`))));
  });
  return h("div", { class: "chart" }, h("div", { class: "title" }, key), svg);
}
function evalTable(runs) {
  const rows = runs.flatMap((r, i) => r.evals.map((e) => ({ ...e, run: r.id, i })));
  if (!rows.length) return null;
  return h("table", { id: "evals" },
    h("tr", {}, ...["run", "evaluation", "success", "95% interval", "mean reward", "reward 95% interval", "episodes", "errors", "mean turns"].map((t) => h("th", {}, t))),
    ...rows.map((e) => h("tr", {},
      h("td", {}, swatch(e.i), label(e.run)), h("td", {}, e.label),
      h("td", { class: "num" }, fmt(e.success)), h("td", { class: "num" }, e.lo === null || e.lo === undefined ? "–" : `[${fmt(e.lo)}, ${fmt(e.hi)}]`),
      h("td", { class: "num" }, fmt(e.reward)), h("td", { class: "num" }, e.reward_lo === null || e.reward_lo === undefined ? "–" : `[${fmt(e.reward_lo)}, ${fmt(e.reward_hi)}]`),
      h("td", { class: "num" }, fmt(e.episodes)), h("td", { class: "num" }, fmt(e.errors)), h("td", { class: "num" }, fmt(e.turns)))));
}
function configTable(runs) {
  const flat = runs.map((r) => (r.config ? flatten(r.config) : {}));
  const keys = [...new Set(flat.flatMap((f) => Object.keys(f)))].sort();
  if (!keys.length) return h("p", { class: "muted" }, "no config.json");
  return h("table", { id: "config" },
    h("tr", {}, h("th", {}, "key"), ...runs.map((r) => h("th", {}, label(r.id)))),
    ...keys.map((k) => {
      const vals = flat.map((f) => show(f[k]));
      return h("tr", { class: runs.length > 1 && vals[0] !== vals[1] ? "diff" : "", "data-key": k }, h("td", {}, k), ...vals.map((v) => h("td", {}, v)));
    }));
}
async function runsView(p) {
  const runs = SOURCES.filter((src) => src.kinds.some((k) => ["run", "eval", "synth"].includes(k)));
  const id = p.id || (runs[0] && runs[0].id);
  sidebar("runs", ["run", "eval", "synth"], id);
  tabs(id);
  const view = document.getElementById("view");
  if (!id) return view.replaceChildren(h("h2", {}, "Runs"), h("p", { class: "muted" }, "No run folders here."));
  const ids = [id, p.vs].filter(Boolean);
  const data = await fresh(Promise.all(ids.map((i) => api("run", { id: i }))));
  const keys = [...new Set(data.flatMap((r) => r.keys))];
  const other = h("select", { id: "compare", onchange: (e) => go("runs", { id, vs: e.target.value }) },
    h("option", { value: "" }, "— none —"), ...runs.filter((r) => r.id !== id).map((r) => h("option", { value: r.id, selected: r.id === p.vs }, label(r.id))));
  const first = data[0];
  const path = (r, file) => `${r.id === "." ? "" : r.id + "/"}${file}`;
  // The evaluations' episodes next to their results; the kept training rollouts (one folder per kept step, dozens
  // in a long run) folded away under the curves.
  const evals = SOURCES.filter((src) => src.kinds.includes("eval") && under(id, src));
  const rollouts = SOURCES.filter((src) => src.kinds.includes("rollouts") && under(id, src));
  view.replaceChildren(
    h("h2", { id: "run-title" }, `Run ${label(id)}`),
    h("div", { class: "toolbar" }, h("label", {}, "compare with"), other,
      first.kinds.some((k) => EPISODES.includes(k)) ? h("a", { href: link("episodes", { id }) }, "episodes →") : "",
      first.kinds.includes("synth") ? h("a", { href: link("search", { id }) }, "search trees →") : ""),
    h("div", { class: "legend" }, ...data.map((r, i) => h("span", { "data-run": r.id }, swatch(i), label(r.id)))),
    ...data.flatMap((r) => problems(r.problems)),
    h("h3", {}, "Evaluations"), evalTable(data) || h("p", { class: "muted" }, "no evaluations recorded"),
    evals.length ? h("p", { id: "eval-links" }, "Their episodes: ", ...evals.flatMap((src, i) => [i ? " · " : "",
      h("a", { href: link("episodes", { id: src.id }), class: "child-episodes" }, `${src.id} episodes →`)])) : "",
    ...data.flatMap((r) => r.images.map((img) => h("div", { class: "card picture" }, h("div", { class: "muted" }, `${path(r, img)} (drawn by the run)`),
      h("img", { src: "/files/" + path(r, img), alt: path(r, img) })))),
    h("h3", {}, `Curves (${plural(keys.length, "metric")} from metrics.jsonl)`),
    keys.length ? h("div", { class: "charts", id: "charts" }, ...keys.map((k) => chart(k, data))) : h("p", { class: "muted", id: "no-metrics" }, "no metrics here",
      ...SOURCES.filter((src) => src.kinds.includes("run") && under(id, src))
        .map((src) => h("span", {}, " · ", h("a", { href: link("runs", { id: src.id }), class: "child-run" }, `${src.id} curves →`)))),
    rollouts.length ? h("details", { id: "rollout-links" }, h("summary", {}, `Training rollouts: ${plural(rollouts.length, "kept step")}, as the learner saw them`),
      h("p", {}, ...rollouts.flatMap((src, i) => [i ? " · " : "", h("a", { href: link("episodes", { id: src.id }), class: "child-rollouts" }, src.id)]))) : "",
    first.synth ? h("div", {}, h("h3", {}, "Synth iterations"), synthTable(first.synth)) : "",
    h("h3", {}, "Config"), configTable(data),
    h("h3", {}, "Checkpoints"),
    ...data.map((r) => h("p", { class: "muted" }, `${label(r.id)}: `, r.checkpoints.length ? r.checkpoints.map((c) => `${c.name} (${c.files.join(", ")})`).join("; ") : "none")));
}
function synthTable(iters) {
  const keys = [...new Set(iters.flatMap((it) => Object.keys(it)))].filter((k) => !k.startsWith("search.")).slice(0, 12);
  return h("table", {}, h("tr", {}, ...keys.map((k) => h("th", {}, k))), ...iters.map((it) => h("tr", {}, ...keys.map((k) => h("td", { class: "num" }, show(it[k]))))));
}

// ------------------------------------------------------------------------------------------ episodes
const PAGE = 50;
async function episodesView(p) {
  const files = SOURCES.filter((src) => src.kinds.some((k) => EPISODES.includes(k)));
  const id = p.id || (files[0] && files[0].id);
  sidebar("episodes", EPISODES, id);
  tabs(id);
  const view = document.getElementById("view");
  if (!id) return view.replaceChildren(h("h2", {}, "Episodes"), h("p", { class: "muted" }, "No trajectories.jsonl here."));
  const q = { id, offset: p.offset || 0, limit: PAGE, sort: p.sort || "index", order: p.order || "asc", error: p.error || "", success: p.success || "", seed: p.seed || "", q: p.q || "" };
  const page = await fresh(api("episodes", q));
  // from the address as it is now, not as it was when this page was drawn: two quick changes both count
  const now = () => ({ ...parseHash().params, id });
  const set = (changes) => go("episodes", { ...now(), offset: 0, ...changes });
  const select = (name, options, value) => h("select", { id: "f-" + name, onchange: (e) => set({ [name]: e.target.value, ep: "" }) },
    ...options.map(([v, label]) => h("option", { value: v, selected: v === value }, label)));
  const apply = () => set({ seed: seed.value.trim(), q: text.value.trim(), ep: "" });
  const enter = (e) => { if (e.key === "Enter") apply(); };
  const seed = h("input", { id: "f-seed", size: 6, placeholder: "seed", value: p.seed || "", onkeydown: enter });
  const text = h("input", { id: "f-q", size: 14, placeholder: "env / task / prompt", value: p.q || "", onkeydown: enter });
  const privileged = h("input", { type: "checkbox", id: "privileged", checked: p.priv === "1", onchange: (e) => go("episodes", { ...now(), priv: e.target.checked ? "1" : "" }) });
  const toolbar = h("div", { class: "toolbar" },
    h("label", {}, "sort"), select("sort", [["index", "file order"], ["return", "return"], ["turns", "length"], ["seed", "seed"], ["error", "error"]], q.sort),
    select("order", [["asc", "ascending"], ["desc", "descending"]], q.order),
    h("label", {}, "error"), select("error", [["", "all"], ["none", "no error"], ["any", "any error"], ...page.causes.map((c) => [c, c])], q.error),
    h("label", {}, "success"), select("success", [["", "all"], ["yes", "yes"], ["no", "no"]], q.success),
    seed, text, h("button", { id: "apply", onclick: apply }, "filter"),
    h("label", { title: "reference answers, hidden tests: what the agent did not see" }, privileged, " show privileged data"));
  const offset = Number(q.offset);
  const pager = h("div", { class: "pager" },
    h("button", { id: "prev", disabled: offset <= 0, onclick: () => go("episodes", { ...now(), offset: Math.max(0, offset - PAGE) }) }, "‹ prev"),
    h("span", { id: "count" }, page.matched ? `${offset + 1}–${Math.min(offset + PAGE, page.matched)} of ${page.matched}` : "no episodes match",
      page.matched !== page.total ? ` (filtered from ${page.total})` : ""),
    h("button", { id: "next", disabled: offset + PAGE >= page.matched, onclick: () => go("episodes", { ...now(), offset: offset + PAGE }) }, "next ›"));
  const table = h("table", { id: "episode-list" },
    h("tr", {}, ...["#", "seed", "turns", "return", "success", "error", "prompt"].map((t) => h("th", { class: ["turns", "return"].includes(t) ? "num" : "" }, t))),
    ...page.items.map((e) => h("tr", { class: "clickable" + (String(e.index) === p.ep ? " selected" : ""), "data-index": e.index, "data-seed": e.seed ?? "", "data-return": e.return,
      onclick: () => go("episodes", { ...now(), ep: e.index }) },
    h("td", {}, e.index), h("td", {}, e.seed ?? "–"), h("td", { class: "num" }, e.turns), h("td", { class: "num" }, fmt(e.return)),
    h("td", {}, e.success ? badge("yes", "ok") : badge("no", "fail")), h("td", {}, e.error ? badge(e.error, "err") : ""),
    h("td", { class: "muted prompt", title: e.prompt }, e.prompt))));
  const detail = h("div", { id: "episode" }, h("p", { class: "muted" }, "Pick an episode."));
  view.replaceChildren(h("h2", {}, `Episodes of ${label(id)}`), toolbar, ...problems(page.problems),
    h("div", { class: "split" }, h("div", {}, pager, table), detail));
  if (p.ep !== undefined && p.ep !== "") detail.replaceChildren(episodeDetail(await fresh(api("episode", { id, i: p.ep, privileged: p.priv === "1" ? 1 : "" })), p.priv === "1"));
}
function message(role, text) {
  return h("div", { class: "msg " + role }, h("span", { class: "role" }, role), text);
}
function scoreRow(step) {
  const items = [h("span", {}, "env reward ", h("b", { class: "env-reward" }, fmt(step.reward)))];
  const critics = step.critic_rewards || step.critics;
  if (critics && typeof critics === "object") for (const [name, v] of Object.entries(critics)) items.push(h("span", { class: "critic", "data-critic": name }, `${name} `, h("b", {}, fmt(v))));
  if (step.advantage !== undefined) items.push(h("span", { class: "advantage" }, "advantage ", h("b", {}, fmt(step.advantage))));
  if (step.terminated) items.push(badge("terminated"));
  if (step.truncated) items.push(badge("truncated", "fail"));
  if (step.info && step.info.invalid_action) items.push(badge("invalid action", "fail"));
  return h("div", { class: "scores" }, ...items);
}
function tokens(step, errored) {
  const ids = step.token_ids || [];
  if (!ids.length) return null;
  const mask = step.mask || step.loss_mask;
  const known = Array.isArray(mask) || errored;
  const label = errored ? "not trained: the episode errored (learners mask it)" : known ? "green: trained (mask 1), grey: not trained" : "no mask recorded";
  return h("div", { class: "tokens" }, h("div", { class: "muted" }, `${plural(ids.length, "generated token")}; ${label}`),
    ...ids.map((t, i) => h("span", { class: "tok" + (known ? (errored || !mask[i] ? " untrained" : " trained") : ""), title: step.logprobs ? `logprob ${fmt(step.logprobs[i])}` : "" },
      step.tokens ? step.tokens[i] : t)));
}
function episodeDetail(ep, privileged) {
  const v = ep._view;
  const err = ep.error;
  const head = h("div", { class: "card" },
    h("div", {}, h("b", {}, `Episode ${v.index}`), ` · ${v.file}:${v.line} · ${ep.env_id || ""} · seed ${ep.seed ?? "–"}`, ep.task_id ? ` · task ${ep.task_id}` : ""),
    h("div", {}, "return ", h("b", { id: "ep-return" }, fmt(ep.total_reward)), " · ", ep.success ? badge("success", "ok") : badge("no success", "fail"),
      ` · ${plural((ep.steps || []).length, "turn")}`, ep.group !== null && ep.group !== undefined ? ` · group ${ep.group}` : ""),
    err ? h("div", { class: "problem", id: "ep-error" }, `error (${err.cause || "error"}): ${err.message || ""}`) : "");
  const parts = [head];
  if (v.privileged.length) {
    parts.push(privileged && ep.privileged !== undefined
      ? h("div", { class: "privileged", id: "privileged-data" }, h("div", {}, badge("privileged", "priv"), " what the agent did not see"), h("pre", {}, JSON.stringify(ep.privileged, null, 2)))
      : h("p", { class: "muted", id: "privileged-hidden" }, "Privileged data (reference, hidden tests) is hidden; tick “show privileged data” to see it."));
  }
  let role = "user";
  (ep.steps || []).forEach((step, i) => {
    const tool = step.info && step.info.tool;
    parts.push(h("div", { class: "turn", "data-turn": i },
      h("div", { class: "head" }, h("b", {}, `turn ${i + 1}`), tool ? h("span", {}, "tool ", h("b", {}, tool.name || JSON.stringify(tool)), tool.status ? ` (${tool.status})` : "") : ""),
      message(i === 0 ? "user" : role, step.observation), message("assistant", step.action), scoreRow(step), tokens(step, Boolean(err)),
      h("details", {}, h("summary", {}, "info"), h("pre", {}, JSON.stringify(step.info || {}, null, 2)))));
    role = tool ? "tool" : "user";
  });
  if (ep.final_observation) parts.push(h("div", { class: "turn", id: "final" }, h("div", { class: "head" }, "the env's last reply"), message(role, ep.final_observation)));
  return h("div", {}, ...parts);
}

// ------------------------------------------------------------------------------------------ search
function layout(nodes) {
  const kids = new Map(nodes.map((n) => [n.id, []]));
  nodes.forEach((n) => { if (n.parent !== null) kids.get(n.parent).push(n.id); });
  const pos = new Map();
  let next = 0;
  const place = (id, depth) => {
    const c = kids.get(id);
    if (!c.length) pos.set(id, { x: next++, y: depth });
    else { c.forEach((k) => place(k, depth + 1)); pos.set(id, { x: (pos.get(c[0]).x + pos.get(c[c.length - 1]).x) / 2, y: depth }); }
  };
  place(0, 0);
  return { pos, width: Math.max(next, 1), depth: Math.max(...[...pos.values()].map((q) => q.y)) + 1 };
}
const Q_COLORS = { "-1": [214, 48, 49], "0": [236, 230, 208], "1": [39, 174, 96] };  // red, pale, green
function qColor(q) {  // Q from −1 (red) through 0 (pale) to +1 (green), the root included
  const t = Math.max(-1, Math.min(1, Number(q) || 0));
  const [mid, end] = [Q_COLORS["0"], Q_COLORS[t < 0 ? "-1" : "1"]];
  return `rgb(${mid.map((m, i) => Math.round(m + (end[i] - m) * Math.abs(t))).join(",")})`;
}
function treeSvg(data, id, selected) {
  const { pos, width, depth } = layout(data.nodes);
  const DX = 84, DY = 78, P = 48;
  const chosen = new Set(data.pairs.map((q) => q.chosen_node)), rejected = new Set(data.pairs.map((q) => q.rejected_node));
  const X = (n) => P + pos.get(n).x * DX, Y = (n) => P + pos.get(n).y * DY;
  const byId = new Map(data.nodes.map((n) => [n.id, n]));
  const svg = s("svg", { id: "tree", width: P * 2 + (width - 1) * DX, height: P * 2 + (depth - 1) * DY + 20 });
  data.nodes.forEach((n) => { if (n.parent !== null) svg.append(s("path", { class: "edge" + (n.committed ? " committed" : ""), d: `M${X(n.parent)},${Y(n.parent)} L${X(n.id)},${Y(n.id)}` })); });
  const maxV = Math.max(1, ...data.nodes.map((n) => n.visits));
  data.nodes.forEach((n) => {
    const cls = ["node", n.committed ? "committed" : "", chosen.has(n.id) ? "chosen" : "", rejected.has(n.id) ? "rejected" : "", n.id === selected ? "selected" : ""].join(" ");
    const r = 6 + 10 * Math.sqrt(n.visits / maxV);
    const g = s("g", { class: cls, "data-node": n.id, "data-visits": n.visits, "data-q": n.q },
      s("circle", { cx: X(n.id), cy: Y(n.id), r, fill: qColor(n.q) }),
      s("text", { x: X(n.id), y: Y(n.id) + r + 11, "text-anchor": "middle" }, `N=${n.visits} Q=${Number(n.q ?? 0).toFixed(2)}`),
      s("title", {}, `node ${n.id}${n.terminal ? " (terminal" + (n.success ? ", success)" : ")") : ""}\n${n.text.slice(0, 200)}`));
    g.addEventListener("click", () => go("search", { id, tree: data.tree, node: n.id }));
    svg.append(g);
  });
  return { svg, byId };
}
async function searchView(p) {
  const synths = SOURCES.filter((src) => src.kinds.includes("synth"));
  const id = p.id || (synths[0] && synths[0].id);
  const view = document.getElementById("view");
  tabs(id);
  if (!id) { sidebar("search", ["synth"], id); return view.replaceChildren(h("h2", {}, "Search"), h("p", { class: "muted" }, "No synth folders here.")); }
  const list = (await fresh(api("trees", { id }))).trees;
  const tree = p.tree || (list[0] && list[0].tree);
  sidebar("search", ["synth"], id, h("div", {}, h("h3", {}, "Trees"),
    ...list.map((t) => h("a", { href: link("search", { id, tree: t.tree }), class: t.tree === tree ? "active" : "", "data-tree": t.tree }, t.tree))));
  if (!tree) return view.replaceChildren(h("h2", {}, `Search trees of ${label(id)}`), h("p", { class: "muted" }, "no trees"));
  const data = await fresh(api("tree", { id, tree }));
  const selected = p.node !== undefined && p.node !== "" ? Number(p.node) : null;
  const { svg, byId } = treeSvg(data, id, selected);
  const pairRows = data.pairs.map((q, i) => h("tr", { "data-pair": i },
    h("td", { class: "turn-number" }, typeof q.step === "number" ? q.step + 1 : "–"), h("td", {}, h("pre", {}, q.chosen)), h("td", {}, h("pre", {}, q.rejected)),
    h("td", { class: "num" }, `${fmt(q.q_chosen, 2)} / ${fmt(q.q_rejected, 2)}`), h("td", { class: "num" }, `${fmt(q.n_chosen)} / ${fmt(q.n_rejected)}`), h("td", { class: "num" }, fmt(q.confidence, 2)),
    h("td", {}, q.chosen_node === null ? h("span", { class: "muted" }, "no matching node") : h("span", {},
      h("a", { href: link("search", { id, tree, node: q.chosen_node }), class: "pair-chosen" }, `chosen → node ${q.chosen_node}`), h("br"),
      h("a", { href: link("search", { id, tree, node: q.rejected_node }), class: "pair-rejected" }, `rejected → node ${q.rejected_node}`)))));
  const n = selected !== null ? byId.get(selected) : null;
  const info = n ? h("div", { class: "card", id: "node-detail", "data-node": n.id },
    h("div", {}, h("b", {}, `node ${n.id}`), ` · depth ${n.depth} · visits ${n.visits} · Q ${fmt(n.q)} · V ${fmt(n.value)} · edge reward ${fmt(n.reward)} · env reward ${fmt(n.env_reward)} · evaluation ${fmt(n.evaluation)}`,
      n.committed ? " · " : "", n.committed ? badge("committed") : "", n.terminal ? " · " : "", n.terminal ? badge(n.success ? "success" : "terminal", n.success ? "ok" : "fail") : ""),
    n.id !== 0 ? message("assistant", n.text) : "", message("user", n.observation),
    h("details", {}, h("summary", {}, "info"), h("pre", {}, JSON.stringify(n.info, null, 2)))) : h("p", { class: "muted" }, "Click a node to read its turn.");
  const picture = list.find((t) => t.tree === tree)?.picture;
  view.replaceChildren(
    h("h2", {}, `Tree ${tree} of ${label(id)}`),
    h("p", { class: "muted" }, `${data.meta.env_id || ""} · seed ${data.meta.seed} · ${plural(data.nodes.length, "node")} · size = visits N, colour = Q (red −1 … green +1), blue = committed path, green/red ring = chosen/rejected in a pair`,
      picture ? h("span", {}, " · ", h("a", { href: `/files/${id === "." ? "" : id + "/"}${picture}` }, "the run's picture")) : ""),
    ...problems(data.problems),
    h("div", { class: "tree-wrap" }, svg), info,
    h("h3", {}, `Pairs from this tree (${data.pairs.length})`),
    data.pairs.length ? h("table", { id: "pairs" }, h("tr", {}, ...["turn", "chosen", "rejected", "Q w / l", "N w / l", "confidence", "nodes"].map((t) => h("th", {}, t))), ...pairRows)
      : h("p", { class: "muted" }, "no pairs came from this tree"));
  if (n) document.querySelector(`[data-node="${n.id}"]`)?.scrollIntoView({ block: "nearest", inline: "center" });
}

// ------------------------------------------------------------------------------------------ router
// Two quick changes start two renders; each waits for its answers, and whichever answer comes last, only the
// newest render may draw: fresh() throws STALE for an older one once its answer arrives.
let TICKET = 0;
const STALE = new Error("a newer view was asked for");
async function fresh(promise) {
  const ticket = TICKET;
  const value = await promise;
  if (ticket !== TICKET) throw STALE;
  return value;
}
async function render() {
  const ticket = ++TICKET;
  const { view, params } = parseHash();
  for (const name of ["runs", "episodes", "search"]) document.getElementById("nav-" + name).classList.toggle("active", name === view);
  notice("");
  try {
    if (!SOURCES.length) {
      const body = await fresh(loadSources());
      if (body.note) notice(body.note);
    }
    if (view === "episodes") await episodesView(params);
    else if (view === "search") await searchView(params);
    else await runsView(params);
  } catch (e) {
    if (e !== STALE && ticket === TICKET) {
      document.getElementById("view").replaceChildren();
      notice(String(e.message || e));
    }
  }
  if (ticket === TICKET) window.renders = (window.renders || 0) + 1;  // tests wait for this to move
  window.settled = (window.settled || 0) + 1;  // every render that ended, drawn or dropped as stale
}
window.addEventListener("hashchange", render);
render();
