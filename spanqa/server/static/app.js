// The spanqa page: ask, see each answer in its sentence and in its document, list and ingest documents.
// Plain JS, no build step and nothing fetched from elsewhere: the page works offline.
"use strict";

const $ = (selector) => document.querySelector(selector);

function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name === "class") node.className = value;
    else node.setAttribute(name, value);
  }
  for (const child of children) node.append(child);
  return node;
}

// The API key, when the server asks for one: kept in this browser only.
function apiHeaders() {
  const key = localStorage.getItem("spanqa-api-key");
  return key ? { "X-API-Key": key } : {};
}

async function api(path, options = {}) {
  const response = await fetch(path, {
    ...options,
    headers: { "Content-Type": "application/json", ...apiHeaders(), ...(options.headers || {}) },
  });
  if (response.status === 401) {
    const key = window.prompt("This spanqa server needs its API key:");
    if (key) {
      localStorage.setItem("spanqa-api-key", key);
      return api(path, options);
    }
  }
  const data = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
  if (!response.ok) throw new Error(data.error || `HTTP ${response.status}`);
  return data;
}

function confidence(score) {
  const words = window.SPANQA.confidenceWords;
  const word = (words.find(([floor]) => score >= floor) || [0, ""])[1];
  return `${Math.round(score * 100)}% ${word}`;
}

function where(path, page, label) {
  if (page == null) return path;
  return label == null || label === String(page) ? `${path}, page ${page}` : `${path}, page ${label} (PDF page ${page})`;
}

function documentLink(answer) {
  const params = new URLSearchParams({ id: answer.document_id, start: answer.char_start, end: answer.char_end });
  return `#document?${params}`;
}

// The answer's sentence with the answer itself marked.
function contextWithAnswer(answer) {
  const context = answer.context || answer.text;
  const start = answer.context ? answer.char_start - answer.context_start : 0;
  const end = start + answer.text.length;
  return el("p", { class: "context" },
    context.slice(0, start), el("mark", {}, context.slice(start, end)), context.slice(end));
}

function showAnswers(result) {
  const list = $("#answers");
  list.replaceChildren();
  if (result.abstained) {
    $("#ask-status").textContent = result.passages.length
      ? "No answer found in your documents (none is likely enough); the passages read are below."
      : "No answer found: nothing to read (is anything ingested?).";
  } else {
    const count = result.answers.length;
    const took = Math.round(result.timings_ms.total || 0);
    $("#ask-status").textContent = `${count} ${count === 1 ? "answer" : "answers"} in ${took} ms`;
  }
  for (const warning of result.warnings) {
    list.before(el("p", { class: "warning" }, warning));
  }
  for (const answer of result.answers) {
    list.append(el("li", { class: "answer" },
      el("div", { class: "answer-head" },
        el("strong", { class: "answer-text" }, answer.text),
        el("span", { class: "score", title: "estimated probability that the answer is right" },
          confidence(answer.score))),
      contextWithAnswer(answer),
      el("div", { class: "where" },
        el("a", { href: documentLink(answer), class: "open-document" }, where(answer.path, answer.page, answer.page_label)),
        ` chars ${answer.char_start}-${answer.char_end}`),
      ...answer.also_in.map((source) => el("div", { class: "where also" }, "also in ",
        el("a", { href: documentLink(source) }, where(source.path, source.page)),
        ` chars ${source.char_start}-${source.char_end}`))));
  }
  const passages = $("#passages");
  passages.replaceChildren(...result.passages.map((p) => el("li", {},
    el("div", { class: "where" }, `${p.score.toFixed(3)} · ${where(p.path, p.page)} · chars ${p.char_start}-${p.char_end}`),
    p.heading ? el("div", { class: "heading" }, p.heading) : "",
    el("div", { class: "passage" }, p.text),
    ...p.copies.map((copy) => el("div", { class: "where also" }, "near-duplicate in ",
      el("a", { href: documentLink(copy) }, where(copy.path, copy.page)),
      ` chars ${copy.char_start}-${copy.char_end}`)))));
  $("#passages-box").hidden = result.passages.length === 0;
}

