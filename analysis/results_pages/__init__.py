"""The results pages that analysis/render_results.py renders, one module per page (see its docstring)."""
