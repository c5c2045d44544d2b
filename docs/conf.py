"""Sphinx configuration for duckdp's reference: `python -m sphinx -W -b html docs docs/_build/html`.

Docstrings are plain reST with `name` for code (default_role = "literal"); Markdown pages (this site's
guides and docs/specs/) go through myst-parser. One page per mechanism is generated at build time from
the public registry by _ext/duckdp_mechanisms.py, with the hand-written symbol tables of
mechanism_symbols.toml.
"""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))          # the checkout's duckdp, not an installed copy
sys.path.insert(0, os.path.join(HERE, "_ext"))

import duckdp  # noqa: E402

project = "duckdp"
release = version = duckdp.__version__
extensions = ["sphinx.ext.autodoc", "myst_parser", "duckdp_mechanisms"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build"]
default_role = "literal"                            # `x` in docstrings is code, as in the README
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"members": True, "show-inheritance": True}
myst_heading_anchors = 3
html_theme = "alabaster"
html_title = f"duckdp {version}"
