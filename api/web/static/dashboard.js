// The dashboard's one script: no build step, no library. Every datum comes from the API with
// the token the user entered (kept in sessionStorage, sent as a Bearer header, never in a URL).
// Live updates read the watch streams with fetch, since EventSource cannot send a header.
"use strict";

const TOKEN_KEY = "sluice.token";
const STALE_AFTER_MS = 20000; // the server sends a keep-alive every 15 s on an idle stream
const page = document.body.dataset.page;
const subject = document.body.dataset.subject;
let caller = null; // {name, role, queues} once /dashboard/whoami answers

// ---- small DOM helpers: text goes in as text, never as HTML --------------------------------
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}
const $ = (selector) => document.querySelector(selector);
function fill(target, ...children) {
  target.replaceChildren(...children.flat(Infinity).filter((child) => child !== null && child !== undefined));
}
// An explanation as the page shows it: the state in one line, its reasons, what would let it run
// (each proven by re-running the tick), and what was tried and not proven or not enough.
function explanationNodes(why, headline) {
  const list = (title, lines) => lines.length
    ? [el("p", {}, el("strong", {}, title)), el("ul", {}, lines.map((line) => el("li", {}, line)))]
    : [];
  return [
    el("p", {}, headline ? el("strong", {}, why.message) : why.message),
    el("ul", {}, why.items.map((item) => el("li", {}, item.message))),
    list("What would let it run:", why.suggestions.map((suggestion) => suggestion.message)),
    list("Not proven in time:", (why.unproven || []).map((suggestion) => suggestion.message)),
    list("Tried, and not a fix:", why.ruled_out || []),
  ];
}
function showError(message) {
  const box = $("#error");
  box.textContent = message || "";
  box.hidden = !message;
}

// ---- the token and the API -----------------------------------------------------------------
function token() { return sessionStorage.getItem(TOKEN_KEY); }
function headers(extra) {
  const all = { Accept: "application/json", ...(extra || {}) };
  if (token()) all.Authorization = `Bearer ${token()}`;
  return all;
}

class ApiError extends Error {
  constructor(status, body) {
    super(body && body.message ? `${body.code}: ${body.message}` : `HTTP ${status}`);
    this.status = status;
    this.code = body && body.code;
  }
}

async function api(path, options) {
  const init = { ...(options || {}) };
  init.headers = headers(init.body ? { "Content-Type": "application/json" } : {});
  const response = await fetch(path, init);
  const body = response.status === 204 ? null : await response.json().catch(() => null);
  if (response.status === 401) askForToken(body && body.message);
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}

function askForToken(message) {
  $("#sign-in").hidden = false;
  $("#sign-in-error").textContent = message || "";
  $("#token").focus();
}

$("#sign-in").addEventListener("submit", (event) => {
  event.preventDefault();
  const value = $("#token").value.trim();
  if (!value) return;
  sessionStorage.setItem(TOKEN_KEY, value);
  location.reload();
});
$("#sign-out").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  location.reload();
});

// ---- the live stream -------------------------------------------------------------------------
function setLive(state, text) {
  const badge = $("#live");
  badge.dataset.state = state;
  badge.textContent = text;
}

// Reads a watch stream and calls onEvent(name, data) per event; reconnects when it drops, and
// says "stale" while it is down or silent past STALE_AFTER_MS.
function watch(path, onEvent) {
  let delay = 1000;
  async function connect() {
    const control = new AbortController();
    let heard = Date.now();
    const watchdog = setInterval(() => {
      if (Date.now() - heard > STALE_AFTER_MS) control.abort();
    }, 1000);
    try {
      const response = await fetch(path, { headers: headers(), signal: control.signal });
      if (response.status === 401) {
        askForToken((await response.json().catch(() => ({}))).message);
        setLive("stale", "no token");
        return; // reconnecting without a token cannot help
      }
      if (!response.ok) throw new ApiError(response.status, await response.json().catch(() => null));
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let pending = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        heard = Date.now();
        pending += value;
        let end;
        while ((end = pending.indexOf("\n\n")) >= 0) {
          const block = pending.slice(0, end);
          pending = pending.slice(end + 2);
          let name = "message";
          const lines = [];
          for (const line of block.split("\n")) {
            if (line.startsWith("event:")) name = line.slice(6).trim();
            else if (line.startsWith("data:")) lines.push(line.slice(5).trimStart());
          }
          if (!lines.length) continue; // a keep-alive comment
          delay = 1000;
          setLive("live", "live");
          onEvent(name, JSON.parse(lines.join("\n")));
        }
      }
    } catch (error) {
      if (error instanceof ApiError) showError(error.message);
    } finally {
      clearInterval(watchdog);
    }
    setLive("stale", "stale: reconnecting");
    setTimeout(connect, delay);
    delay = Math.min(delay * 2, 5000);
  }
  connect();
}

