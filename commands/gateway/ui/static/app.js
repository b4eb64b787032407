// Cairn's dashboard: reads /cairn/v1/*, follows the event stream, sends ordinary
// commands. Every value from the API goes into the page as text (never as HTML).
"use strict";

const state = { token: sessionStorage.getItem("cairn-token") || "", who: null, page: "overview", refresh: null };

// h builds an element: h("td", {class: "x"}, "text", child, …).
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function table(headers, rows, attrs) {
  return h("table", attrs || {}, h("thead", {}, h("tr", {}, headers.map(x => h("th", {}, x)))), h("tbody", {}, rows));
}

async function api(path, opts) {
  opts = opts || {};
  const headers = Object.assign({}, opts.headers || {});
  if (state.token) headers["Authorization"] = "Bearer " + state.token;
  const resp = await fetch(path, Object.assign({}, opts, { headers }));
  if (resp.status === 401) { showLogin("sign in with a token"); throw new Error("unauthenticated"); }
  const body = await resp.json().catch(() => ({}));
  if (!resp.ok) {
    const msg = (body.error && body.error.message) || resp.statusText;
    throw new Error(msg);
  }
  return body;
}

function showLogin(msg) {
  document.getElementById("login").hidden = false;
  document.getElementById("login-error").textContent = msg || "";
}

document.getElementById("login-form").addEventListener("submit", async ev => {
  ev.preventDefault();
  state.token = document.getElementById("token").value.trim();
  sessionStorage.setItem("cairn-token", state.token);
  try {
    await whoami();
    document.getElementById("login").hidden = true;
    followAll();
    render();
  } catch (e) {
    showLogin(e.message);
  }
});

async function whoami() {
  state.who = await api("/cairn/v1/whoami");
  const who = document.getElementById("who");
  who.textContent = state.who.authenticated ? `${state.who.name} (${state.who.role})` : "no sign-in (loopback)";
  who.dataset.role = state.who.role;
}

// mayCommand: command buttons only for a token that may send commands.
function mayCommand() { return state.who && (state.who.role === "operator" || state.who.role === "admin"); }

