/* The widget manager finds its fonts next to the module RequireJS says it came from, which by
   default is a folder named after the package beside the page (…/book/@jupyter-widgets/…): a 404
   for every font. Point the package's name at the copy the book serves. Loaded after require.js
   and before the widget manager. */
(function () {
  "use strict";
  var root = document.documentElement.getAttribute("data-content_root") || "";
  require.config({paths: {"@jupyter-widgets/html-manager/dist": root + "_static/vendor/html-manager"}});
})();
