// Keyboard: "/" to the query box, j / k (or the arrow keys) between results, Enter follows, Escape leaves a field.
(function () {
  "use strict";
  function results() { return Array.prototype.slice.call(document.querySelectorAll(".hit-link")); }
  function move(step) {
    var links = results();
    if (!links.length) { return; }
    var at = links.indexOf(document.activeElement);
    var next = links[Math.min(links.length - 1, Math.max(0, at < 0 ? 0 : at + step))];
    next.focus();
    next.scrollIntoView({ block: "nearest" });
  }
  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey) { return; }
    var typing = /^(INPUT|SELECT|TEXTAREA)$/.test(event.target.tagName);
    if (typing) {
      if (event.key === "Escape") { event.target.blur(); }
      return;
    }
    if (event.key === "/") { event.preventDefault(); var box = document.getElementById("q"); box.focus(); box.select(); }
    else if (event.key === "j" || event.key === "ArrowDown") { event.preventDefault(); move(1); }
    else if (event.key === "k" || event.key === "ArrowUp") { event.preventDefault(); move(-1); }
  });
  // A changed filter searches again at once.
  ["kind", "mode", "repo"].forEach(function (id) {
    var field = document.getElementById(id);
    var box = document.getElementById("q");
    if (field && box) { field.addEventListener("change", function () { if (box.value.trim()) { field.form.submit(); } }); }
  });
}());
