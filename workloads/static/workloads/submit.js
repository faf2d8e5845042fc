// The submit form: show the chosen project's allowed images and volumes, offer only its volumes,
// and tick Read-only for a volume that can only be mounted read-only. A file, not an inline
// script, so the pages keep a script-src 'self' policy. Without it the form still works: every
// project's list is shown and the server checks the choices.
(function () {
  "use strict";
  const project = document.getElementById("id_project");
  if (!project) {
    return;
  }
  function words(text) {
    return (text || "").split(" ").filter(Boolean);
  }
  function current() {
    const panel = document.querySelector('[data-catalog="' + CSS.escape(project.value) + '"]');
    return panel ? { volumes: words(panel.dataset.volumes), readOnly: words(panel.dataset.readOnly) } : { volumes: [], readOnly: [] };
  }
  function update() {
    document.querySelectorAll("[data-catalog]").forEach(function (panel) {
      panel.hidden = panel.dataset.catalog !== project.value;
    });
    const names = current().volumes;
    document.querySelectorAll("select[data-volume-row]").forEach(function (row) {
      Array.from(row.options).forEach(function (option) {
        option.disabled = option.value !== "" && names.indexOf(option.value) < 0;
      });
    });
  }
  document.addEventListener("change", function (event) {
    const row = event.target;
    if (row === project) {
      update();
    } else if (row instanceof HTMLSelectElement && row.dataset.volumeRow !== undefined) {
      const box = document.getElementById("id_read_only_" + row.dataset.volumeRow);
      if (box && current().readOnly.indexOf(row.value) >= 0) {
        box.checked = true;
      }
    }
  });
  update();

  // "Add a volume" copies the last row with the next index (the server counts the posted rows).
  const add = document.getElementById("add-volume");
  function renumber(row, n) {
    row.querySelectorAll("[id], [for], [name], [data-error-for]").forEach(function (el) {
      ["id", "for", "name"].forEach(function (attr) {
        const value = el.getAttribute(attr);
        if (value) {
          el.setAttribute(attr, value.replace(/_\d+(-help)?$/, "_" + n + "$1"));
        }
      });
    });
    row.querySelectorAll("[data-error-for]").forEach(function (el) { el.remove(); });
    row.querySelectorAll("label").forEach(function (label) {
      const text = label.firstChild;
      if (text && text.nodeType === Node.TEXT_NODE) {
        text.textContent = text.textContent.replace(/\d+/, String(n + 1));
      }
    });
    row.querySelectorAll("select, input").forEach(function (input) {
      if (input.type === "checkbox") {
        input.checked = false;
      } else {
        input.value = "";
      }
      if (input.dataset.volumeRow !== undefined) {
        input.dataset.volumeRow = String(n);
      }
    });
  }
  if (add) {
    add.hidden = false;
    add.addEventListener("click", function () {
      const rows = document.querySelectorAll("[data-volume-grid]");
      const copy = rows[rows.length - 1].cloneNode(true);
      renumber(copy, rows.length);
      rows[rows.length - 1].after(copy);
      add.hidden = rows.length + 1 >= Number(add.dataset.maxRows);
      copy.querySelector("select").focus();
    });
  }
})();
