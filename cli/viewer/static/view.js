// evalledger view: live pages. The server sends the ledger head over server-sent events; when it
// moves, this page fetches itself again and swaps its <main> (no full reload). The new HTML is
// parsed with DOMParser, which never runs scripts; the CSP forbids inline scripts anyway.
(function () {
  "use strict";
  if (!window.EventSource) { return; }
  var first = null;
  var busy = false;
  function swap() {
    var active = document.activeElement;
    if (busy || (active && active.form)) { return; }   // never clobber a form being filled in
    busy = true;
    fetch(window.location.href, {headers: {"Accept": "text/html"}, credentials: "same-origin"})
      .then(function (r) { return r.text(); })
      .then(function (text) {
        var doc = new DOMParser().parseFromString(text, "text/html");
        var fresh = doc.getElementById("main");
        var main = document.getElementById("main");
        if (fresh && main) {
          main.replaceChildren.apply(main, Array.prototype.slice.call(fresh.childNodes).map(function (n) {
            return document.importNode(n, true);
          }));
          document.dispatchEvent(new Event("evalledger:swapped"));   // pages drawn by a script redraw
          document.body.setAttribute("data-live-updates", String(Number(document.body.getAttribute("data-live-updates") || 0) + 1));
        }
      })
      .finally(function () { busy = false; });
  }
  var source = new EventSource("/events");
  source.addEventListener("head", function (event) {
    document.body.setAttribute("data-head", event.data);
    if (first === null) { first = event.data; return; }
    if (event.data !== first) { first = event.data; swap(); }
  });
})();