// ---- numbers ---------------------------------------------------------------------------------
const SUFFIXES = {
  m: 1e-3, k: 1e3, K: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
  Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60,
};
// A Kubernetes quantity as the API spells it ("512", "500m", "4Ti"), only to size a bar: the
// numbers shown are the API's own text.
function amount(text) {
  const match = /^([0-9.]+)([A-Za-z]*)$/.exec(String(text));
  if (!match) return 0;
  return Number(match[1]) * (SUFFIXES[match[2]] || 1);
}

function capRows(queue) {
  const rows = [];
  for (const [resource, cap] of Object.entries(queue.max_resources)) {
    const used = queue.in_flight_resources[resource] || "0";
    rows.push({ label: resource, used, cap, share: ratio(amount(used), amount(cap)) });
  }
  const charges = queue.accelerator_charges;
  if (queue.max_gpus !== null) {
    const used = charges.gpu || 0;
    rows.push({ label: "gpu (untyped)", used, cap: queue.max_gpus, share: ratio(used, queue.max_gpus) });
  }
  for (const [device, cap] of Object.entries(queue.max_accelerators)) {
    const used = charges[device] || 0;
    rows.push({ label: device, used, cap, share: ratio(used, cap) });
  }
  return rows;
}
function ratio(used, cap) { return cap > 0 ? used / cap : (used > 0 ? 1 : 0); }

function bar(row) {
  const percent = Math.round(100 * row.share);
  const level = row.share > 1 ? "over" : row.share >= 0.9 ? "high" : "ok";
  return el("div", { class: row.label ? "cap" : "cap compact", "data-resource": row.label || null },
    row.label ? el("span", { class: "cap-label", title: row.label }, shortDevice(row.label)) : null,
    el("span", { class: "bar", title: `${percent}%` },
      el("span", { class: `fill ${level}`, style: `width:${Math.min(100, percent)}%` })),
    el("span", { class: "cap-numbers" }, `${row.used} / ${row.cap}`));
}

// `nvidia_gpu/nvidia-h100` -> `nvidia-h100` for a narrow column (the full name is its title).
function shortDevice(name) { return name.includes("/") ? name.split("/").slice(1).join("/") : name; }

function limit(used, cap) { return cap === null ? `${used}` : `${used} / ${cap}`; }

function duration(seconds) {
  seconds = Math.max(0, Math.round(seconds));
  const h = Math.floor(seconds / 3600), m = Math.floor((seconds % 3600) / 60), s = seconds % 60;
  return h ? `${h}h${String(m).padStart(2, "0")}m` : m ? `${m}m${String(s).padStart(2, "0")}s` : `${s}s`;
}
function blockedFor(queue) {
  const now = queue.as_of ? Date.parse(queue.as_of) : Date.now();
  return duration((now - Date.parse(queue.head_blocked_since)) / 1000);
}
function clock(text) { return text ? new Date(text).toLocaleTimeString() : "–"; }

function blockedBadge(queue) {
  if (!queue.head_blocked) return null;
  const behind = queue.blocked_behind_head;
  return el("span", { class: "badge blocked", title: `head: ${queue.head_action || "?"}` },
    `BLOCKED ${blockedFor(queue)} · ${behind} behind`);
}

function queueLink(name) { return el("a", { href: `/ui/queues/${encodeURIComponent(name)}` }, name); }
function actionLink(id) { return el("a", { href: `/ui/actions/${encodeURIComponent(id)}` }, id); }
function where(placement) {
  if (!placement) return "–";
  return placement.containers
    .map((spot) => `${spot.name}: ${placement.cluster} / ${spot.node_pool} / ${spot.node}`)
    .join("; ");
}

// ---- pages -------------------------------------------------------------------------------------
const pages = {};

