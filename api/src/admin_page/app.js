// The operator page: calls only the operator API (/admin/v1) with the token the operator
// gives (kept for this tab in sessionStorage). Every value from the API is written as text.
"use strict";

const api = "/admin/v1";
let nextDeadCursor = null;

function token() {
  return sessionStorage.getItem("parley-operator-token") || "";
}

function status(message, isError) {
  const el = document.getElementById("status");
  el.textContent = message;
  el.className = isError ? "error" : "";
}

async function call(method, path, body) {
  const init = { method, headers: { Authorization: "Bearer " + token() } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(api + path, init);
  const json = await resp.json().catch(() => null);
  if (!resp.ok || !json || !json.success) {
    const why = json && json.error ? json.error.code + ": " + json.error.message : "HTTP " + resp.status;
    throw new Error(method + " " + path + " — " + why);
  }
  return json.data;
}

function cell(row, value, cls) {
  const td = document.createElement("td");
  td.textContent = value === null || value === undefined ? "" : String(value);
  if (cls) td.className = cls;
  row.appendChild(td);
  return td;
}

function button(row, label, cls, onClick) {
  const td = document.createElement("td");
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = label;
  b.className = cls;
  b.addEventListener("click", () => onClick().catch((e) => status(e.message, true)));
  td.appendChild(b);
  row.appendChild(td);
}

function body(id) {
  const tbody = document.querySelector("#" + id + " tbody");
  tbody.replaceChildren();
  return tbody;
}

async function loadQueues() {
  const data = await call("GET", "/queues");
  const tbody = body("queues-table");
  for (const q of data.queues) {
    const row = tbody.insertRow();
    row.dataset.queue = q.name;
    if (q.paused) row.className = "paused";
    cell(row, q.name);
    for (const n of [q.ready, q.parked, q.scheduled, q.inFlight]) cell(row, n, "num");
    cell(row, q.oldestReadySeconds.toFixed(1), "num");
    cell(row, q.consumers, "num");
    cell(row, q.jobsPerSecond.toFixed(2), "num");
    cell(row, q.itemsPerSecond.toFixed(2), "num");
    cell(row, q.paused ? "paused" : "");
    const verb = q.paused ? "resume" : "pause";
    button(row, verb, "queue-" + verb, async () => {
      await call("POST", "/queues/" + q.name + "/" + verb);
      status("queue " + q.name + ": " + verb + "d");
      await refresh();
    });
  }
  const backlogs = body("backlogs-table");
  for (const o of data.topOrganizations) {
    const row = backlogs.insertRow();
    cell(row, o.name + " (" + o.organizationId + ")");
    for (const n of [o.pendingRecipients, o.heldRecipients, o.pendingWebhookDeliveries]) cell(row, n, "num");
    cell(row, o.sendingPaused ? "paused" : "on");
    const verb = o.sendingPaused ? "resume" : "pause";
    button(row, verb, "org-" + verb, () => setOrg(o.organizationId, verb));
  }
}

async function setOrg(id, verb) {
  await call("POST", "/organizations/" + encodeURIComponent(id) + "/" + verb);
  status("organization " + id + ": sending " + verb + "d");
  await refresh();
}

async function loadPauses() {
  const data = await call("GET", "/pauses");
  const tbody = body("paused-table");
  for (const o of data.organizations) {
    const row = tbody.insertRow();
    row.dataset.org = o.organizationId;
    cell(row, o.name + " (" + o.organizationId + ")");
    cell(row, o.pausedAt);
    cell(row, o.heldRecipients, "num");
    button(row, "resume", "org-resume", () => setOrg(o.organizationId, "resume"));
  }
}

function deadFilter() {
  const value = (id) => document.getElementById(id).value.trim();
  const when = (id) => (value(id) ? new Date(value(id)).toISOString() : "");
  const filter = { queue: value("dead-queue") };
  const fields = {
    organizationId: value("dead-org"), broadcastId: value("dead-broadcast"),
    webhookId: value("dead-webhook"), errorCode: value("dead-code"),
    from: when("dead-from"), to: when("dead-to"),
  };
  for (const [k, v] of Object.entries(fields)) if (v) filter[k] = v;
  return filter;
}

async function loadDead(more) {
  const filter = deadFilter();
  const params = new URLSearchParams(filter);
  if (more && nextDeadCursor) params.set("cursor", nextDeadCursor);
  const page = await call("GET", "/dead?" + params.toString());
  const tbody = document.querySelector("#dead-table tbody");
  if (!more) tbody.replaceChildren();
  for (const d of page.items) {
    const row = tbody.insertRow();
    row.dataset.id = d.id;
    cell(row, d.failedAt);
    cell(row, d.id);
    cell(row, d.organizationId);
    cell(row, d.broadcastId || d.webhookId || "");
    cell(row, (d.errorCode || "") + (d.errorMessage ? " — " + d.errorMessage : ""));
    cell(row, d.attempts, "num");
    button(row, "retry", "retry-one", () => act("retry", { filter: { queue: filter.queue }, ids: [d.id] }));
  }
  nextDeadCursor = page.nextCursor;
  document.getElementById("dead-more").hidden = !nextDeadCursor;
  status(tbody.rows.length + " dead item(s) shown");
}

async function act(verb, request) {
  const action = await call("POST", "/dead/" + verb, request);
  status(verb + " " + action.id + ": " + action.status + ", " + action.matched + " matched");
  await follow(action.id);
}

// Follows an action until it ends, then shows the lists again.
async function follow(id) {
  for (let i = 0; i < 120; i++) {
    const a = await call("GET", "/actions/" + id);
    status(a.action + " " + a.id + ": " + a.status + ", " + a.done + " of " + a.matched + " done");
    if (a.status !== "running") break;
    await new Promise((r) => setTimeout(r, 500));
  }
  await refresh();
  await loadDead(false);
}

async function loadAudit() {
  const page = await call("GET", "/audit?pageSize=50");
  const tbody = body("audit-table");
  for (const a of page.items) {
    const row = tbody.insertRow();
    row.dataset.id = a.id;
    cell(row, a.createdAt);
    cell(row, a.actor);
    cell(row, a.action);
    cell(row, a.queue || a.organizationId || "");
    cell(row, a.status);
    cell(row, a.done + " / " + a.matched, "num");
  }
}

async function refresh() {
  if (!token()) {
    status("Enter the operator token (PARLEY_ADMIN_TOKEN or an operator key).");
    return;
  }
  try {
    await Promise.all([loadQueues(), loadPauses(), loadAudit()]);
  } catch (e) {
    status(e.message, true);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    sessionStorage.setItem("parley-operator-token", document.getElementById("token").value.trim());
    refresh();
  });
  document.getElementById("dead-form").addEventListener("submit", (e) => {
    e.preventDefault();
    loadDead(false).catch((err) => status(err.message, true));
  });
  document.getElementById("dead-more").addEventListener("click", () =>
    loadDead(true).catch((err) => status(err.message, true)));
  for (const verb of ["retry", "discard"]) {
    document.getElementById("dead-" + verb + "-all").addEventListener("click", () => {
      if (!confirm(verb + " everything this filter matches?")) return;
      act(verb, { filter: deadFilter() }).catch((err) => status(err.message, true));
    });
  }
  document.getElementById("pause-form").addEventListener("submit", (e) => {
    e.preventDefault();
    setOrg(document.getElementById("pause-org").value.trim(), "pause").catch((err) => status(err.message, true));
  });
  refresh();
  // Every 15 s: each refresh reads every queue and the largest backlogs.
  setInterval(refresh, 15000);
});
