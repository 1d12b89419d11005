// liminal's dashboard: plain JavaScript, no library, nothing fetched but this server's data.
// Views by the address's fragment: #/ threads, #/thread/ID[/turn/N|/msg/ID], #/search/QUERY.
// The token comes once as #token=... (printed by `liminal dashboard`), is kept in this tab's
// sessionStorage and sent as a bearer token; the fragment is never sent to any server.
"use strict";

const API = "/dashboard/api/";
const POLL_MS = 2000;
const WINDOW = 60; // turns rendered at once; more on request
const SVG = "http://www.w3.org/2000/svg";

let token = sessionStorage.getItem("liminal-token") || "";
let stamp = null; // what the server last said about the data on show
let poller = null;
let view = null; // {kind, ...} of the page on show
// Which navigation is current: a page's data read for one the person has left is not shown over
// the page they went to (a slow answer, or a live reload under way when they left).
let visits = 0;
const finds = new Map(); // the last search's snippets by message: shown if the message lacks the words

// -- small helpers ---------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) node.setAttribute(k, v);
  for (const c of children.flat()) if (c) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

function tokens(n) {
  if (n === null || n === undefined) return "?";
  if (Math.abs(n) < 1000) return Math.round(n).toLocaleString("en");
  return (n / 1000).toFixed(1).replace(/\.0$/, "") + "k";
}

function big(n) { // input-token equivalents: 1.2M, 830k
  if (n === null || n === undefined) return "?";
  if (Math.abs(n) >= 1e6) return (n / 1e6).toFixed(1).replace(/\.0$/, "") + "M";
  return tokens(n);
}

