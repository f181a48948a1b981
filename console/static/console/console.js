// The console's one script: it refreshes what a page shows, without a
// reload, by fetching the same part of the page again from the waker.
// Every page works without it. Penelope's own code, under the project's licence.
(function () {
  "use strict";
  function refresh(element) {
    var url = element.getAttribute("data-refresh-url");
    var seconds = parseFloat(element.getAttribute("data-refresh-s")) || 5;
    function tick() {
      fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } })
        .then(function (answer) {
          if (answer.redirected || !answer.ok) { throw new Error("status " + answer.status); }
          return answer.text();
        })
        .then(function (html) {
          element.innerHTML = html;
          element.setAttribute("data-refreshed-at", String(Date.now()));
          document.body.classList.remove("stale");
        })
        .catch(function () { document.body.classList.add("stale"); })
        .finally(function () { setTimeout(tick, seconds * 1000); });
    }
    setTimeout(tick, seconds * 1000);
  }
  document.querySelectorAll("[data-refresh-url]").forEach(refresh);
})();
