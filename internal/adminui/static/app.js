// Kelp admin UI: a little progressive enhancement; every page works without it.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  // Buttons with data-confirm ask first (deletes, applies).
  document.querySelectorAll("[data-confirm]").forEach(function (el) {
    el.addEventListener("click", function (ev) {
      if (!window.confirm(el.getAttribute("data-confirm"))) { ev.preventDefault(); }
    });
  });
  // A drop zone uploads the dropped files through its form.
  document.querySelectorAll(".drop").forEach(function (zone) {
    var form = zone.closest("form");
    var input = form && form.querySelector("input[type=file]");
    if (!input) { return; }
    zone.addEventListener("dragover", function (ev) { ev.preventDefault(); zone.classList.add("over"); });
    zone.addEventListener("dragleave", function () { zone.classList.remove("over"); });
    zone.addEventListener("drop", function (ev) {
      ev.preventDefault();
      zone.classList.remove("over");
      input.files = ev.dataTransfer.files;
      form.submit();
    });
  });
});
