// cronwheel dashboard: times in the browser's zone, live parts, and actions that call
// the JSON API with the page's CSRF token. No framework, no build step (decision 0023).
"use strict";

(function () {
  const csrf = () => {
    const meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.content : "";
  };

  // Times arrive in UTC (kept on hover); show them in the browser's zone.
  const pad = (n) => String(n).padStart(2, "0");
  function localTimes(root) {
    for (const el of root.querySelectorAll("time[datetime]")) {
      if (el.dataset.local) continue;
      const d = new Date(el.getAttribute("datetime"));
      if (isNaN(d)) continue;
      const zone = new Intl.DateTimeFormat(undefined, { timeZoneName: "short" })
        .formatToParts(d).find((p) => p.type === "timeZoneName");
      el.textContent = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
        `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}` +
        (zone ? ` ${zone.value}` : "");
      el.dataset.local = "1";
    }
  }

  function flash(message, ok) {
    const box = document.getElementById("flash");
    if (!box) return;
    box.textContent = message;
    box.className = ok ? "ok" : "";
    box.hidden = !message;
  }

  // A problem+json answer as a person reads it: the detail, then each field's reason.
  async function problemText(response) {
    let body = null;
    try { body = await response.json(); } catch (e) { body = null; }
    return problemLines(response, body);
  }

  function problemLines(response, body) {
    if (!body) return `${response.status} ${response.statusText}`;
    const lines = [body.detail || body.title || String(response.status)];
    for (const err of body.errors || []) {
      const where = err.index !== undefined && err.index !== null ? `item ${err.index}: ` : "";
      const line = `${where}${err.field}: ${err.reason}`;
      if (!lines[0].startsWith(line)) lines.push(line);  // the detail names the first error
    }
    return lines.join("\n");
  }

  // One call to the API as the signed-in viewer. Returns the response when it is 2xx;
  // otherwise shows the problem and returns null (after handing a copy of the answer to
  // onProblem, if given, e.g. to show each error next to its field).
  async function api(method, url, body, extraHeaders, onProblem) {
    const headers = { "X-CSRF-Token": csrf(), Accept: "application/json", ...(extraHeaders || {}) };
    const init = { method, headers, credentials: "same-origin" };
    if (body !== undefined && body !== null) {
      headers["Content-Type"] = "application/json";
      init.body = typeof body === "string" ? body : JSON.stringify(body);
    }
    let response;
    try { response = await fetch(url, init); } catch (e) {
      flash(`The API did not answer: ${e.message}`); return null;
    }
    if (!response.ok) {
      if (onProblem) await onProblem(response.clone());
      flash(await problemText(response)); return null;
    }
    return response;
  }

  async function done(el, response) {
    const then = el.dataset.then || "reload";
    if (then === "reload") { location.reload(); return; }
    // data-then="/ui/runs/{id}": the page of what the call created (its answer's id).
    if (then.includes("{id}")) {
      let body = null;
      try { body = response ? await response.json() : null; } catch (e) { body = null; }
      if (body && body.id !== undefined) location.assign(then.replace("{id}", encodeURIComponent(body.id)));
      else location.reload();
      return;
    }
    if (then === "location" && response) {
      const to = response.headers.get("X-Dashboard-Location");
      if (to) { location.assign(to); return; }
    }
    location.assign(then);
  }

  // <button data-action="POST /v1/jobs/ID/pause" data-body='{"catch_up": true}'
  //   data-if-match="3" data-confirm="Cancel this job?" data-then="reload|URL">
  async function onAction(button) {
    if (button.dataset.confirm && !window.confirm(button.dataset.confirm)) return;
    const [method, url] = button.dataset.action.split(" ");
    const headers = button.dataset.ifMatch ? { "If-Match": `"${button.dataset.ifMatch}"` } : {};
    button.disabled = true;
    const response = await api(method, url, button.dataset.body || null, headers);
    button.disabled = false;
    if (response) done(button, response);
  }

  // <form data-bulk> with checkboxes name="id", and buttons
  //   data-bulk-action="POST /v1/jobs/{id}/pause"       (one call per selected id)
  //   data-bulk-action="POST /v1/runs/replay" data-bulk-field="run_ids"  (one call)
  async function onBulk(button) {
    const form = button.closest("form");
    const ids = [...form.querySelectorAll('input[name="id"]:checked')].map((c) => c.value);
    if (!ids.length) { flash("Select at least one row first."); return; }
    if (button.dataset.confirm && !window.confirm(`${button.dataset.confirm} (${ids.length})`)) return;
    const [method, url] = button.dataset.bulkAction.split(" ");
    button.disabled = true;
    let failed = 0;
    if (button.dataset.bulkField) {
      const value = button.dataset.bulkNumbers ? ids.map(Number) : ids;
      const body = { ...(JSON.parse(button.dataset.body || "{}")), [button.dataset.bulkField]: value };
      if (!(await api(method, url, body))) failed = ids.length;
    } else {
      for (const id of ids) {
        if (!(await api(method, url.replace("{id}", encodeURIComponent(id)), button.dataset.body || null))) failed++;
      }
    }
    button.disabled = false;
    if (!failed) done(button, null);
  }

  document.addEventListener("click", (event) => {
    const target = event.target.closest("button");
    if (!target) return;
    if (target.dataset.action) { event.preventDefault(); onAction(target); }
    else if (target.dataset.bulkAction) { event.preventDefault(); onBulk(target); }
    else if (target.dataset.selectAll !== undefined) {
      event.preventDefault();
      const boxes = target.closest("form").querySelectorAll('input[name="id"]');
      const on = [...boxes].some((b) => !b.checked);
      boxes.forEach((b) => { b.checked = on; });
    }
  });

  // What a swap would lose: how far each scrollable table is scrolled, and the focus
  // (a keyboard user scrolling a table, or on a link, stays where they were). Elements
  // are matched by id, else by aria-label, else by position among their kind.
  function keepPlace(el) {
    const key = (node) => node.id ? "id " + node.id
      : node.getAttribute("aria-label") ? node.tagName + " " + node.getAttribute("aria-label")
      : null;
    const scrolled = [...el.querySelectorAll(".table-wrap")].map((w) => w.scrollLeft);
    const active = el.contains(document.activeElement) ? document.activeElement : null;
    const focusKey = active ? key(active) : null;
    const focusAt = active ? [...el.querySelectorAll(active.tagName)].indexOf(active) : -1;
    const focusTag = active ? active.tagName : null;
    return () => {
      el.querySelectorAll(".table-wrap").forEach((w, i) => {
        if (scrolled[i]) w.scrollLeft = scrolled[i];
      });
      if (!active) return;
      const target = focusKey
        ? [...el.querySelectorAll("*")].find((node) => key(node) === focusKey)
        : el.querySelectorAll(focusTag)[focusAt];
      if (target) target.focus({ preventScroll: true });
    };
  }

  // <div data-live="/ui/live/overview" data-every="2000">: swapped for a fresh copy
  // while the tab is visible. The server caches what it reads for a second, so any
  // number of tabs costs the store the same few queries.
  function live(el) {
    const every = Number(el.dataset.every || 2000);
    let busy = false;
    setInterval(async () => {
      if (busy || document.hidden) return;
      busy = true;
      try {
        const response = await fetch(el.dataset.live, { credentials: "same-origin" });
        if (response.ok) {
          const html = await response.text();
          const kept = keepPlace(el);
          el.innerHTML = html;
          kept();
          localTimes(el);
          el.dispatchEvent(new CustomEvent("cronwheel:live", { bubbles: true }));
        }
      } catch (e) { /* the next tick tries again */ }
      busy = false;
    }, every);
  }

  window.cronwheel = { api, flash, localTimes, problemText };
  document.addEventListener("DOMContentLoaded", () => {
    localTimes(document);
    document.querySelectorAll("[data-live]").forEach(live);
  });
})();
