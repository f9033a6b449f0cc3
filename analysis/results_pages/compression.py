"""docs/results/compression.md: top-k compression."""
from .common import _absent, _load, _prov


def render_topk_compression(results, name="topk_compression.json"):
    """experiments/topk_compression.py: its table and verdict lines, then the provenance."""
    d = _load(results, name)
    if not d:
        return _absent("compress=topk against int8", "run `experiments/topk_compression.py --results " +
                       "experiments/results/%s`" % name)
    return d["markdown"].rstrip() + "\n\n" + _prov(d) + "\n"