pages.fleet = function () {
  let queues = [];
  const poolFilter = $("#pool-filter"), sort = $("#sort");
  const usage = (queue) => Math.max(0, ...capRows(queue).map((row) => row.share));
  const order = {
    name: (a, b) => a.name.localeCompare(b.name),
    pool: (a, b) => a.pool.localeCompare(b.pool) || a.name.localeCompare(b.name),
    waiting: (a, b) => b.waiting - a.waiting || a.name.localeCompare(b.name),
    usage: (a, b) => usage(b) - usage(a) || a.name.localeCompare(b.name),
  };
  function render() {
    const pools = [...new Set(queues.map((queue) => queue.pool))].sort();
    const chosen = poolFilter.value;
    fill(poolFilter, el("option", { value: "" }, "all pools"),
      pools.map((pool) => el("option", { value: pool, selected: pool === chosen }, pool)));
    const shown = queues.filter((queue) => !chosen || queue.pool === chosen).sort(order[sort.value]);
    fill($("#fleet tbody"), shown.map((queue) => {
      const caps = capRows(queue);
      return el("tr", { "data-queue": queue.name, class: queue.head_blocked ? "is-blocked" : null },
        el("td", {}, queueLink(queue.name)),
        el("td", {}, queue.pool),
        el("td", {}, el("code", {}, queue.scheduling)),
        el("td", { class: "caps" }, caps.length ? caps.map(bar) : el("span", { class: "muted" }, "no caps")),
        el("td", { class: "num" }, limit(queue.running_actions, queue.action_concurrency)),
        el("td", { class: "num" }, queue.waiting),
        el("td", { class: "num" }, limit(queue.depth_used, queue.depth)),
        el("td", {}, blockedBadge(queue),
          queue.draining ? el("span", { class: "badge draining" }, "DRAINING") : null));
    }));
    const asOf = queues.find((queue) => queue.as_of);
    $("#as-of").textContent = asOf ? `usage as of the tick at ${clock(asOf.as_of)}` : "";
    $("#fleet").dataset.asOf = asOf ? asOf.as_of : "";
  }
  poolFilter.addEventListener("change", render);
  sort.addEventListener("change", render);
  watch("/watch/queues", (name, data) => {
    if (name === "queues") { queues = data; render(); }
  });
};

pages.queue = function () {
  const name = subject;
  let current = null;
  function render(queue) {
    current = queue;
    fill($("#settings"),
      fact("pool", queue.pool), fact("policy", el("code", {}, queue.scheduling)),
      fact("priority", queue.priority), fact("state", queue.draining ? "draining" : "accepting"),
      fact("clusters", queue.clusters ? queue.clusters.join(", ") : "all"),
      fact("actions running", limit(queue.running_actions, queue.action_concurrency)),
      fact("runs active", limit(queue.active_runs, queue.run_concurrency)),
      fact("depth", limit(queue.depth_used, queue.depth)), fact("waiting", queue.waiting));
    const caps = capRows(queue);
    fill($("#caps tbody"), caps.length
      ? caps.map((row) => el("tr", {}, el("td", {}, bar(row))))
      : el("tr", {}, el("td", { class: "muted" }, "no caps")));
    const banner = $("#banner");
    banner.hidden = !queue.head_blocked;
    if (queue.head_blocked) {
      fill(banner.querySelector(".summary"),
        el("strong", {}, `HEAD OF LINE BLOCKED for ${blockedFor(queue)}`), ": ",
        queue.head_action ? actionLink(queue.head_action) : "the head", " does not fit yet; ",
        `${queue.blocked_behind_head} wait behind it.`);
      explainHead(queue.head_explanation);
    } else {
      fill(banner.querySelector(".why"));
    }
    renderAdmin(queue);
  }
  // The tick explains a blocked head once; the queue's stream and GET /queues/{name} carry
  // that explanation, so showing it costs no solve.
  function explainHead(why) {
    if (!why) { fill($("#banner .why")); return; }
    fill($("#banner .why"), explanationNodes(why, false));
  }
  async function refreshLists() {
    const q = encodeURIComponent(name);
    const [queued, scheduled, running] = await Promise.all([
      api(`/actions?queue=${q}&state=queued&limit=500`),
      api(`/actions?queue=${q}&state=scheduled&limit=500`),
      api(`/actions?queue=${q}&state=running&limit=500`),
    ]);
    fill($("#line tbody"), queued.length ? queued.map((action, index) => el("tr", { "data-action": action.id },
      el("td", { class: "num" }, index + 1),
      el("td", {}, actionLink(action.id)),
      el("td", {}, clock(action.submitted_at)),
      el("td", {}, action.waiting_reason ? el("code", {}, action.waiting_reason) : "not ticked yet"),
      el("td", {}, action.waiting_message || ""))) : emptyRow(5, "nobody waits"));
    const placed = [...running, ...scheduled];
    fill($("#running tbody"), placed.length ? placed.map((action) => el("tr", { "data-action": action.id },
      el("td", {}, actionLink(action.id)),
      el("td", {}, action.state),
      el("td", {}, clock(action.started_at || action.scheduled_at)),
      el("td", {}, where(action.placement)))) : emptyRow(4, "nothing runs"));
  }
  function renderAdmin(queue) {
    const admin = $("#admin");
    admin.hidden = !(caller && caller.role === "admin");
    if (admin.hidden) return;
    $("#drain").textContent = queue.draining ? "Undrain" : "Drain";
    $("#policy").value = queue.scheduling;
  }
  $("#drain").addEventListener("click", async () => {
    const verb = current.draining ? "undrain" : "drain";
    const effect = verb === "drain" ? "it accepts nothing new; what it holds still runs" : "it accepts submissions again";
    if (!(await confirmAction(`${verb} queue ${name}? ${effect}.`))) return;
    render(await api(`/queues/${encodeURIComponent(name)}/${verb}`, { method: "POST" }).catch(report));
  });
  $("#policy").addEventListener("change", async (event) => {
    const policy = event.target.value;
    if (!(await confirmAction(`Switch queue ${name} to ${policy}? It applies from the next tick.`))) {
      event.target.value = current.scheduling;
      return;
    }
    render(await api(`/queues/${encodeURIComponent(name)}`, {
      method: "PATCH", body: JSON.stringify({ scheduling: policy }),
    }).catch(report));
  });
  function report(error) { showError(error.message); return current; }
  watch(`/watch/queues/${encodeURIComponent(name)}`, (event, data) => {
    if (event === "error") { showError(`${data.code}: ${data.message}`); return; }
    render(data);
    refreshLists().catch((error) => showError(error.message));
  });
};

