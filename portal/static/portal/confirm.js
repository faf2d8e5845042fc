// Forms that do something hard to undo (cancel a job, rerun it) ask first: <form data-confirm="...">.
// A listener, not an inline handler, so the pages keep a script-src 'self' policy.
(function () {
  "use strict";
  document.addEventListener("submit", function (event) {
    const form = event.target;
    if (form instanceof HTMLFormElement && form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
      event.preventDefault();
    }
  });
})();
