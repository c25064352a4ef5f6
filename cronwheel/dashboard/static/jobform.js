// The job form (/ui/jobs/new, /ui/jobs/ID/edit): builds the job spec as JSON, sends it to
// the API (POST /v1/jobs with this page's Idempotency-Key, or PATCH /v1/jobs/ID with the
// version the page showed as If-Match), puts the API's field errors next to their fields,
// and previews the schedule as it is typed (POST /v1/schedules/preview).
"use strict";

(function () {
  const PREVIEW_COUNT = 10;
  const DEBOUNCE_MS = 300;
  const DST = {
    moved: "Its wall time does not exist that day (the clock jumps forward): it fires when the gap ends.",
    shifted: "Its wall time does not exist that day (the clock jumps forward): it fires with the offset before the change.",
    merged: "Its wall time happens twice that day (the clock goes back): it fires once.",
    repeated: "Its wall time happens twice that day (the clock goes back): it fires both times.",
  };
  const WEEKDAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];

  function start() {
    const form = document.getElementById("jobform");
    if (!form) return;
    const cw = window.cronwheel;
    const mode = form.dataset.mode;
    const input = (field) => form.querySelector(`[data-field="${field}"]`);
    const val = (field) => { const el = input(field); return el ? el.value.trim() : ""; };
    const fid = (field) => field.replace(/[._]/g, "-");

    // -- building the spec -----------------------------------------------------------
    function num(field) {
      const text = val(field);
      return text === "" ? undefined : Number(text);
    }

    function json(field, errors, empty) {
      const text = val(field);
      if (text === "") return empty;
      try { return JSON.parse(text); } catch (e) {
        errors.push({ field, reason: `is not valid JSON: ${e.message}` });
        return empty;
      }
    }

    function put(target, key, value) {
      if (value !== undefined && value !== "") target[key] = value;
    }

    function schedule() {
      const kind = val("schedule.kind");
      const s = { kind };
      if (kind === "cron") {
        s.cron = val("schedule.cron");
        put(s, "timezone", val("schedule.timezone"));
        s.dialect = val("schedule.dialect");
        s.dst_gap = val("schedule.dst_gap");
        s.dst_overlap = val("schedule.dst_overlap");
      } else if (kind === "interval") {
        put(s, "every_seconds", num("schedule.every_seconds"));
        put(s, "anchor", val("schedule.anchor"));
      } else if (kind === "once") {
        put(s, "at", val("schedule.at"));
      } else if (kind === "delay") {
        put(s, "seconds", num("schedule.seconds"));
      }
      if (kind !== "manual") {
        put(s, "start_at", val("schedule.start_at"));
        put(s, "end_at", val("schedule.end_at"));
      }
      return s;
    }

    // A command's line is split into argv by the dashboard (POST /ui/jobs/argv), by the
    // rule `cronwheel jobs create --command` follows: one rule, never a second splitter
    // here that could disagree with it. `split` holds the answer for the line last asked.
    const argvInput = input("action.argv");
    const words = document.getElementById("argv-words");
    let split = { line: argvInput ? argvInput.value.trim() : "", argv: argvInput ? JSON.parse(argvInput.dataset.argv || "[]") : [], reason: null };

    async function splitLine() {
      const line = val("action.argv");
      if (line === split.line && (split.argv.length || split.reason)) return split;
      let answer = null;
      try {
        const meta = document.querySelector('meta[name="csrf-token"]');
        const response = await fetch("/ui/jobs/argv", {
          method: "POST",
          credentials: "same-origin",
          headers: {
            "Content-Type": "application/json",
            Accept: "application/json",
            "X-CSRF-Token": meta ? meta.content : "",
          },
          body: JSON.stringify({ line }),
        });
        answer = await response.json();
      } catch (e) {
        answer = { errors: [{ reason: `the command line could not be checked: ${e.message}` }] };
      }
      const found = answer.argv
        ? { line, argv: answer.argv, reason: null }
        : { line, argv: [], reason: ((answer.errors || [])[0] || {}).reason || "cannot be split into words" };
      if (line === val("action.argv")) split = found; // not an older line's late answer
      showWords();
      return found;
    }

    function showWords() {
      if (!words) return;
      words.textContent = split.argv.length && split.line === val("action.argv") ? `argv: ${JSON.stringify(split.argv)}` : "";
    }

    function listOf(field) {
      const text = val(field);
      return text === "" ? [] : text.split(/[\s,]+/).filter(Boolean);
    }

    function env(errors) {
      const out = {};
      const el = input("action.env");
      for (const raw of (el ? el.value : "").split("\n")) {
        const line = raw.replace(/\r$/, "");
        if (line.trim() === "") continue;
        const at = line.indexOf("=");
        if (at <= 0) {
          errors.push({ field: "action.env", reason: `${JSON.stringify(line)}: expected NAME=VALUE` });
          continue;
        }
        const name = line.slice(0, at).trim();
        if (name in out) errors.push({ field: "action.env", reason: `${name} is given twice` });
        out[name] = line.slice(at + 1);
      }
      return out;
    }

    function action(errors) {
      const type = val("action.type");
      if (type === "webhook") {
        const a = { type: "webhook", url: val("action.url"), method: val("action.method") };
        a.headers = json("action.headers", errors, {});
        a.body = json("action.body", errors, null);
        return a;
      }
      if (type === "command") {
        if (split.line !== val("action.argv") || split.reason) {
          errors.push({ field: "action.argv", reason: split.reason || "is being checked: try again" });
        }
        const a = { type: "command", argv: split.argv };
        const vars = env(errors);
        if (Object.keys(vars).length) a.env = vars;
        const secret = listOf("action.secret_env");
        if (secret.length) a.secret_env = secret;
        put(a, "cwd", val("action.cwd"));
        put(a, "timeout_seconds", num("action.timeout_seconds"));
        const codes = listOf("action.permanent_exit_codes").map((c) => (/^-?\d+$/.test(c) ? Number(c) : c));
        if (codes.length) a.permanent_exit_codes = codes;
        return a;
      }
      if (type === "publish") {
        const a = { type: "publish", broker: val("action.broker"), to: val("action.to") };
        const body = json("action.body", errors, null);
        if (body !== null) a.body = body;
        return a;
      }
      return { type: "handler", name: val("action.name") };
    }

    function spec(errors) {
      const out = { name: val("name"), schedule: schedule(), action: action(errors) };
      put(out, "pool", val("pool"));
      out.payload = json("payload", errors, null);
      out.priority = val("priority");
      const retry = { backoff: val("retry.backoff") };
      put(retry, "max_attempts", num("retry.max_attempts"));
      put(retry, "initial_delay", num("retry.initial_delay"));
      put(retry, "max_delay", num("retry.max_delay"));
      retry.budget_seconds = num("retry.budget_seconds") ?? null;
      out.retry = retry;
      put(out, "timeout_seconds", num("timeout_seconds"));
      const misfire = { mode: val("misfire.mode") };
      put(misfire, "limit", num("misfire.limit"));
      out.misfire = misfire;
      out.overlap = val("overlap");
      out.delivery = val("delivery");
      put(out, "jitter_seconds", num("jitter_seconds"));
      put(out, "catchup_seconds", num("catchup_seconds"));
      return out;
    }

    // -- which fields show ---------------------------------------------------------------
    function showKind() {
      const kind = val("schedule.kind");
      form.querySelectorAll("[data-kind]").forEach((el) => { el.hidden = el.dataset.kind !== kind; });
      form.querySelector("[data-bounds]").hidden = kind === "manual";
      const type = val("action.type");
      form.querySelectorAll("[data-action-type]").forEach((el) => { el.hidden = !el.dataset.actionType.split(" ").includes(type); });
    }

    // -- field errors --------------------------------------------------------------------
    function clearErrors() {
      form.querySelectorAll(".field-error").forEach((p) => { p.hidden = true; p.textContent = ""; });
      form.querySelectorAll("[aria-invalid]").forEach((el) => {
        el.removeAttribute("aria-invalid");
        if (el.dataset.hint) el.setAttribute("aria-describedby", el.dataset.hint);
        else el.removeAttribute("aria-describedby");
      });
      const stale = document.getElementById("stale");
      if (stale) stale.hidden = true;
    }

    function showErrors(errors) {
      let first = null;
      for (const err of errors) {
        // The nearest field the form has: "action.headers.X-Id" is shown at the headers.
        let field = err.field || "";
        while (field && !input(field)) field = field.includes(".") ? field.slice(0, field.lastIndexOf(".")) : "";
        if (!field) continue;
        const el = input(field);
        const p = document.getElementById(`e-${fid(field)}`);
        if (!p) continue;
        const reason = field === err.field ? err.reason : `${err.field.slice(field.length + 1)}: ${err.reason}`;
        p.textContent = p.hidden ? reason : `${p.textContent}\n${reason}`;
        p.hidden = false;
        el.setAttribute("aria-invalid", "true");
        el.setAttribute("aria-describedby", [el.dataset.hint, p.id].filter(Boolean).join(" "));
        const details = el.closest("details");
        if (details) details.open = true;
        if (!first && !el.closest("[hidden]")) first = el;
      }
      if (first) first.focus();
    }

    // What the API refused, read from the copy of its answer that cronwheel.api hands
    // over; acted on once the call has returned (after the generic flash).
    let refused = null;
    async function onProblem(response) {
      let problem = null;
      try { problem = await response.json(); } catch (e) { problem = null; }
      refused = { status: response.status, problem };
    }

    function showRefusal() {
      if (!refused) return;
      if (refused.status === 412) {
        document.getElementById("stale").hidden = false;
        cw.flash("Someone changed this job since this page was loaded, so your changes " +
          "were not saved. Reload the page to edit the current version.");
      } else if (refused.problem && refused.problem.errors) {
        showErrors(refused.problem.errors);
      }
    }

    // -- submitting ----------------------------------------------------------------------
    const baseline = spec([]);
    const button = document.getElementById("submit");
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      clearErrors();
      cw.flash("");
      button.disabled = true;
      if (val("action.type") === "command") await splitLine();
      button.disabled = false;
      const errors = [];
      const body = spec(errors);
      if (errors.length) {
        showErrors(errors);
        cw.flash(errors.map((e) => `${e.field}: ${e.reason}`).join("\n"));
        return;
      }
      button.disabled = true;
      refused = null;
      let response;
      if (mode === "edit") {
        // Only what changed: an untouched action keeps its stored (masked here) secrets.
        const changes = {};
        for (const key of Object.keys(body)) {
          if (JSON.stringify(body[key]) !== JSON.stringify(baseline[key])) changes[key] = body[key];
        }
        const url = `/v1/jobs/${encodeURIComponent(form.dataset.jobId)}`;
        response = await cw.api("PATCH", url, changes, { "If-Match": `"${form.dataset.version}"` }, onProblem);
      } else {
        const headers = { "Idempotency-Key": form.dataset.idempotencyKey };
        response = await cw.api("POST", "/v1/jobs", body, headers, onProblem);
      }
      button.disabled = false;
      if (!response) { showRefusal(); return; }
      const job = await response.json();
      location.assign(`/ui/jobs/${encodeURIComponent(job.id)}`);
    });

    // -- the preview ---------------------------------------------------------------------
    const status = document.getElementById("preview-status");
    const description = document.getElementById("preview-description");
    const problems = document.getElementById("preview-errors");
    const table = document.getElementById("preview-table");
    const rows = document.getElementById("preview-rows");
    const caption = document.getElementById("preview-caption");
    let timer = null;
    let latest = 0;

    function say(text) {
      status.textContent = text;
      status.hidden = !text;
    }

    function cell(row, text, className) {
      const td = document.createElement("td");
      if (className) td.className = className;
      if (text instanceof Node) td.appendChild(text); else td.textContent = text;
      row.appendChild(td);
      return td;
    }

    function wall(iso) {
      // "2027-03-28T03:00:00+02:00" read as written: the wall time in the schedule's zone.
      const [y, m, d] = iso.slice(0, 10).split("-").map(Number);
      const weekday = WEEKDAYS[new Date(Date.UTC(y, m - 1, d)).getUTCDay()];
      return `${weekday} ${iso.slice(0, 10)} ${iso.slice(11, 19)}`;
    }

    function render(answer) {
      problems.hidden = true;
      description.textContent = answer.description;
      description.hidden = false;
      rows.replaceChildren();
      const fires = answer.fires;
      if (!fires.length) {
        table.hidden = true;
        say("It has no fire time to show.");
        return;
      }
      caption.textContent = `The next ${fires.length === 1 ? "fire time" : `${fires.length} fire times`}, in ${answer.timezone}`;
      fires.forEach((fire, i) => {
        const tr = document.createElement("tr");
        cell(tr, String(i + 1), "num");
        cell(tr, wall(fire.local), "mono");
        cell(tr, fire.offset_changed ? `${fire.offset} (changed)` : fire.offset, "mono");
        cell(tr, `${fire.at.slice(0, 10)} ${fire.at.slice(11, 19)} UTC`, "mono");
        if (fire.dst) {
          const span = document.createElement("span");
          const badge = document.createElement("span");
          badge.className = "badge dst";
          badge.textContent = fire.dst;
          span.append(badge, ` ${DST[fire.dst] || ""}`);
          cell(tr, span, "dst-cell");
        } else {
          cell(tr, "—");
        }
        rows.appendChild(tr);
      });
      table.hidden = false;
      say("");
    }

    function refuse(problem) {
      description.hidden = true;
      table.hidden = true;
      const errors = (problem && problem.errors) ||
        [{ field: problem && problem.field, reason: (problem && problem.detail) || "the preview failed" }];
      problems.replaceChildren(...errors.map((e) => {
        const li = document.createElement("li");
        li.textContent = e.field ? `${e.field}: ${e.reason}` : e.reason;
        return li;
      }));
      problems.hidden = false;
      say("This schedule cannot be used:");
    }

    async function preview() {
      const mine = ++latest;
      const s = schedule();
      if (s.kind === "cron" && !s.cron) {
        description.hidden = true; table.hidden = true; problems.hidden = true;
        say("Type a cron expression to see when it fires.");
        return;
      }
      let response = null;
      let answer = null;
      try {
        const meta = document.querySelector('meta[name="csrf-token"]');
        response = await fetch("/v1/schedules/preview", {
          method: "POST",
          credentials: "same-origin",
          headers: {
            "Content-Type": "application/json",
            Accept: "application/json",
            "X-CSRF-Token": meta ? meta.content : "",
          },
          body: JSON.stringify({ schedule: s, count: PREVIEW_COUNT }),
        });
        answer = await response.json();
      } catch (e) {
        if (mine === latest) say(`The preview is not available: ${e.message}`);
        return;
      }
      if (mine !== latest) return; // a newer preview is on its way
      if (response.ok) render(answer); else refuse(answer);
    }

    let splitTimer = null;
    function changed(event) {
      showKind();
      if (event.target === argvInput) {
        showWords();
        clearTimeout(splitTimer);
        splitTimer = setTimeout(splitLine, DEBOUNCE_MS);
      }
      if (event.target.closest("#schedule")) {
        clearTimeout(timer);
        timer = setTimeout(preview, DEBOUNCE_MS);
      }
    }
    // A page restored from the back-forward cache after a create is a new form: a new key,
    // or the API would refuse the next job as a reuse of the last one's key.
    window.addEventListener("pageshow", (event) => {
      if (event.persisted && mode === "create" && window.crypto && crypto.randomUUID) {
        form.dataset.idempotencyKey = crypto.randomUUID();
      }
    });
    form.addEventListener("input", changed);
    form.addEventListener("change", changed);
    showKind();
    showWords();
    preview();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