async function command(verb, body) {
  try {
    const r = await api("/cairn/v1/commands/" + verb, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    flash(`${verb}: ${r.ok ? "accepted" : "refused"}` + (r.warnings ? " — " + r.warnings.join("; ") : ""));
  } catch (e) {
    flash(`${verb} refused: ${e.message}`, true);
  }
  scheduleRefresh();
}

function flash(msg, bad) {
  const f = document.getElementById("flash");
  f.textContent = msg;
  f.className = bad ? "error" : "ok";
}

function age(ts) {
  if (!ts) return "";
  const s = Math.max(0, (Date.now() - Date.parse(ts)) / 1000);
  if (s < 120) return `${Math.round(s)} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  return `${Math.round(s / 3600)} h`;
}

function nodeFlags(n) {
  const flags = [];
  const props = (n.spec && n.spec.properties) || {};
  if (props.AutoplaceTarget === "false") flags.push("cordoned");
  if (n.spec && n.spec.maintenance) flags.push(n.spec.maintenance.toLowerCase());
  return flags;
}

// Pages.

async function overview(main) {
  const [health, nodes, domains, leader, res] = await Promise.all([
    api("/cairn/v1/health"), api("/cairn/v1/nodes"), api("/cairn/v1/domains"),
    api("/cairn/v1/leader").catch(() => null), api("/cairn/v1/resources?limit=1000")]);
  const hl = health.health || {};
  main.append(h("section", { class: "card", id: "health" }, h("h2", {}, "Cluster health"),
    h("p", {}, h("span", { class: hl.status === "ok" ? "ok" : "bad", id: "health-status" }, hl.status || "unknown"),
      hl.budget !== undefined ? ` — failure budget ${hl.budget_used}/${hl.budget}` : "",
      leader && leader.holder ? ` — side effects run by ${leader.holder}` : ""),
    (hl.reasons || []).length ? h("ul", {}, hl.reasons.map(r => h("li", {}, typeof r === "string" ? r : JSON.stringify(r)))) : null));

  const domainCards = (domains.domains || []).map(d => h("div", { class: "domain", "data-domain": d.label },
    h("div", {}, d.label), h("div", { class: "hosts" }, (d.hosts || []).length), h("div", {}, "hosts: " + (d.hosts || []).join(", "))));
  main.append(h("section", { class: "card" }, h("h2", {}, "Failure domains"),
    domains.failure_domains ? h("p", { id: "domain-verdict", class: domains.verdict === "balanced" ? "ok" : "warn" }, domains.verdict || "") : h("p", {}, "failure domains are off"),
    h("div", { class: "domains" }, domainCards)));

  const rows = (nodes.nodes || []).map(n => {
    const st = n.status || {};
    const actions = [];
    if (mayCommand()) {
      actions.push(h("button", { "data-action": "cordon", onclick: () => command("node.modify", { name: n.name, properties: { AutoplaceTarget: "false" } }) }, "Cordon"));
      actions.push(h("button", { "data-action": "evacuate", onclick: () => { if (confirm(`Evacuate ${n.name}?`)) command("node.evacuate", { name: n.name }); } }, "Evacuate"));
      actions.push(h("button", { "data-action": "restore", onclick: () => command("node.restore", { name: n.name }) }, "Restore"));
    }
    return h("tr", { "data-node": n.name }, h("td", {}, n.name), h("td", {}, n.spec.host), h("td", {}, n.spec.failure_domain || ""),
      h("td", { class: "state-" + st.state }, st.state || ""), h("td", {}, age(st.since)),
      h("td", {}, nodeFlags(n).map(f => h("span", { class: "flag" }, f))), h("td", {}, actions));
  });
  main.append(h("section", { class: "card" }, h("h2", {}, `Nodes (${rows.length})`),
    table(["Node", "Host", "Domain", "State", "For", "Flags", ""], rows, { id: "nodes" })));

  const names = (res.resources || []).map(r => r.name);
  main.append(h("section", { class: "card" }, h("h2", {}, `Resources (${names.length}${res.next ? "+" : ""})`),
    h("p", { id: "resource-names" }, names.slice(0, 200).join(", "))));
}

function replicaCell(rep) {
  const o = rep.observed || {};
  const disk = rep.diskless ? (rep.tiebreaker ? "tiebreaker" : "diskless") : ((o.volumes || []).map(v => v.disk_state).join(",") || "unknown");
  let sync = null;
  for (const p of o.peers || []) {
    for (const v of p.volumes || []) {
      if (v.out_of_sync_kib > 0) {
        const total = (rep.volume_size_kib || v.out_of_sync_kib) || 1;
        const done = Math.max(0, Math.min(100, 100 - 100 * v.out_of_sync_kib / total));
        const fill = h("span", {});
        fill.style.width = `${done}%`; // a property, not a style attribute: the page's CSP allows no inline styles
        const pace = v.sync_rate_kib_s ? `, ${v.sync_rate_kib_s} KiB/s, ${v.sync_eta_s} s left` : "";
        sync = h("span", { class: "sync" }, h("span", { class: "bar" }, fill), ` ${v.out_of_sync_kib} KiB to ${p.node}${pace}`);
      }
    }
  }
  const conns = (o.peers || []).map(p => `${p.node}:${p.connection}`).join(" ");
  return h("div", { "data-replica": rep.node }, h("b", {}, rep.node), " ", h("span", { class: disk }, disk), conns ? h("small", {}, " " + conns) : null, sync);
}

async function resources(main) {
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  const prefix = params.get("prefix") || "";
  const after = params.get("after") || "";
  const search = h("input", { id: "search", placeholder: "name starts with…", value: prefix });
  search.addEventListener("keydown", ev => { if (ev.key === "Enter") location.hash = "#/resources?prefix=" + encodeURIComponent(search.value); });
  const list = await api(`/cairn/v1/resources?limit=50&prefix=${encodeURIComponent(prefix)}&after=${encodeURIComponent(after)}`);
  const views = await Promise.all((list.resources || []).map(r => api("/cairn/v1/resources/" + encodeURIComponent(r.name)).catch(() => r)));
  const rows = views.map(rv => {
    const size = (rv.volumes || []).reduce((a, v) => a + v.size_kib, 0);
    for (const rep of rv.replicas || []) rep.volume_size_kib = size;
    const snap = mayCommand() ? h("button", { "data-action": "snapshot", onclick: () => {
      const name = prompt("Snapshot name", "snap-" + new Date().toISOString().slice(0, 19).replace(/[-:T]/g, ""));
      if (name) command("rd.snapshot", { resource: rv.name, name });
    } }, "Snapshot") : null;
    return h("tr", { "data-resource": rv.name }, h("td", {}, rv.name), h("td", {}, rv.resource_group || ""),
      h("td", {}, `${size} KiB`), h("td", { class: rv.degraded ? "bad" : "ok" }, `${rv.up_to_date || 0}/${rv.place_count || "?"}`),
      h("td", {}, (rv.replicas || []).map(replicaCell)), h("td", {}, (rv.snapshots || []).map(s => h("div", {}, `${s.name} (${s.phase})`))), h("td", {}, snap));
  });
  main.append(h("section", { class: "card" }, h("h2", {}, "Resources"), h("div", { class: "filters" }, search,
    list.next ? h("a", { href: `#/resources?prefix=${encodeURIComponent(prefix)}&after=${encodeURIComponent(list.next)}`, id: "next-page" }, "next page") : null),
    table(["Name", "Group", "Size", "UpToDate", "Replicas", "Snapshots", ""], rows, { id: "resources" })));
}

