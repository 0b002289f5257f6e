"""Sphinx configuration of fastkern's documentation.

Build: ``python -m sphinx -W --keep-going -b html docs OUTDIR`` (or ``.ci/docs.sh``).
fastkern must be importable with its compiled extensions: installed
(``pip install .``) or built in place (``python setup.py build_ext --inplace``).
The gallery (docs/examples) is executed at build time; the benchmark plots are
drawn from the saved results in docs/benchmarks/data (no benchmark runs here).
"""
import os
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent


def _import_fastkern():
    """fastkern with its compiled extensions.

    ``python -m sphinx`` run from the repository root puts the source tree
    first on sys.path.  When that tree has no compiled extensions (CI installs
    the package instead of building in place), fall back to the installed one.
    """
    try:
        import fastkern
        return fastkern
    except ImportError:
        here = {str(ROOT), ""}
        sys.path[:] = [p for p in sys.path if p not in here and Path(p or ".").resolve() != ROOT]
        for name in [m for m in sys.modules if m == "fastkern" or m.startswith("fastkern.")]:
            del sys.modules[name]
        import fastkern
        return fastkern


fastkern = _import_fastkern()
sys.path.insert(0, str(DOCS / "benchmarks"))
import make_plots  # noqa: E402  (docs/benchmarks/make_plots.py)

project = "fastkern"
author = "the fastkern developers"
copyright = "the fastkern developers"
release = fastkern.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "benchmarks/_generated", "examples/README.txt",
                    "api/generated/backreferences",
                    "sg_execution_times.rst", "**/*.ipynb"]
root_doc = "index"
default_role = "code"
nitpicky = False

# API reference: one page per public name, from the numpydoc docstrings
# (tests/test_docstrings.py validates them).
autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"members": False}
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# Gallery: every docs/examples/*.py not starting with "_" is executed at build
# time and its figures are kept.  A failing example fails the build.
os.environ.setdefault("MPLBACKEND", "Agg")
sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/[^_][^/]*\.py$",
    "ignore_pattern": r"(__init__|/_[^/]*)\.py$",
    "plot_gallery": "True",
    "abort_on_example_error": True,
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "reset_modules": ("matplotlib",),
    "capture_repr": ("_repr_html_",),
    "image_scrapers": ("matplotlib",),
    "doc_module": ("fastkern",),
    "backreferences_dir": "api/generated/backreferences",
    "reference_url": {"fastkern": None},
    "min_reported_time": 1,
    "show_memory": False,
    "write_computation_times": False,
}

html_theme = "pydata_sphinx_theme"
html_title = f"fastkern {release}"
html_static_path = ["_static"]
html_css_files = ["fastkern.css"]
html_theme_options = {
    "navbar_align": "left",
    "header_links_before_dropdown": 8,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
# Pages without sub-pages: no empty navigation column.
html_sidebars = {page: [] for page in ("index", "getting_started", "kernlab", "api",
                                       "benchmarks", "whats_new")}
html_show_sourcelink = False


# The docstrings are numpydoc written as plain text (tests/test_docstrings.py):
# names such as ``X_fit_`` and ``|x - y|`` appear bare, which reStructuredText
# would read as link targets and substitutions.  Escape them before numpydoc
# parses the docstring, except in inline literals, literal blocks and doctests.
_LITERAL = re.compile(r"(``.*?``|`[^`]*`_?)")
_TRAILING_UNDERSCORE = re.compile(r"(?<=[A-Za-z0-9])_(?=$|[^A-Za-z0-9_])")


def _escape_text(text):
    parts = _LITERAL.split(text)
    for i in range(0, len(parts), 2):
        parts[i] = _TRAILING_UNDERSCORE.sub(r"\\_", parts[i].replace("|", "\\|"))
    return "".join(parts)


def _escape_docstring(app, what, name, obj, options, lines):
    literal_indent = None
    doctest = False
    for i, line in enumerate(lines):
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if doctest:
            doctest = bool(stripped)
            continue
        if stripped.startswith(">>>"):
            doctest = True
            continue
        if literal_indent is not None:
            if not stripped or indent > literal_indent:
                continue
            literal_indent = None
        lines[i] = _escape_text(line)
        if stripped.endswith("::"):
            literal_indent = indent


def _benchmark_plots(app):
    make_plots.build(DOCS / "benchmarks" / "data", DOCS / "benchmarks" / "_generated")


def setup(app):
    app.connect("builder-inited", _benchmark_plots)
    app.connect("autodoc-process-docstring", _escape_docstring, priority=100)