function when(t) {
  if (!t) return "-";
  const d = new Date(t * 1000);
  const pad = (x) => String(x).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

function ago(t) {
  if (!t) return "-";
  const s = Date.now() / 1000 - t;
  if (s < 90) return "just now";
  if (s < 5400) return `${Math.round(s / 60)} min ago`;
  if (s < 129600) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} days ago`;
}

function home(path) { return path || "-"; }

function main() { return document.getElementById("main"); }

function show(...nodes) { main().replaceChildren(...nodes.filter((n) => n !== null && n !== undefined)); }

class Refused extends Error {}
class Left extends Error {} // the person went elsewhere while the page's data was read

async function pageData(path) {
  const visit = visits;
  const body = await api(path);
  if (visit !== visits) throw new Left();
  return body;
}

async function api(path) {
  const answer = await fetch(API + path, { headers: { Authorization: `Bearer ${token}` }, cache: "no-store" });
  if (answer.status === 401) throw new Refused("the token is missing or wrong");
  const body = await answer.json().catch(() => ({ error: `HTTP ${answer.status}` }));
  if (!answer.ok) throw new Error(body.error || `HTTP ${answer.status}`);
  return body;
}

function askToken(why) {
  clearInterval(poller);
  document.getElementById("live").className = "";
  const input = el("input", { type: "password", id: "token-input", placeholder: "token", autocomplete: "off", size: 48 });
  show(el("section", { class: "card narrow" },
    el("h1", { text: "This dashboard needs liminal's token" }),
    why ? el("p", { class: "bad", text: why.charAt(0).toUpperCase() + why.slice(1) + "." }) : null,
    el("p", {}, "Open the address ", el("code", { text: "liminal dashboard" }),
      " printed (the token follows #token=), or paste the token from ",
      el("code", { text: "$LIMINAL_HOME/serve-token" }), " (liminal serve's too)."),
    el("form", { onsubmit: (e) => { e.preventDefault(); setToken(input.value.trim()); route(); } },
      input, " ", el("button", { type: "submit", text: "Open" }))));
}

function setToken(value) {
  token = value;
  sessionStorage.setItem("liminal-token", value);
}

function failed(err) {
  if (err instanceof Left) return;
  if (err instanceof Refused) return askToken(err.message);
  show(el("section", { class: "card error" }, el("h1", { text: "Could not load this page" }), el("p", { text: String(err.message || err) })));
}

// -- live updates: the page asks for a cheap stamp and reloads its data when it changes ----------

let polling = 0; // which page's polling is current: a stamp asked for by a page left is not its

function live(thread, reload, since) {
  clearInterval(poller);
  const mine = ++polling;
  stamp = since ?? null; // the data on show was read at this stamp
  const badge = document.getElementById("live");
  let busy = false; // a slow answer is not asked again on top of itself
  const tick = async () => {
    if (busy) return;
    busy = true;
    try {
      const now = (await api("stamp" + (thread ? `?thread=${encodeURIComponent(thread)}` : ""))).stamp;
      // The person went to another page while this was asked: the list's stamp against the
      // thread's would reload the list over the thread page.
      if (mine !== polling) return;
      badge.className = "on";
      if (stamp !== null && now !== stamp) {
        badge.dataset.updated = String(Number(badge.dataset.updated || 0) + 1);
        badge.title = `Updated ${new Date().toLocaleTimeString()}`;
        return await reload(); // which starts polling again from the stamp it read
      }
      stamp = now;
    } catch (err) {
      badge.className = "off";
    } finally {
      busy = false;
    }
  };
  if (stamp === null) tick();
  else badge.className = "on";
  poller = setInterval(tick, POLL_MS);
}

// -- threads ---------------------------------------------------------------------------------

const COLUMNS = [
  ["title", "Thread"], ["cli", "CLI"], ["cwd", "Folder"], ["last_activity", "Last activity"],
  ["context_used", "Context now"], ["turns", "Turns"], ["swaps", "Swaps"], ["saved", "Saved vs auto-compact"],
];

async function threadsPage(state) {
  const rows = await pageData("threads" + (state.archived ? "?archived=1" : ""));
  const filter = el("input", { type: "search", id: "filter", placeholder: "Filter by title, folder or CLI", value: state.filter || "" });
  const archived = el("input", { type: "checkbox", id: "archived", checked: state.archived });
  const table = el("table", { class: "threads", id: "threads" });
  const draw = () => {
    const words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    const key = state.sort || "last_activity";
    const value = (r) => key === "saved" ? (r.savings ? r.savings.saved : -Infinity) : r[key];
    const shown = rows
      .filter((r) => words.every((w) => `${r.title} ${r.cwd} ${r.cli}`.toLowerCase().includes(w)))
      .sort((a, b) => {
        const x = value(a), y = value(b);
        const order = typeof x === "string" || typeof y === "string"
          ? String(x || "").localeCompare(String(y || "")) : (x ?? -Infinity) - (y ?? -Infinity);
        return state.ascending ? order : -order;
      });
    table.replaceChildren(
      el("thead", {}, el("tr", {}, COLUMNS.map(([k, label]) => el("th", {
        class: k === key ? "sorted" : null, "data-key": k, tabindex: 0,
        onclick: () => { state.ascending = state.sort === k ? !state.ascending : k === "title" || k === "cli" || k === "cwd"; state.sort = k; draw(); },
      }, label, k === key ? (state.ascending ? " ▲" : " ▼") : "")))),
      el("tbody", {}, shown.map((r) => el("tr", { "data-id": r.id, class: r.state === "archived" ? "archived" : null },
        el("td", {}, el("a", { href: `#/thread/${encodeURIComponent(r.id)}`, title: r.title !== r.heading ? r.title : null, text: r.heading || r.id.slice(0, 8) }),
          r.state === "archived" ? el("span", { class: "tag", text: "archived" }) : null),
        el("td", { text: r.cli }),
        el("td", { class: "path", title: r.cwd, text: home(r.cwd) }),
        el("td", { title: when(r.last_activity), text: ago(r.last_activity) }),
        el("td", { class: "num", title: r.context_from_file ? "from its session file (no model call yet)" : null },
          r.context_used === null && r.context_why ? el("span", { class: "quiet", title: r.context_why, text: "not known" }) : tokens(r.context_used),
          r.context_size ? el("span", { class: "quiet", text: ` / ${tokens(r.context_size)}` }) : ""),
        el("td", { class: "num", text: r.turns }),
        el("td", { class: "num", title: `${r.swaps} swaps of ${r.moves} moves (swaps, /clear, /undo)`, text: r.swaps }),
        el("td", { class: "num" }, savedText(r.savings, r.payback)),
      ))));
    document.getElementById("count").textContent = `${shown.length} of ${rows.length} threads`;
  };
  filter.addEventListener("input", () => { state.filter = filter.value; draw(); });
  archived.addEventListener("change", () => { state.archived = archived.checked; threadsPage(state).catch(failed); });
  show(el("section", {},
    el("div", { class: "toolbar" }, el("h1", { text: "Threads" }), filter,
      el("label", {}, archived, " archived too"), el("span", { id: "count", class: "quiet" })),
    rows.length ? table : el("p", { class: "quiet", text: "No threads yet: liminal records a conversation once a client opens one through it." })));
  draw();
  live(null, () => threadsPage(state).catch(failed));
}