// countdown renders the time left until due as text and a bar filling over the
// period (span seconds) that ends at due; refreshed every second while shown.
function countdown(due, spanSeconds) {
  const text = h("span", { class: "countdown", "data-due": due });
  const fill = h("span", {});
  const bar = h("span", { class: "bar", title: "the period that ends at " + due }, fill);
  const tick = () => {
    const left = Math.max(0, (Date.parse(due) - Date.now()) / 1000);
    text.textContent = left <= 0 ? "due now" : left < 120 ? `in ${Math.ceil(left)} s` : left < 7200 ? `in ${Math.ceil(left / 60)} min` : `in ${(left / 3600).toFixed(1)} h`;
    const done = spanSeconds > 0 ? Math.max(0, Math.min(100, 100 - 100 * left / spanSeconds)) : 100;
    fill.style.width = `${done}%`;
    text.dataset.left = String(Math.round(left));
  };
  tick();
  const timer = setInterval(() => { if (!text.isConnected) clearInterval(timer); else tick(); }, 1000);
  return h("span", { class: "due" }, bar, " ", text);
}

function decisionRows(policy, ds) {
  return (ds || []).map(d => ({ policy, d }));
}

async function pools(main) {
  const [pools, sps] = await Promise.all([api("/cairn/v1/pools"), api("/cairn/v1/storage-pools")]);
  const details = await Promise.all((pools.pools || []).map(p => api("/cairn/v1/pools/" + encodeURIComponent(p.name)).catch(() => null)));
  const prow = (pools.pools || []).map(p => h("tr", { "data-pool": p.name }, h("td", {}, p.name), h("td", {}, p.owner || "—"),
    h("td", { class: p.contested ? "bad" : "ok" }, p.contested ? "contested: " + (p.contest_reason || "") : "ok"), h("td", {}, (p.nodes || []).join(", "))));
  main.append(h("section", { class: "card" }, h("h2", {}, "Shared pools"), table(["Pool", "Owner", "MMP", "Nodes"], prow, { id: "pools" })));
  (pools.pools || []).forEach((p, i) => {
    const d = details[i] || {};
    const latch = p.contested ? h("div", { class: "latch bad", "data-latch": p.name },
      h("b", {}, "Contested latch: "), `another host wrote ${p.name} while ${p.owner || "its owner"} held it`,
      p.foreign_hostid ? ` (foreign hostid ${p.foreign_hostid})` : "", p.contest_reason ? ` — ${p.contest_reason}` : "",
      ". No node is granted an import until the pool is exported (pool.export); the grant was event ",
      h("a", { href: "#/at?seq=" + p.grant_seq }, String(p.grant_seq || "")), p.granted_at ? ` (${age(p.granted_at)} ago)` : "", ".") : null;
    const obs = Object.values(d.observed || {}).sort((a, b) => a.node < b.node ? -1 : 1).map(o => h("tr", { "data-observed": o.node },
      h("td", {}, o.node), h("td", { class: o.phase === "failed" || o.phase === "contested" ? "bad" : "" }, o.phase || ""), h("td", {}, o.code || ""),
      h("td", {}, o.verdict ? JSON.stringify(o.verdict) : ""), h("td", {}, [o.foreign_host, o.foreign_hostid].filter(Boolean).join(" ")),
      h("td", {}, [o.forced ? "forced" : "", o.fenced ? "fenced" : ""].filter(Boolean).join(" ")), h("td", {}, o.error || (o.observation ? JSON.stringify(o.observation) : "")),
      h("td", {}, age(o.at))));
    main.append(h("section", { class: "card", id: "pool-" + p.name }, h("h2", {}, `Pool ${p.name}`), latch,
      obs.length ? table(["Node", "Phase", "Code", "MMP verdict", "Foreign writer", "Import", "Error / last watch", "Reported"], obs, { class: "observed" })
        : h("p", {}, "no agent has reported this pool yet")));
  });
  const srow = (sps.storage_pools || []).map(sp => h("tr", {}, h("td", {}, sp.node), h("td", {}, sp.name), h("td", {}, sp.provider), h("td", {}, sp.pool),
    h("td", {}, sp.capacity_kib ? `${sp.capacity_kib} KiB` : "")));
  main.append(h("section", { class: "card" }, h("h2", {}, "Storage pools"), table(["Node", "Name", "Provider", "Pool", "Capacity"], srow)));
}