async function ask(event) {
  if (event) event.preventDefault();
  const question = $("#question").value.trim();
  if (!question) return;
  // The address follows the question: a page that answers it can be bookmarked or shared.
  const address = `?q=${encodeURIComponent(question)}`;
  if (location.search !== address) history.pushState(null, "", address);
  $("#ask-status").textContent = "Reading…";
  document.querySelectorAll("#ask-view .warning").forEach((node) => node.remove());
  try {
    showAnswers(await api("/ask", { method: "POST", body: JSON.stringify({ question }) }));
  } catch (error) {
    $("#answers").replaceChildren();
    $("#passages-box").hidden = true;
    $("#ask-status").textContent = `Error: ${error.message}`;
  }
}

async function showDocument(params) {
  const id = params.get("id");
  const start = Number(params.get("start"));
  const end = Number(params.get("end"));
  const query = new URLSearchParams({ text: "true" });
  if (params.has("start")) { query.set("start", start); query.set("end", end); }
  const doc = await api(`/documents/${encodeURIComponent(id)}?${query}`);
  $("#document-title").textContent = doc.relative_path || doc.path;
  $("#document-meta").textContent = `${doc.path} · ${doc.format} · ${doc.chunks.length} chunks`;
  const text = doc.text || "";
  const target = $("#document-text");
  if (doc.highlight) {
    const { char_start: s, char_end: e } = doc.highlight;
    const mark = el("mark", { id: "highlight" }, text.slice(s, e));
    target.replaceChildren(text.slice(0, s), mark, text.slice(e));
    mark.scrollIntoView({ block: "center" });
  } else {
    target.replaceChildren(text);
  }
}

async function showDocuments() {
  const body = $("#documents tbody");
  try {
    const docs = await api("/documents");
    body.replaceChildren(...docs.map((d) => el("tr", {},
      el("td", {}, el("a", { href: `#document?id=${encodeURIComponent(d.id)}` }, d.relative_path || d.path)),
      el("td", { class: `status-${d.status}`, title: d.error || "" }, d.error ? `${d.status}: ${d.error}` : d.status),
      el("td", {}, d.format),
      el("td", {}, String(d.chunks)))));
    if (!docs.length) body.replaceChildren(el("tr", {}, el("td", { colspan: "4" }, "Nothing ingested yet.")));
  } catch (error) {
    body.replaceChildren(el("tr", {}, el("td", { colspan: "4" }, `Error: ${error.message}`)));
  }
}

async function ingest(event) {
  event.preventDefault();
  const path = $("#ingest-path").value.trim();
  const bar = $("#ingest-bar");
  const label = $("#ingest-label");
  $("#ingest-progress").hidden = false;
  bar.removeAttribute("value");
  label.textContent = "Starting…";
  try {
    let job = await api("/ingest", { method: "POST", body: JSON.stringify({ path }) });
    while (job.state === "pending" || job.state === "running") {
      if (job.total) { bar.max = job.total; bar.value = job.done; }
      label.textContent = `${job.state}: ${job.done} of ${job.total || "?"} files`;
      await new Promise((resolve) => setTimeout(resolve, 500));
      job = await api(`/jobs/${job.id}`);
    }
    bar.max = Math.max(job.total, 1);
    bar.value = bar.max;
    label.textContent = job.state === "done"
      ? `Done: ${job.total} files, ${job.failed} failed`
      : `Failed: ${job.error || "see the server log"}`;
  } catch (error) {
    label.textContent = `Error: ${error.message}`;
  }
  showDocuments();
}

function route() {
  const hash = location.hash.slice(1);
  const [view, query] = hash.split("?");
  $("#ask-view").hidden = view !== "";
  $("#documents-view").hidden = view !== "documents";
  $("#document-view").hidden = view !== "document";
  if (view === "documents") showDocuments();
  if (view === "document") {
    showDocument(new URLSearchParams(query)).catch((error) => {
      $("#document-text").textContent = `Error: ${error.message}`;
    });
  }
}

function askFromAddress() {
  const question = new URLSearchParams(location.search).get("q");
  if (question && question !== $("#question").value.trim()) {
    $("#question").value = question;
    ask();
  }
}

// The ingest form only where the server ingests over HTTP; otherwise say how to turn it on.
$("#ingest-form").hidden = !window.SPANQA.ingestEnabled;
$("#ingest-off").hidden = window.SPANQA.ingestEnabled;
$("#ask-form").addEventListener("submit", ask);
$("#ingest-form").addEventListener("submit", ingest);
window.addEventListener("popstate", askFromAddress);
$("#back").addEventListener("click", (event) => { event.preventDefault(); history.back(); });
window.addEventListener("hashchange", route);
route();
askFromAddress();
