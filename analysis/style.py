"""Figure conventions shared by every analysis figure: Agg backend, sizes, saving as PNG + PDF."""
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (backend must be chosen first)

plt.rcParams.update({
    "figure.dpi": 110,
    "savefig.dpi": 150,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
    "font.size": 10,
})

# One colour per run within a study, stable across figures (tab10 order).
RUN_COLOURS = plt.rcParams["axes.prop_cycle"].by_key()["color"]


def save(fig, out_dir, name, tight=True):
    """Writes OUT_DIR/NAME.png and OUT_DIR/NAME.pdf (tight layout unless the caller laid it out); returns the PNG."""
    os.makedirs(out_dir, exist_ok=True)
    if tight:
        fig.tight_layout()
    png = os.path.join(out_dir, name + ".png")
    fig.savefig(png)
    fig.savefig(os.path.join(out_dir, name + ".pdf"))
    plt.close(fig)
    return png