pages.action = function () {
  const id = subject;
  let explainedState = null;
  async function refresh() {
    const action = await api(`/actions/${encodeURIComponent(id)}`);
    fill($("#facts"), fact("state", el("span", { class: `state ${action.state}` }, action.state)),
      fact("queue", queueLink(action.queue)), fact("run", action.run),
      action.environment ? fact("environment", action.environment) : null,
      action.code ? fact("failure", `${action.code}: ${action.message || ""}`) : null,
      action.waiting_reason ? fact("waiting", `${action.waiting_reason}: ${action.waiting_message || ""}`) : null,
      action.estimate_assumption ? fact("estimated start", action.estimated_start
        ? `${new Date(action.estimated_start).toLocaleString()} (${action.estimate_assumption})`
        : action.estimate_assumption) : null);
    fill($("#phases tbody"), [["submitted", action.submitted_at], ["scheduled", action.scheduled_at],
      ["started", action.started_at], ["finished", action.finished_at]]
      .map(([phase, at]) => el("tr", { class: at ? null : "muted" }, el("td", {}, phase), el("td", {}, at ? new Date(at).toLocaleString() : "–"))));
    const spots = action.placement ? action.placement.containers : [];
    fill($("#containers tbody"), action.containers.length ? action.containers.map((container) => {
      const spot = spots.find((s) => s.name === container.name);
      const asks = Object.entries(container.resources).map(([r, q]) => `${r} ${q}`);
      if (container.gpu !== null) asks.push(`gpu ${container.gpu}`);
      return el("tr", {}, el("td", {}, container.name), el("td", {}, asks.join(", ")),
        el("td", {}, spot ? action.placement.cluster : "–"), el("td", {}, spot ? spot.node_pool : "–"),
        el("td", { class: "num" }, spot ? spot.node : "–"));
    }) : emptyRow(5, action.environment ? `runs in environment ${action.environment}` : "no containers"));
    if (explainedState !== action.state) {
      explainedState = action.state;
      explain();
    }
    return action;
  }
  async function explain() {
    const box = $("#explanation");
    try {
      const why = await api(`/actions/${encodeURIComponent(id)}/explanation`);
      fill(box, explanationNodes(why, true));
    } catch (error) {
      fill(box, el("p", { class: "muted" }, error.message));
    }
  }
  refresh().then((action) => {
    watch(`/watch/queues/${encodeURIComponent(action.queue)}`, () => refresh().catch((error) => showError(error.message)));
  }).catch((error) => showError(error.message));
};

