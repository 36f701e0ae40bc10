/* The widget manager (@jupyter-widgets/html-manager) typesets math inside widgets with MathJax 2's
   call MathJax.Hub.Queue(["Typeset", MathJax.Hub, element]); the book loads MathJax 3, which has
   no Hub. This gives MathJax 3 that one call: elements queued before MathJax has started are
   typeset once it is ready, later ones at once. Loaded after the page's MathJax configuration
   (window.MathJax) and before MathJax itself, which is deferred. */
(function () {
  "use strict";
  var config = window.MathJax = window.MathJax || {};
  var waiting = [];
  function typeset(elements) {
    var mathjax = window.MathJax;
    if (elements.length && mathjax && mathjax.typesetPromise) {
      mathjax.typesetPromise(elements).catch(function (error) { console.warn("MathJax:", error); });
    }
  }
  var hub = {
    Queue: function (job) {
      var element = job && job[2];
      if (!element) { return; }
      var mathjax = window.MathJax;
      if (mathjax && mathjax.startup && mathjax.startup.promise) {
        mathjax.startup.promise.then(function () { typeset([element]); });
      } else {
        waiting.push(element);
      }
    }
  };
  config.Hub = hub;  /* until MathJax replaces window.MathJax with itself */
  var startup = config.startup = config.startup || {};
  var ready = startup.ready;
  startup.ready = function () {
    if (ready) { ready(); } else { window.MathJax.startup.defaultReady(); }
    window.MathJax.Hub = hub;
    window.MathJax.startup.promise.then(function () { typeset(waiting.splice(0)); });
  };
})();