async function policies(main) {
  const p = await api("/cairn/v1/policies").catch(e => ({ error: e.message }));
  if (p.error) { main.append(h("section", { class: "card", id: "policies" }, h("p", { class: "bad" }, p.error))); return; }
  const ev = p["auto-evict"] || {}, evac = p.evacuation || {};
  const settings = ev.settings || {};
  main.append(h("section", { class: "card", id: "policies" }, h("h2", {}, "Policies"),
    h("p", {}, p.leading ? "This serve holds the lease: its policies act." : "This serve does not hold the lease: what it shows is its own reading; the lease holder acts.")));
  const erows = (ev.offline_nodes || []).map(n => h("tr", { "data-node": n.node }, h("td", {}, n.node), h("td", {}, n.action),
    h("td", {}, n.due ? countdown(n.due, settings.after_seconds || 0) : "—"), h("td", {}, n.reason)));
  main.append(h("section", { class: "card" }, h("h2", {}, "Eviction countdowns"),
    h("p", {}, `An offline node is evicted after ${Math.round((settings.after_seconds || 0) / 60)} min; never while more than ${settings.max_disconnected_percent}% of the nodes are offline` + (settings.allow === false ? "; eviction is off for the cluster" : "") + "."),
    (ev.warnings || []).length ? h("ul", { class: "warn" }, ev.warnings.map(w => h("li", {}, w))) : null,
    erows.length ? table(["Node", "Plan", "Evicted", "Why"], erows, { id: "evictions" }) : h("p", { id: "evictions-none" }, "every node is online")));
  const drows = (evac.auto_diskful || []).map(s => h("tr", { "data-resource": s.resource }, h("td", {}, s.resource), h("td", {}, s.node), h("td", {}, s.action),
    h("td", {}, s.due ? countdown(s.due, 0) : "—"), h("td", {}, s.reason)));
  const mrows = (evac.moves || []).map(m => h("tr", { "data-resource": m.resource }, h("td", {}, m.resource), h("td", {}, m.node), h("td", {}, m.action),
    h("td", {}, m.replacement || "—"), h("td", {}, m.reason)));
  const srows = (evac.short || []).map(x => h("tr", { "data-resource": x.resource }, h("td", {}, x.resource), h("td", {}, JSON.stringify(x))));
  main.append(h("section", { class: "card" }, h("h2", {}, "Evacuations and the resync queue"),
    h("p", {}, `At most ${evac.max_syncing_replacements} replacements sync at once` + (evac.at ? `; last looked ${age(evac.at)} ago` : "") + "."),
    mrows.length ? table(["Resource", "Leaving", "Step", "Replacement", "Why"], mrows, { id: "moves" }) : h("p", {}, "no replica is moving"),
    srows.length ? table(["Below its place count", ""], srows, { id: "short" }) : null,
    drows.length ? table(["Resource", "Node", "Auto-diskful", "Due", "Why"], drows, { id: "auto-diskful" }) : null));
  const recent = decisionRows("auto-evict", ev.recent_decisions).concat(decisionRows("evacuation", evac.recent_decisions))
    .sort((a, b) => a.d.at < b.d.at ? 1 : -1).slice(0, 50);
  main.append(h("section", { class: "card" }, h("h2", {}, "Recent decisions"),
    recent.length ? table(["When", "Policy", "Command", "Subject", "Outcome", "Why"], recent.map(({ policy, d }) => h("tr", {},
      h("td", {}, age(d.at) + " ago"), h("td", {}, policy), h("td", {}, d.verb || ""), h("td", {}, d.subject), h("td", { class: d.outcome === "ok" ? "ok" : "bad" }, d.outcome), h("td", {}, d.reason))), { id: "decisions" })
      : h("p", {}, "no decision yet"),
    h("details", {}, h("summary", {}, "as the API gives it"), h("pre", {}, JSON.stringify(p, null, 2)))));
}

