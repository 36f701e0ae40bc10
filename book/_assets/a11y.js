/* Accessible names that say what a control shows.

   The theme's search button shows "Search Ctrl+K" but names itself aria-label="Search", which
   fails axe-core's label-in-name rule (a speech user says what they see). Without the
   aria-label its name is its own text, whatever the theme writes there (on a Mac, "⌘ K").
   The icon-only search button keeps its label: it shows no text to contradict it. The same holds
   for the fold over a hidden code cell: its summary shows "Show code cell source" and was
   named "Toggle hidden content"; without the label it is named by what it shows.

   The colour-mode button names itself "Color mode", but Font Awesome draws its icons as SVG
   images titled "Light", "Dark" and "System Settings", and axe-core counts the shown one's
   title as the button's text (label-content-name-mismatch, serious). The icons only repeat
   what the button's name says: they are hidden from assistive technology, whether Font
   Awesome has already turned them into SVG or not.

   Names for the controls the widget manager draws without one. An ipywidgets slider is drawn
   by noUiSlider as a <div role="slider"> handle with no accessible name, beside a label that
   screen readers cannot connect to it: each handle gets its widget's description as its name.
   The widgets are drawn after the page has loaded, so new ones are named as they appear. */
(function () {
  "use strict";
  function nameSliders(root) {
    var handles = root.querySelectorAll ? root.querySelectorAll('[role="slider"]:not([aria-label])') : [];
    Array.prototype.forEach.call(handles, function (handle) {
      var widget = handle.closest(".widget-slider, .widget-hslider, .widget-vslider, .jupyter-widgets");
      var label = widget && widget.querySelector(".widget-label");
      var text = label && label.textContent.trim();
      handle.setAttribute("aria-label", text || "slider");
    });
  }
  var observer = new MutationObserver(function (changes) {
    for (var i = 0; i < changes.length; i++) {
      if (changes[i].addedNodes.length) { hideModeIcons(document); nameSliders(document); return; }
    }
  });
  function nameByText(root) {
    var buttons = root.querySelectorAll(".search-button__button[aria-label], details > summary[aria-label]");
    Array.prototype.forEach.call(buttons, function (button) {
      if (button.textContent.trim()) button.removeAttribute("aria-label");
    });
  }
  function hideModeIcons(root) {
    var icons = root.querySelectorAll(".theme-switch-button .theme-switch:not([aria-hidden])");
    Array.prototype.forEach.call(icons, function (icon) {
      Array.prototype.forEach.call(icon.querySelectorAll("title"), function (title) { title.remove(); });
      icon.removeAttribute("title");
      icon.removeAttribute("role");
      icon.removeAttribute("aria-labelledby");
      icon.setAttribute("aria-hidden", "true");
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    nameByText(document);
    hideModeIcons(document);
    nameSliders(document);
    observer.observe(document.body, {childList: true, subtree: true});
  });
})();
