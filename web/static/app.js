// lab: a little JavaScript on top of pages that work without it.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  // A select that chooses what the page shows submits its form.
  for (const s of document.querySelectorAll("select[data-autosubmit]")) {
    s.addEventListener("change", () => s.form.submit());
  }
  // Forms that end something ask first.
  for (const f of document.querySelectorAll("form[data-confirm]")) {
    f.addEventListener("submit", (e) => { if (!confirm(f.dataset.confirm)) e.preventDefault(); });
  }
  const table = document.querySelector("table[data-live]");
  if (table) liveRuns(table);
  const screen = document.querySelector("pre#screen[data-live]");
  if (screen) {
    const term = document.getElementById("term");
    const fit = document.getElementById("fit");
    if (fit) fitScreen(term, fit);
    term.scrollTop = term.scrollHeight;
    if (!screen.hasAttribute("data-ended")) liveScreen(screen, term);
  }
  const reply = document.getElementById("reply");
  if (reply) replyBox(reply);
  const changes = document.querySelector("#changes[data-diff-live]");
  if (changes) liveChanges(changes);
});

// A live run's changes: the page asks again every few seconds, only while
// it is visible, and swaps the diff in only when it changed; it stops once
// the run has ended.
function liveChanges(section) {
  const every = Number(section.dataset.diffLive) || 5000;
  let busy = false;
  const timer = setInterval(async () => {
    if (busy || document.visibilityState !== "visible") return;
    busy = true;
    try {
      const r = await fetch(location.pathname, { headers: { accept: "text/html" } });
      if (!r.ok) return;
      const doc = new DOMParser().parseFromString(await r.text(), "text/html");
      const fresh = doc.getElementById("changes");
      if (!fresh) return;
      if (fresh.dataset.sig !== section.dataset.sig) {
        const open = new Set([...section.querySelectorAll("details[open]")].map((d) => d.id));
        section.innerHTML = fresh.innerHTML;
        section.dataset.sig = fresh.dataset.sig;
        for (const d of section.querySelectorAll("details")) if (open.has(d.id)) d.open = true;
      }
      if (!fresh.hasAttribute("data-diff-live")) clearInterval(timer);
    } catch (_) {
      // The server is away for a moment: the next tick asks again.
    } finally {
      busy = false;
    }
  }, every);
}

function cell(text, cls) {
  const td = document.createElement("td");
  if (cls) td.className = cls;
  td.textContent = text;
  return td;
}

// The dashboard: rows rebuilt from each snapshot the server sends.
function liveRuns(table) {
  const es = new EventSource(table.dataset.live);
  es.addEventListener("runs", (e) => {
    const body = document.createElement("tbody");
    for (const r of JSON.parse(e.data)) {
      const tr = document.createElement("tr");
      tr.dataset.id = r.id;
      const id = document.createElement("td");
      const a = document.createElement("a");
      a.href = "/runs/" + r.id;
      a.textContent = r.id;
      id.append(a);
      const st = document.createElement("td");
      const badge = document.createElement("span");
      badge.className = "state " + r.state;
      badge.textContent = r.state;
      const detail = document.createElement("span");
      detail.className = "detail";
      detail.textContent = r.detail;
      st.append(badge, " ", detail);
      tr.append(id, cell(r.repo), cell(r.kind), st, cell(r.model + " · " + r.effort), cell(r.node, "mono"), cell(r.created, "mono"));
      body.append(tr);
    }
    table.tBodies[0].replaceWith(body);
  });
}

// A run's page: the screen redrawn as the server sends it (HTML the server
// built from the terminal's cells, escaped there), the state kept current.
function liveScreen(screen, term) {
  const es = new EventSource(screen.dataset.live);
  const state = document.getElementById("state");
  const detail = document.getElementById("detail");
  es.addEventListener("screen", (e) => {
    const atBottom = term.scrollHeight - term.scrollTop - term.clientHeight < 40;
    screen.innerHTML = JSON.parse(e.data).html;
    if (atBottom) term.scrollTop = term.scrollHeight;
  });
  es.addEventListener("state", (e) => {
    const s = JSON.parse(e.data);
    state.className = "state " + s.state;
    state.textContent = s.state;
    detail.textContent = s.detail;
    const agent = document.getElementById("agent");
    if (agent && s.agent) {
      const st = document.createElement("strong");
      st.textContent = s.agent.state;
      const since = document.createElement("span");
      since.className = "from";
      since.textContent = " since " + s.agent.since + " UTC";
      agent.replaceChildren(st, " ", since);
      if (s.agent.reason) agent.append(document.createElement("br"), s.agent.reason);
    }
  });
  es.addEventListener("end", () => {
    es.close();
    screen.setAttribute("data-ended", "");
    // Swap the stop button for the remove one.
    setTimeout(() => location.reload(), 800);
  });
}

// The reply box: sent without leaving the page; the text box empties when
// the run took it. Without JavaScript the form posts and comes back.
function replyBox(form) {
  const status = document.getElementById("reply-status");
  const text = form.querySelector("textarea");
  // Enter sends, Shift+Enter makes a new line.
  text.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      form.requestSubmit(form.querySelector("button[value='Enter']"));
    }
  });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = new URLSearchParams(new FormData(form, e.submitter));
    status.textContent = "sending…";
    try {
      const r = await fetch(form.action, { method: "POST", body, redirect: "manual" });
      // A redirect (opaque here) is the page's answer to a send that worked.
      if (r.type === "opaqueredirect" || r.ok) {
        text.value = "";
        status.textContent = "sent " + (e.submitter ? e.submitter.textContent : "");
      } else {
        const page = new DOMParser().parseFromString(await r.text(), "text/html");
        const msg = page.querySelector("p.lead");
        status.textContent = "not sent: " + (msg ? msg.textContent : r.status);
      }
    } catch (err) {
      status.textContent = "not sent: " + err;
    }
  });
}

// Fit to width: the screen's font shrinks so the CLI's full width shows
// without scrolling sideways. On by default where the page is wide enough
// for it to stay readable (a phone scrolls inside the box instead); the
// viewer's choice is remembered.
function fitScreen(term, button) {
  const wide = () => window.innerWidth >= 832;
  const apply = () => {
    const chosen = localStorage.getItem("lab.fit");
    const on = chosen === null ? wide() : chosen === "1";
    term.style.fontSize = "";
    if (on) {
      const need = Math.max(...Array.from(term.querySelectorAll("pre"), (p) => p.scrollWidth));
      const have = term.clientWidth - parseFloat(getComputedStyle(term).paddingLeft)
        - parseFloat(getComputedStyle(term).paddingRight);
      if (need > have) {
        const size = parseFloat(getComputedStyle(term).fontSize);
        term.style.fontSize = Math.max(4, Math.floor(size * have / need * 100) / 100) + "px";
      }
    }
    button.setAttribute("aria-pressed", on ? "true" : "false");
    button.textContent = on ? "Actual size" : "Fit to width";
  };
  button.hidden = false;
  button.addEventListener("click", () => {
    localStorage.setItem("lab.fit", button.getAttribute("aria-pressed") === "true" ? "0" : "1");
    apply();
  });
  window.addEventListener("resize", apply);
  apply();
}
