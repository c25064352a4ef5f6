// cronwheel dashboard, tenants and keys: the forms call the JSON API through
// window.cronwheel.api (so they get its validation and its problem+json errors, shown
// next to each field), and a new key's token is shown once, in a dialog, never kept.
"use strict";

(function () {
  // A form field's value as the API wants it: an empty quota is null (no limit), a
  // number is a number, and anything else is sent as typed for the API to judge.
  function value(el) {
    const text = el.value.trim();
    const kind = el.dataset.kind || "text";
    if (kind === "text") return text;
    if (text === "") return null;
    const n = Number(text);
    if (!Number.isFinite(n)) return text;
    return n;
  }

  function fieldsOf(form) {
    return [...form.elements].filter((el) => el.name && el.dataset.kind);
  }

  function clearErrors(form) {
    for (const el of fieldsOf(form)) {
      el.removeAttribute("aria-invalid");
      const slot = document.getElementById(`${el.id}-error`);
      if (slot) { slot.textContent = ""; slot.hidden = true; }
    }
  }

  // Each error of a problem+json answer next to its field. When every error found its
  // field, the alert at the top only points to them instead of repeating them.
  function showErrors(form, problem) {
    if (!problem) return;
    const errors = problem.errors && problem.errors.length ? problem.errors
      : problem.field ? [{ field: problem.field, reason: problem.detail }] : [];
    let first = null;
    let placed = 0;
    for (const err of errors) {
      const el = form.elements.namedItem(String(err.field || "").split(".")[0]);
      const slot = el && el.id ? document.getElementById(`${el.id}-error`) : null;
      if (!slot) continue;
      placed++;
      slot.textContent = slot.textContent ? `${slot.textContent} ${err.reason}` : err.reason;
      slot.hidden = false;
      el.setAttribute("aria-invalid", "true");
      first = first || el;
    }
    if (!first) return;
    if (placed === errors.length) {
      const what = placed === 1 ? "a field needs" : `${placed} fields need`;
      window.cronwheel.flash(`Nothing was saved: ${what} a fix (marked below).`);
    }
    first.focus();
  }

  async function problemOf(response) {
    try { return await response.json(); } catch (e) { return null; }
  }

  async function submit(form) {
    const [method, url] = form.dataset.api.split(" ");
    const body = {};
    for (const el of fieldsOf(form)) {
      const v = value(el);
      // Creating: an empty field is left out, so the API applies its default.
      if (method === "POST" && (v === null || v === "")) continue;
      body[el.name] = v;
    }
    clearErrors(form);
    window.cronwheel.flash("");
    const button = form.querySelector('button[type="submit"]');
    if (button) button.disabled = true;
    let problem = null;
    const response = await window.cronwheel.api(method, url, body, {}, async (r) => {
      problem = await problemOf(r);
    });
    if (button) button.disabled = false;
    if (!response) { showErrors(form, problem); return; }
    const answer = response.status === 204 ? null : await response.json();
    const then = form.dataset.then || "reload";
    if (then === "tenant") location.assign(`/ui/admin/tenants/${encodeURIComponent(answer.id)}`);
    else if (then === "token") showToken(answer);
    else location.reload();
  }

  // The token of a key just created: in the dialog only (never in a URL or in storage);
  // closing the dialog forgets it and reloads the list of keys.
  function showToken(answer) {
    const dialog = document.getElementById("new-key");
    document.getElementById("new-key-token").textContent = answer.token;
    document.getElementById("new-key-copied").textContent = "";
    document.getElementById("key-create").reset();
    dialog.showModal();
    document.getElementById("new-key-copy").focus();
  }

  function selectToken() {
    const code = document.getElementById("new-key-token");
    const range = document.createRange();
    range.selectNodeContents(code);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }

  // The clipboard needs a secure context and the browser's leave: without them, the
  // token is selected so that the user copies it by hand.
  async function copyToken() {
    const status = document.getElementById("new-key-copied");
    const token = document.getElementById("new-key-token").textContent;
    try {
      if (!navigator.clipboard || !navigator.clipboard.writeText) throw new Error("no clipboard");
      await navigator.clipboard.writeText(token);
      status.textContent = "Copied to the clipboard.";
    } catch (e) {
      selectToken();
      status.textContent = "This browser did not let the page copy it: the token is selected, copy it by hand (Ctrl+C or ⌘C).";
    }
  }

  function forgetToken() {
    document.getElementById("new-key-token").textContent = "";
    location.reload();
  }

  document.addEventListener("DOMContentLoaded", () => {
    for (const form of document.querySelectorAll("form[data-api]")) {
      form.addEventListener("submit", (event) => { event.preventDefault(); submit(form); });
    }
    const dialog = document.getElementById("new-key");
    if (dialog) {
      document.getElementById("new-key-copy").addEventListener("click", copyToken);
      document.getElementById("new-key-done").addEventListener("click", () => dialog.close());
      dialog.addEventListener("close", forgetToken);
    }
  });
})();
