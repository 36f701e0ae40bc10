/* Names for the controls the widget manager draws without one. An ipywidgets slider is drawn
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
      if (changes[i].addedNodes.length) { nameSliders(document); return; }
    }
  });
  document.addEventListener("DOMContentLoaded", function () {
    nameSliders(document);
    observer.observe(document.body, {childList: true, subtree: true});
  });
})();