async function history(main) {
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  const f = { type: params.get("type") || "", actor: params.get("actor") || "", subject: params.get("subject") || "" };
  const inputs = Object.keys(f).map(k => h("input", { name: k, placeholder: k, value: f[k] }));
  const apply = h("button", { onclick: () => {
    const q = new URLSearchParams();
    for (const i of inputs) if (i.value) q.set(i.name, i.value);
    location.hash = "#/history?" + q.toString();
  } }, "Filter");
  const q = new URLSearchParams({ limit: "200" });
  for (const [k, v] of Object.entries(f)) if (v) q.set(k, v);
  const last = await api("/cairn/v1/events?" + q.toString() + "&from_seq=1");
  const evs = (last.events || []).slice(-200).reverse();
  const rows = evs.map(ev => h("tr", { "data-seq": ev.seq }, h("td", {}, h("a", { href: "#/at?seq=" + ev.seq, title: "the cluster as it was after this event" }, ev.seq)), h("td", {}, (ev.occurred_at || "").replace("T", " ").slice(0, 19)),
    h("td", {}, ev.type), h("td", {}, ev.subject), h("td", {}, ev.actor), h("td", {}, h("code", {}, JSON.stringify(ev.payload)))));
  main.append(h("section", { class: "card" }, h("h2", {}, "History"), h("div", { class: "filters" }, inputs, apply),
    table(["Seq", "When", "Type", "Subject", "Actor", "Payload"], rows, { id: "history" })));
}

