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
  const out = document.querySelector("pre[data-live]");
  if (out && !out.hasAttribute("data-ended")) liveOutput(out);
});

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
      tr.append(id, cell(r.repo), cell(r.kind), st, cell(r.model + " · " + r.effort), cell(r.created, "mono"));
      body.append(tr);
    }
    table.tBodies[0].replaceWith(body);
  });
}

// A run's page: output appended as it comes, the state kept current.
function liveOutput(pre) {
  const es = new EventSource(pre.dataset.live);
  const state = document.getElementById("state");
  const detail = document.getElementById("detail");
  es.addEventListener("output", (e) => {
    const atBottom = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 40;
    pre.append(document.createTextNode(e.data));
    // Keep the page light: only the last half megabyte stays.
    if (pre.textContent.length > 600000) pre.textContent = pre.textContent.slice(-500000);
    if (atBottom) pre.scrollTop = pre.scrollHeight;
  });
  es.addEventListener("state", (e) => {
    const s = JSON.parse(e.data);
    state.className = "state " + s.state;
    state.textContent = s.state;
    detail.textContent = s.detail;
  });
  es.addEventListener("end", () => {
    es.close();
    pre.setAttribute("data-ended", "");
    // Swap the stop button for the remove one.
    setTimeout(() => location.reload(), 800);
  });
}
