// Render the mathematics that pymdownx.arithmatex marks up (generic mode: \( \) inline,
// \[ \] display) with the KaTeX vendored under docs/javascripts/katex, on every page load,
// including material's instant navigation.  A formula KaTeX cannot parse is reported on the
// console (auto-render's default), which docs/check_site.sh treats as an error.
document$.subscribe(() => {
  for (const el of document.querySelectorAll(".arithmatex")) {
    renderMathInElement(el, {
      delimiters: [
        { left: "\\(", right: "\\)", display: false },
        { left: "\\[", right: "\\]", display: true },
      ],
    });
  }
});
