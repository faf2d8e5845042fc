// Follows a job's log: the API streams text lines while the pod runs, then the kept tail.
(function () {
  "use strict";
  const pre = document.getElementById("job-log");
  if (!pre) { return; }
  const decoder = new TextDecoder();
  async function follow() {
    const response = await fetch(pre.dataset.logUrl, { credentials: "same-origin" });
    if (!response.ok || !response.body) {
      pre.textContent = "The log is not available (" + response.status + ").";
      return;
    }
    const reader = response.body.getReader();
    for (;;) {
      const chunk = await reader.read();
      if (chunk.done) { break; }
      pre.append(decoder.decode(chunk.value, { stream: true }));
    }
    pre.dataset.done = "1";
  }
  follow().catch(function (err) { pre.textContent = "Log stream failed: " + err; });
})();
