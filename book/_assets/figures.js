/* Every figure of a page opens at full size when tapped or clicked.

   The plots are drawn 5.5 to 7 inches wide (500 to 710 pixels), and on a phone the column is
   about 350 pixels: shrunk to fit, a plot's labels become too small to read. Each plot is made
   a link to its own image file, which the browser shows at its own size, as the Graphviz
   diagrams already are (attention_course.book). The link's name is the image's text
   alternative; the browser test checks that every figure shrunk below half its width on a
   390-pixel screen is such a link. */
(function () {
  "use strict";
  function linkFigures(root) {
    var images = root.querySelectorAll(".cell_output img");
    Array.prototype.forEach.call(images, function (image) {
      var source = image.getAttribute("src");
      if (!source || image.closest("a") || source.indexOf("data:") === 0) return;
      var link = document.createElement("a");
      link.className = "figure-zoom";
      link.setAttribute("href", source);
      link.setAttribute("title", "Open the figure at full size");
      image.parentNode.insertBefore(link, image);
      link.appendChild(image);
    });
  }
  document.addEventListener("DOMContentLoaded", function () { linkFigures(document); });
})();