// at: the cluster as it was right after the event at ?seq=, and what changed from then
// to another moment: ?with= (an event's sequence, before or after) or now.
async function at(main) {
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  const seq = params.get("seq") || "1";
  const other = params.get("with") || "now";
  const [nodes, res, diff] = await Promise.all([api(`/cairn/v1/at/${encodeURIComponent(seq)}/nodes`),
    api(`/cairn/v1/at/${encodeURIComponent(seq)}/resources?limit=100`),
    api(`/cairn/v1/at/${encodeURIComponent(seq)}/diff?with=${encodeURIComponent(other)}`)]);
  main.append(h("h2", { id: "at-title" }, `The cluster as it was after event ${seq}`));
  const rows = (nodes.nodes || []).map(n => h("tr", { "data-node": n.name }, h("td", {}, n.name), h("td", {}, n.spec.host),
    h("td", {}, n.spec.failure_domain || ""), h("td", {}, (n.status || {}).state || "")));
  main.append(h("section", { class: "card" }, h("h2", {}, "Nodes then"), table(["Node", "Host", "Domain", "State"], rows, { id: "at-nodes" })));
  const rrows = (res.resources || []).map(r => h("tr", { "data-resource": r.name }, h("td", {}, r.name),
    h("td", {}, (r.replicas || []).map(x => x.node + (x.diskless ? " (diskless)" : "")).join(", "))));
  main.append(h("section", { class: "card" }, h("h2", {}, "Resources then"), table(["Name", "Replicas"], rrows, { id: "at-resources" })));
  const changes = [];
  const when = other === "now" ? " since" : "";
  for (const kind of ["nodes", "resources"]) {
    for (const what of ["added", "removed", "changed"]) {
      for (const name of (diff[kind] || {})[what] || []) changes.push(h("tr", { "data-change": `${kind}/${name}` }, h("td", {}, kind), h("td", {}, name), h("td", {}, what + when)));
    }
  }
  const withInput = h("input", { id: "at-with", placeholder: "now, or an event's sequence", value: other === "now" ? "" : other });
  const compare = h("button", { id: "at-compare", onclick: () => {
    const q = new URLSearchParams({ seq });
    if (withInput.value.trim()) q.set("with", withInput.value.trim());
    location.hash = "#/at?" + q.toString();
  } }, "Compare");
  const title = other === "now" ? `Since then (now: event ${diff.to_seq})` : `From event ${diff.from_seq} to event ${diff.to_seq}`;
  main.append(h("section", { class: "card" }, h("h2", { id: "at-diff-title" }, title),
    h("div", { class: "filters" }, h("label", {}, "Compare with ", withInput), compare),
    table(["Kind", "Name", ""], changes, { id: "at-diff" })));
}

const pages = { overview, resources, pools, policies, history, at };

async function render() {
  const name = (location.hash.replace(/^#\//, "").split("?")[0]) || "overview";
  state.page = pages[name] ? name : "overview";
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.page === state.page);
  const main = h("main", { id: "main", "data-page": state.page });
  try {
    await pages[state.page](main);
  } catch (e) {
    if (e.message !== "unauthenticated") main.append(h("p", { class: "error" }, e.message));
  }
  document.getElementById("main").replaceWith(main);
  // The policies' plans change with time as much as with events (a sweep every second):
  // that page is read again every few seconds besides.
  clearTimeout(state.poll);
  if (state.page === "policies") state.poll = setTimeout(render, 3000);
}

function scheduleRefresh() {
  clearTimeout(state.refresh);
  state.refresh = setTimeout(render, 300);
}

// follow reads a Server-Sent Events stream with the token (EventSource cannot send one)
// and calls onMessage with each message's id; it reconnects after the last id it saw.
async function follow(path, onMessage, indicator) {
  let lastID = "";
  for (;;) {
    try {
      const headers = {};
      if (state.token) headers["Authorization"] = "Bearer " + state.token;
      if (lastID) headers["Last-Event-ID"] = lastID;
      const resp = await fetch(path, { headers });
      if (!resp.ok) throw new Error(resp.statusText);
      if (indicator) indicator.className = "live on";
      const reader = resp.body.getReader();
      const dec = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const id = block.match(/^id: (\d+)$/m);
          if (id) {
            lastID = id[1];
            onMessage(id[1]);
          }
        }
      }
    } catch (e) {
      // reconnect below
    }
    if (indicator) indicator.className = "live off";
    await new Promise(r => setTimeout(r, 1000));
  }
}

// followAll: every stored event refreshes the page; the replicas' reports (disk states,
// resync progress) refresh the resources page.
function followAll() {
  const live = document.getElementById("live");
  follow("/cairn/v1/events/stream", id => { live.dataset.seq = id; scheduleRefresh(); }, live);
  follow("/cairn/v1/status/stream?kind=drbd&from_seq=new", () => { if (state.page === "resources") scheduleRefresh(); }, null);
}

window.addEventListener("hashchange", render);

(async function start() {
  try {
    await whoami();
  } catch (e) {
    return; // the sign-in form is up
  }
  followAll();
  render();
})();