function savedText(s, payback) {
  if (!s) return el("span", { class: "quiet", text: "-" });
  const share = Math.round(s.saved_share * 100);
  const why = lossWhy(s, payback);
  return el("span", { class: s.saved > 0 ? "good" : s.saved < 0 ? "bad" : "quiet", title:
    `As made ${big(s.made)}${s.summaries ? ` (the model's summaries ${big(s.summaries)})` : ""}, under auto-compact ${big(s.auto_compact)} input-token equivalents (estimate)${why ? `. ${why}` : ""}` },
  `${big(s.saved)} (${share}%)`, why ? el("span", { class: "loss", "data-why": why, text: " ⚠" }) : null);
}

function lossWhy(s, payback) {
  // Why swaps cost more than they saved: the payback measured against the calls between swaps
  // (the policy's warning, naming the settings to change), else what each swap paid.
  const warning = payback && payback.warning && payback.warning.length ? payback.warning.join(" ") : "";
  if (warning) return warning;
  if (!s || s.saved >= 0) return "";
  return "Swaps cost more than they saved: each rebuilt the prompt cache (Rebuild and Payback in the thread's moves), and the calls after it did not repay that before the next." ;
}

// -- a thread --------------------------------------------------------------------------------

const MOVE_CLASS = (m) => m.rewrite ? "swap" : m.move.startsWith("/clear") ? "clear" : m.move === "/undo" ? "undo" : "other";

async function threadPage(id, target, keepFrom) {
  // A live reload keeps the turns on show from the first one shown; new ones join at the end.
  const around = keepFrom !== undefined ? `?lo=${keepFrom}`
    : target ? (target.msg ? `?msg=${encodeURIComponent(target.msg)}` : `?turn=${target.turn}`) : "";
  const data = await pageData(`thread/${encodeURIComponent(id)}${around}`);
  const t = data.thread;
  const now = data.context_now;
  const s = data.savings;
  const bands = el("div", { id: "bands", class: "card" }, el("h2", { text: "What a swap would make now" }), el("p", { class: "quiet", text: "Reading the session file…" }));
  show(
    el("section", { class: "thread-head" },
      el("h1", { id: "thread-title", title: t.title !== t.heading ? t.title : null, text: t.heading || t.id }),
      el("p", { class: "quiet" }, t.cli && t.cli !== "-" ? `${t.cli} · ` : "", el("span", { class: "path", text: t.cwd || "?" }), ` · thread ${t.id}`,
        t.state === "archived" ? el("span", { class: "tag", text: "archived" }) : null,
        data.transcript.count ? el("button", { class: "link", id: "latest", onclick: () => toLatest() }, "jump to the latest turn ↓") : null)),
    moneyWarning(data),
    el("section", { class: "cards" },
      card("Context now", now.used !== null ? tokens(now.used) : "not known",
        now.used === null ? now.why || "" : [now.size ? `of a ${tokens(now.size)} window` : "", now.from_file ? "from its session file (no model call yet)" : ""].filter(Boolean).join(", ")),
      card("Model calls", data.points.length, `${data.turn_count} turns`),
      card("Swaps", data.swaps, `of ${data.move_count} moves (swaps, /clear, /undo)`),
      card("Saved vs auto-compact", s ? big(s.saved) : "-", s ? `${Math.round(s.saved_share * 100)}% of ${big(s.auto_compact)} (input-token equivalents, estimated)${s.summaries ? `, the model's summaries (${big(s.summaries)}) paid` : ""}; mean context ${tokens(s.mean_context)}, not ${tokens(s.mean_context_auto)}${s.saved < 0 ? (data.payback && data.payback.warning.length ? ". Swaps cost more than they saved: see the warning above" : `. ${lossWhy(s, null)}`) : ""}` : "too few model calls to say")),
    el("section", { class: "card" }, el("h2", { text: "Context at every model call" }), chart(data), legend(data)),
    scratchpad(data.scratchpad),
    bands,
    el("section", { class: "card" }, el("h2", { text: "Moves" }), movesTable(data.moves)),
    el("section", { class: "card" }, el("h2", { text: "Transcript" }), contextNote(data), transcript(data, target)),
  );
  loadBands(id, bands);
  if (target) focus(target);
  live(id, async () => {
    const keep = window.scrollY;
    const bottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
    await threadPage(id, null, view.lo);
    window.scrollTo(0, bottom ? document.body.scrollHeight : keep);
  }, data.stamp);
}

function moneyWarning(data) {
  const said = data.payback && data.payback.warning;
  if (!said || !said.length) return null;
  return el("section", { class: "card warning", id: "money" }, el("h2", { text: "Swaps cost more than they save here" }),
    said.map((line) => el("p", { text: line })));
}

function scratchpad(pad) {
  // The thread's scratchpad: what every swap's preamble starts with (docs/memory.md).
  if (!pad) return null;
  const who = pad.by === "model" ? "the model" : "the person";
  return el("section", { class: "card", id: "scratchpad" }, el("h2", { text: "Scratchpad" }),
    el("p", { class: "quiet", text: `${pad.chars} characters, last written by ${who} at ${when(pad.time)}; the head of every swap's preamble` }),
    el("pre", { class: "scratchpad", text: pad.text }));
}

function card(label, value, note) {
  return el("div", { class: "card stat" }, el("div", { class: "label", text: label }), el("div", { class: "value", text: value }), el("div", { class: "quiet", text: note || "" }));
}

function showsCeiling(data) {
  // The CLI's compaction point is on the scale when the context came within a third of it;
  // a thread far below it is drawn at its own size, and the legend names the point.
  return Math.max(0, ...data.points.map((p) => p.used)) * 1.5 >= data.ceiling;
}

function legend(data) {
  return el("p", { class: "legend" },
    el("span", { class: "key swap" }), "swap ", el("span", { class: "key clear" }), "/clear ",
    el("span", { class: "key undo" }), "/undo ", el("span", { class: "key mark" }), "mark ",
    el("span", { class: "key ceiling" }), showsCeiling(data) ? "the CLI's auto-compact"
      : `the CLI's auto-compact, at ${tokens(data.ceiling)}: far above this thread`);
}

function chart(data) {
  const W = 960, H = 280, L = 56, R = 16, T = 16, B = 34;
  const pts = data.points;
  if (!pts.length) return el("p", { class: "quiet", text: "No model call recorded yet." });
  // A move since the last model call (/undo, a swap) set the context now: drawn one step on,
  // so the line ends where "Context now" says.
  const now = data.context_now.moved ? data.context_now.used : null;
  const n = pts.length + (now !== null ? 1 : 0);
  const peak = Math.max(...pts.map((p) => p.used));
  const ceilingShown = showsCeiling(data);
  const most = ceilingShown ? Math.max(data.ceiling, peak) : peak;
  const step = niceStep(most / 4);
  const top = Math.ceil((most * 1.04) / step) * step;
  const x = (i) => L + (n === 1 ? (W - L - R) / 2 : (i * (W - L - R)) / (n - 1));
  const y = (v) => T + (H - T - B) * (1 - v / top);
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", id: "chart", role: "img", "aria-label": "Context size at every model call" });
  for (let v = 0; v <= top; v += step) {
    root.append(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }),
      svg("text", { x: L - 6, y: y(v) + 4, class: "axis", "text-anchor": "end" }, tokens(v)));
  }
  if (ceilingShown) {
    root.append(svg("line", { x1: L, x2: W - R, y1: y(data.ceiling), y2: y(data.ceiling), class: "ceiling" },
      svg("title", {}, `the CLI compacts on its own at ${tokens(data.ceiling)}`)));
    root.append(svg("text", { x: W - R, y: y(data.ceiling) - 5, class: "axis", "text-anchor": "end" }, `auto-compact ${tokens(data.ceiling)}`));
  }
  const ticks = Math.min(n, 8);
  for (let k = 0; k < ticks; k++) {
    const i = Math.round((k * (n - 1)) / Math.max(ticks - 1, 1));
    const anchor = n > 1 && i === n - 1 ? "end" : n > 1 && i === 0 ? "start" : "middle";
    root.append(svg("text", { x: x(i), y: H - B + 16, class: "axis", "text-anchor": anchor }, i < pts.length ? `call ${i + 1}` : "now"));
  }
  const between = (at) => at <= 0 ? x(0) : at >= n ? x(n - 1) : (x(at - 1) + x(at)) / 2;
  // Moves at the same call (a /clear, then an /undo) are drawn side by side, none under another.
  const committed = data.moves.filter((m) => m.outcome === "committed");
  const atCall = new Map();
  for (const m of committed) atCall.set(m.at, (atCall.get(m.at) || 0) + 1);
  const drawn = new Map();
  for (const m of committed) {
    const cls = MOVE_CLASS(m);
    const k = drawn.get(m.at) || 0;
    drawn.set(m.at, k + 1);
    const gx = between(m.at) + (k - (atCall.get(m.at) - 1) / 2) * 6;
    root.append(svg("line", { x1: gx, x2: gx, y1: T, y2: H - B, class: `move ${cls}`, "data-at": m.at, "data-move": m.move },
      svg("title", {}, `${m.text}${m.turn ? ` (after turn ${m.turn})` : ""}`)));
  }
  for (const mark of data.marks) {
    const gx = between(mark.at);
    root.append(svg("line", { x1: gx, x2: gx, y1: T, y2: H - B, class: "mark", "data-at": mark.at },
      svg("title", {}, `mark ${mark.name}`)),
    svg("text", { x: gx + 3, y: T + 10, class: "mark-label" }, mark.name));
  }
  root.append(svg("polyline", { points: pts.map((p, i) => `${x(i).toFixed(1)},${y(p.used).toFixed(1)}`).join(" "), class: "line" }));
  if (n <= 400) {
    pts.forEach((p, i) => root.append(svg("circle", { cx: x(i), cy: y(p.used), r: 2.5, class: "dot" },
      svg("title", {}, `call ${i + 1}${p.turn ? `, turn ${p.turn}` : ""}: ${tokens(p.used)} tokens, ${when(p.time)}`))));
  }
  if (now !== null) {
    const last = pts.length - 1;
    root.append(svg("polyline", { points: `${x(last).toFixed(1)},${y(pts[last].used).toFixed(1)} ${x(n - 1).toFixed(1)},${y(now).toFixed(1)}`, class: "line now" }),
      svg("circle", { cx: x(n - 1), cy: y(now), r: 3.5, class: "dot now", id: "now", "data-used": now },
        svg("title", {}, `now: ${tokens(now)} tokens, as the last move left it (no model call since)`)));
  }
  return root;
}

function niceStep(raw) { // 1, 2 or 5 times a power of ten: round numbers on the axis
  const power = 10 ** Math.floor(Math.log10(Math.max(raw, 1)));
  return [1, 2, 5, 10].map((k) => k * power).find((s) => s >= raw);
}

function movesTable(list) {
  if (!list.length) return el("p", { class: "quiet", text: "No move yet." });
  // The model's summary of each swap's cycle (swap.summaries), as `liminal swaps` has it: only
  // where one was priced, so a thread without summaries keeps the table's width.
  const summaries = list.some((m) => m.summary);
  const heads = ["When", "Move", "Tokens", "Rebuild", ...(summaries ? ["Summary"] : []), "Saves", "Payback", "Took", "Why"];
  return el("table", { class: "moves", id: "moves" },
    el("thead", {}, el("tr", {}, heads.map((h) => el("th", { text: h, title: h === "Summary" ? "What the model's summary of the turns this swap consolidated cost (its side session), as the policy priced it" : null })))),
    el("tbody", {}, list.map((m) => el("tr", { class: m.outcome === "committed" ? MOVE_CLASS(m) : "failed" },
      el("td", { text: when(m.time) }),
      el("td", {}, `${m.move} `, el("span", { class: "quiet", text: m.outcome })),
      el("td", { class: "num", text: m.tokens_before !== null ? `${tokens(m.tokens_before)} → ${m.tokens_after !== null ? tokens(m.tokens_after) : "?"}` : "-" }),
      el("td", { class: "num", text: typeof m.rebuild === "number" ? tokens(m.rebuild) : "-" }),
      summaries ? el("td", { class: "num summary", text: m.summary ? tokens(m.summary) : "-" }) : null,
      el("td", { class: "num", text: typeof m.saves_per_call === "number" ? `${tokens(m.saves_per_call)}/call` : "-" }),
      el("td", { class: "num", text: m.idle ? "now" : typeof m.payback_calls === "number" ? `${Math.round(m.payback_calls)} calls` : "-" }),
      el("td", { class: "num", text: typeof m.duration_s === "number" ? `${m.duration_s.toFixed(2)} s` : "-" }),
      el("td", { class: "why", text: m.why || "" })))));
}

const BAND_NAMES = [["recent", "kept whole"], ["middle", "long tool output cut to recall markers"], ["old", "as messages only"], ["ancient", "as one summary"]];

async function loadBands(id, box) {
  try {
    const b = await api(`thread/${encodeURIComponent(id)}/bands`);
    const head = el("h2", { text: "What a swap would make now" });
    if (!b.bands) return box.replaceChildren(head, el("p", { class: "quiet", text: `No bands: ${b.why}.` }));
    const rows = BAND_NAMES.map(([k, how]) => [k, b.bands[k] || { turns: 0, tokens: 0 }, how]);
    const total = Math.max(1, rows.reduce((a, [, v]) => a + v.tokens, 0) + (b.preamble || 0));
    box.replaceChildren(head,
      el("div", { class: "bar" },
        b.preamble ? el("span", { class: "band preamble", style: null, title: `the preamble: up to ${tokens(b.preamble)} tokens of summary`, "data-w": b.preamble / total }) : null,
        rows.filter(([, v]) => v.tokens).map(([k, v]) => el("span", { class: `band ${k}`, title: `${k}: ${v.turns} turns, ${tokens(v.tokens)} tokens`, "data-w": v.tokens / total }))),
      el("table", { class: "bands", id: "band-table" }, el("tbody", {},
        el("tr", {}, el("td", {}, el("span", { class: "key preamble" }), "preamble"), el("td", { class: "num", text: `≤ ${tokens(b.preamble)}` }), el("td", { text: "the summary a swap writes of what it does not keep" })),
        rows.map(([k, v, how]) => el("tr", { "data-band": k }, el("td", {}, el("span", { class: `key ${k}` }), k),
          el("td", { class: "num", text: `${v.turns} turn${v.turns === 1 ? "" : "s"}, ${tokens(v.tokens)}` }), el("td", { text: how }))),
        el("tr", {}, el("td", { text: "dynamic zone" }), el("td", { class: "num", text: "-" }), el("td", { class: "quiet", text: "none: liminal keeps no dynamic zone yet" })))));
    for (const span of box.querySelectorAll(".band")) span.style.flexGrow = span.dataset.w;
  } catch (err) {
    box.replaceChildren(el("h2", { text: "What a swap would make now" }), el("p", { class: "quiet", text: String(err.message || err) }));
  }
}

const SEEN = {
  context: ["in context", "The model sees this turn now (long tool output may be cut: see the markers)"],
  summarised: ["summarised", "The model no longer sees this turn: only the preamble a swap wrote of it"],
  cleared: ["not in context", "The model no longer sees this turn: /clear took it out"],
  undone: ["undone", "The model no longer sees this turn: /undo took it out"],
  unknown: ["", ""],
};

function contextNote(data) {
  if (data.context_file) return el("p", { class: "quiet", text: "Turns the model no longer sees are greyed; tool output cut from its context carries its recall key." });
  return el("p", { class: "quiet", text: "The thread's session file is not on this machine: what the model sees now cannot be marked." });
}

function transcript(data, target) {
  // The server sends a window of the turns (the last 60, or those around a search's find);
  // the buttons ask for more on either side.
  const t = data.transcript;
  let lo = t.lo, hi = t.hi;
  const count = t.count;
  const box = el("div", { id: "transcript" });
  const more = async (from, to, before) => {
    const got = await api(`thread/${encodeURIComponent(view.id)}/turns?lo=${from}&hi=${to}`);
    const nodes = got.turns.map(turnView);
    if (before) { lo = got.lo; box.querySelector(".turns").prepend(...nodes); }
    else { hi = got.hi; box.querySelector(".turns").append(...nodes); }
    buttons();
  };
  const earlier = el("button", { class: "more", id: "earlier", onclick: () => more(Math.max(0, lo - WINDOW * 2), lo, true) });
  const later = el("button", { class: "more", id: "later", onclick: () => more(hi, Math.min(count, hi + WINDOW * 2), false) });
  const buttons = () => {
    view.lo = lo;
    earlier.textContent = `Show earlier turns (${lo} more)`;
    earlier.hidden = lo <= 0;
    later.textContent = `Show later turns (${count - hi} more)`;
    later.hidden = hi >= count;
  };
  box.append(earlier, el("div", { class: "turns" }, t.turns.map(turnView)), later);
  buttons();
  box.latest = async () => { // the last turns, in place of those on show if they are not
    if (hi < count) {
      const got = await api(`thread/${encodeURIComponent(view.id)}/turns?lo=${Math.max(0, count - WINDOW)}&hi=${count}`);
      box.querySelector(".turns").replaceChildren(...got.turns.map(turnView));
      lo = got.lo; hi = got.hi;
      buttons();
    }
    const last = box.querySelector(".turns article:last-child");
    if (last) last.scrollIntoView({ block: "start" });
  };
  if (!count) box.append(el("p", { class: "quiet", text: "Nothing said yet." }));
  return box;
}

function toLatest() {
  const box = document.getElementById("transcript");
  if (box && box.latest) box.latest().catch(failed);
}

function turnView(turn) {
  const [label, why] = SEEN[turn.seen] || ["", ""];
  const gone = turn.seen && turn.seen !== "context" && turn.seen !== "unknown";
  return el("article", { class: `turn${gone ? " gone" : ""}`, "data-turn": turn.n ?? "", "data-seen": turn.seen || "" },
    el("div", { class: "turn-head" },
      el("span", { text: turn.n ? `turn ${turn.n}` : turn.liminal ? "to liminal" : "before liminal" }), el("span", { class: "quiet", text: when(turn.time) }),
      turn.context ? el("span", { class: "quiet", text: `context ${tokens(turn.context)}` }) : null,
      label ? el("span", { class: `seen ${turn.seen}`, title: why, text: label }) : null),
    turn.messages.map(messageView));
}

function messageView(m) {
  const attrs = { class: `msg ${m.kind}`, id: `m-${m.id}`, "data-id": m.id };
  // A command liminal answered itself (/mark A): between the turns, never the model's.
  if (m.to_liminal) attrs.class += " to-liminal";
  if (m.kind === "user") return el("div", attrs, el("div", { class: "who", text: m.to_liminal ? "you, to liminal" : "you" }), el("div", { class: "text", text: m.text }));
  if (m.kind === "agent" && m.to_liminal) return el("div", attrs, el("div", { class: "who", text: "liminal" }), el("div", { class: "text", text: m.text }));
  if (m.kind === "agent") return el("div", attrs, el("div", { class: "text", text: m.text }));
  if (m.kind === "thought") return el("div", attrs, el("div", { class: "text", text: m.text }));
  if (m.kind === "plan") return el("div", attrs, el("ul", {}, m.entries.map((e) => el("li", { class: e.status || "", text: e.content }))));
  if (m.kind === "swap") return el("div", attrs, el("span", { class: "liminal", text: `liminal: ${m.text}` }));
  if (m.kind === "mark") return el("div", attrs, el("span", { class: "mark-note", text: `mark ${m.text} set here` }));
  if (m.kind === "tool_call") {
    const out = el("pre", { class: "output", text: m.output });
    const node = el("div", attrs, el("div", { class: "tool-title" }, `▸ ${m.title}`, m.status && m.status !== "completed" ? el("span", { class: "quiet", text: ` (${m.status})` }) : ""), out);
    if (m.more) {
      const button = el("button", { class: "link more-output" }, "show all output");
      node.showAll = async () => {
        button.disabled = true;
        const full = await api(`thread/${encodeURIComponent(view.id)}/message?id=${encodeURIComponent(m.id)}`);
        out.textContent = full.output;
        button.remove();
      };
      button.addEventListener("click", () => node.showAll());
      node.append(button);
    }
    for (const key of m.keys || []) node.append(recallView(key));
    return node;
  }
  return el("div", attrs, el("span", { class: "quiet", text: m.text || `[${m.kind}]` }));
}

function recallView(key) {
  const box = el("div", { class: "cut", "data-key": key },
    el("span", { text: "Cut from the model's context; recall key " }), el("code", { text: key }), " ");
  box.append(el("button", { class: "link recall", onclick: async (e) => {
    e.target.disabled = true;
    try {
      const found = await api(`recall?key=${encodeURIComponent(key)}`);
      box.append(el("pre", { class: "recalled", text: found.text }));
      e.target.remove();
    } catch (err) { box.append(el("p", { class: "bad", text: String(err.message || err) })); }
  } }, "open the original"));
  return box;
}

async function focus(target) {
  const node = target.msg ? document.getElementById(`m-${target.msg}`) : document.querySelector(`[data-turn="${target.turn}"]`);
  if (!node) return;
  node.classList.add("focus");
  node.scrollIntoView({ block: "center" });
  if (!target.q) return;
  // A search's find: the words may be past the output's head; show it all, and mark them.
  if (node.showAll) await node.showAll().catch(() => null);
  const words = target.q.toLowerCase().split(/\s+/).filter(Boolean);
  let found = null;
  for (const box of node.querySelectorAll(".text, .output")) {
    found = markIn(box, words);
    if (found) break;
  }
  const snippet = finds.get(target.msg);
  if (!found && snippet) {
    // The words are in the CLI's own record of the call, which the client was not shown (an
    // adapter that sends no output): what search found there.
    const box = el("pre", { class: "output", text: snippet });
    node.append(el("div", { class: "record-find" }, "Found in the CLI's own record of this call:", box));
    found = markIn(box, words);
  }
  if (found) found.scrollIntoView({ block: "center" });
}

function markIn(box, words) { // the first of the words in the box's text, marked
  const text = box.textContent;
  const at = Math.min(...words.map((w) => text.toLowerCase().indexOf(w)).filter((i) => i >= 0));
  if (!Number.isFinite(at)) return null;
  const word = words.find((w) => text.toLowerCase().indexOf(w) === at);
  const mark = el("mark", { text: text.slice(at, at + word.length) });
  box.replaceChildren(text.slice(0, at), mark, text.slice(at + word.length));
  return mark;
}

// -- search ----------------------------------------------------------------------------------

async function searchPage(query) {
  document.getElementById("search-box").value = query;
  clearInterval(poller); // a search's finds are of the moment: no live updates here
  document.getElementById("live").className = "";
  if (!query.trim()) return show(el("section", {}, el("h1", { text: "Search" }), el("p", { class: "quiet", text: "Type words in the box above: every thread and the memos are searched." })));
  const found = await pageData(`search?q=${encodeURIComponent(query)}`);
  finds.clear();
  for (const h of found.hits) if (h.message_id) finds.set(h.message_id, h.snippet);
  show(el("section", {}, el("h1", {}, "Search: ", el("q", { text: query })),
    el("ol", { class: "hits", id: "hits" }, found.hits.map((h) => el("li", {},
      el("a", { href: `#/thread/${encodeURIComponent(h.thread_id)}` + (h.message_id ? `/msg/${encodeURIComponent(h.message_id)}/${encodeURIComponent(query)}` : h.turn ? `/turn/${h.turn}` : ""), class: "hit" },
        el("span", { class: "where", text: `${h.title || (h.thread_id || "?").slice(0, 8)} · ${h.turn ? `turn ${h.turn}` : "before liminal"} · ${h.who}` }),
        el("span", { class: "quiet", text: ` ${when(h.time)}` })),
      el("div", { class: "snippet", text: h.snippet })))),
    found.hits.length ? null : el("p", { class: "quiet", text: "No match in the conversations." }),
    el("h2", { text: "Memos" }),
    found.memos.length ? el("ul", { class: "memos", id: "memos" }, found.memos.map((m) => el("li", {}, m.text,
      m.tags.map((t) => el("span", { class: "tag", text: `#${t}` })), el("span", { class: "quiet", text: ` ${when(m.time)}` }),
      m.thread_id ? el("a", { href: `#/thread/${encodeURIComponent(m.thread_id)}`, text: " (its thread)" }) : null)))
      : el("p", { class: "quiet", text: "No memo holds these words." })));
}

// -- routing ---------------------------------------------------------------------------------

const listState = { archived: false, filter: "", sort: "last_activity", ascending: false };

function route() {
  const hash = location.hash || "#/";
  if (hash.startsWith("#token=")) {
    setToken(decodeURIComponent(hash.slice(7)));
    history.replaceState(null, "", location.pathname + "#/"); // the token leaves the address bar
    return route();
  }
  if (!token) return askToken("");
  visits++;
  clearInterval(poller); // the page left polls no more, and a poll under way reloads nothing
  polling++;
  const parts = hash.slice(2).split("/").map(decodeURIComponent);
  window.scrollTo(0, 0);
  if (parts[0] === "thread" && parts[1]) {
    const target = parts[2] === "msg" ? { msg: parts[3], q: parts.slice(4).join("/") } : parts[2] === "turn" ? { turn: Number(parts[3]) } : null;
    view = { kind: "thread", id: parts[1] };
    return threadPage(parts[1], target).catch(failed);
  }
  if (parts[0] === "search") {
    view = { kind: "search" };
    return searchPage(parts.slice(1).join("/")).catch(failed);
  }
  view = { kind: "threads" };
  return threadsPage(listState).catch(failed);
}

window.addEventListener("hashchange", route);
document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("search-form").addEventListener("submit", (e) => {
    e.preventDefault();
    location.hash = `#/search/${encodeURIComponent(document.getElementById("search-box").value)}`;
  });
  route();
});