pages.clusters = function () {
  async function refresh() {
    const pools = await api("/dashboard/allocation");
    fill($("#pools"), pools.map((pool) => {
      const used = pool.per_node.reduce((sum, node) => sum + node.accelerators_used, 0);
      const total = pool.accelerators_per_node * pool.max_nodes;
      return el("section", { class: "card pool", "data-pool": `${pool.cluster}/${pool.node_pool}` },
        el("h2", {}, `${pool.cluster} / ${pool.node_pool}`),
        el("p", { class: "muted" }, `${pool.nodes} nodes, up to ${pool.max_nodes} with scale-up; `,
          pool.accelerator ? `${pool.accelerators_per_node} × ${pool.accelerator} per node, ${used} of ${total} in use`
            : "no accelerators"),
        el("div", { class: "heat" }, pool.per_node.map((node) => {
          const share = pool.accelerators_per_node ? node.accelerators_used / pool.accelerators_per_node : 0;
          return el("div", {
            // A node past `nodes` holding nothing is one the ticks have not started.
            class: `cell${node.node >= pool.nodes && !node.actions.length ? " down" : ""}${share >= 0.6 ? " hot" : ""}`,
            style: `--used:${share.toFixed(2)}`,
            title: `node ${node.node}: ${node.accelerators_used} used` + (node.actions.length ? ` by ${node.actions.join(", ")}` : ""),
          }, el("span", { class: "node" }, `#${node.node}`),
            el("span", { class: "used" }, pool.accelerators_per_node ? `${node.accelerators_used}/${pool.accelerators_per_node}` : "–"));
        })));
    }));
  }
  watch("/watch/queues", () => refresh().catch((error) => showError(error.message)));
};

pages.shares = function () {
  const seen = new Map(); // preemptions seen while the page is open, by job and tick
  async function refresh() {
    const queues = await api("/job-queues");
    fill($("#job-queues"), queues.length ? queues.map((queue) => el("section", { class: "card" },
      el("h2", {}, queue.name, " ", el("span", { class: `badge ${queue.status === "VALID" ? "ok" : "blocked"}` }, queue.status)),
      el("p", { class: "muted" }, `${queue.state} · ${queue.scheduling_policy} on ${queue.service_environment} · capacity `,
        Object.entries(queue.max_capacity).map(([type, n]) => `${type} ${n}`).join(", ")),
      el("table", { class: "grid" },
        el("thead", {}, el("tr", {}, ["Share", "Strategy", "Limit type", "Used / own limit", "Lent", "Borrowed", "Queued", "Running"].map((h) => el("th", {}, h)))),
        el("tbody", {}, queue.shares.flatMap((share) => Object.entries(share.capacity_limits).map(([type, own]) => {
          const used = share.usage[type] || 0;
          return el("tr", { "data-share": share.name },
            el("td", {}, share.name), el("td", {}, el("code", {}, share.strategy)), el("td", {}, type),
            el("td", {}, bar({ label: "", used, cap: own, share: ratio(used, own) })),
            el("td", { class: "num" }, share.lent[type] || 0), el("td", { class: "num" }, share.borrowed[type] || 0),
            el("td", { class: "num" }, share.queued), el("td", { class: "num" }, share.scheduled + share.starting + share.running));
        })))))) : el("p", { class: "muted" }, "no job queues"));
    for (const queue of queues) {
      for (const job of queue.preempted) {
        const key = `${queue.as_of}/${job.job}`;
        if (!seen.has(key)) seen.set(key, { at: queue.as_of, ...job });
      }
    }
    const rows = [...seen.values()].sort((a, b) => Date.parse(b.at) - Date.parse(a.at)).slice(0, 50);
    fill($("#preemptions tbody"), rows.length ? rows.map((job) => el("tr", {},
      el("td", {}, clock(job.at)), el("td", {}, job.job_queue), el("td", {}, job.job),
      el("td", {}, job.share), el("td", {}, job.message))) : emptyRow(5, "none seen yet"));
  }
  watch("/watch/queues", () => refresh().catch((error) => showError(error.message)));
};

function fact(term, value) { return [el("dt", {}, term), el("dd", {}, value)]; }
function emptyRow(span, text) { return el("tr", {}, el("td", { colspan: span, class: "muted" }, text)); }

function confirmAction(text) {
  const dialog = $("#confirm");
  $("#confirm-text").textContent = text;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
  });
}

async function start() {
  try {
    caller = await api("/dashboard/whoami");
    $("#who").textContent = `${caller.name} · ${caller.role}`;
    $("#sign-out").hidden = !token();
  } catch (error) {
    if (error.status !== 401) showError(error.message);
    setLive("stale", "no token");
    return; // the sign-in form is showing
  }
  pages[page]();
}

start();
