// cairn web UI: enhancements only; every view works without this file.
"use strict";
(() => {
  const $ = (sel, root = document) => root.querySelector(sel);

  // Search as you type: fetch the search page and take its results.
  for (const box of document.querySelectorAll("input[type=search][data-results]")) {
    const target = document.getElementById(box.dataset.results);
    if (!target) continue;
    let timer = 0;
    let latest = 0;
    box.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(async () => {
        const form = box.form;
        const params = new URLSearchParams(new FormData(form));
        const ticket = ++latest;
        if (!box.value.trim() && target.id === "quick-results") { target.replaceChildren(); return; }
        try {
          const res = await fetch("/ui/search?" + params, { headers: { Accept: "text/html" } });
          const doc = new DOMParser().parseFromString(await res.text(), "text/html");
          if (ticket !== latest) return;
          const results = doc.getElementById("results");
          target.replaceChildren(...(results ? results.childNodes : []));
          if (target.id === "results") history.replaceState(null, "", "/ui/search?" + params);
        } catch (_) { /* the form still submits */ }
      }, 150);
    });
  }

  // Edit in place: show the form instead of loading ?edit=1.
  const editButton = $("#edit-button");
  const editForm = $("#edit-form");
  if (editButton && editForm) {
    editButton.addEventListener("click", (event) => {
      event.preventDefault();
      editForm.hidden = false;
      const content = $("#content");
      if (content) content.hidden = true;
      $("#edit-content").focus();
    });
  }

  for (const form of document.querySelectorAll("form.confirm")) {
    form.addEventListener("submit", (event) => {
      if (!confirm("Delete this memory? It can be restored.")) event.preventDefault();
    });
  }

  // The live stream: new memories, prompts and sessions, newest on top.
  const live = $("#live");
  if (live && "EventSource" in window) {
    const state = $("#live-state");
    const source = new EventSource("/ui/live");
    source.addEventListener("ready", () => { if (state) state.textContent = "Live: new memories, prompts and sessions appear here."; });
    source.onerror = () => { if (state) state.textContent = "Live stream interrupted; retrying…"; };
    for (const kind of ["memory", "prompt", "session"]) {
      source.addEventListener(kind, (event) => {
        const item = JSON.parse(event.data);
        const li = document.createElement("li");
        li.className = "live-" + kind;
        const label = document.createElement("span");
        label.className = "kind";
        label.textContent = kind + (item.project ? " · " + item.project : "");
        li.append(label);
        const text = item.url ? document.createElement("a") : document.createElement("span");
        if (item.url) text.href = item.url;
        text.textContent = item.title;
        li.append(text);
        live.prepend(li);
        while (live.children.length > 50) live.lastElementChild.remove();
      });
    }
  }
})();
