"""Figures of the commands (matplotlib, the optional ``plot`` extra, imported only here
and only when a figure is asked for)."""
import io
import os
import warnings

import numpy as np

from fastkern.cli._common import PLOT_EXTRA, CLIError

# A numeric label column with more distinct values than this is drawn with
# a colour bar; fewer get a legend, one entry per class.
MAX_LEGEND_ENTRIES = 12


def have_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _matplotlib(option):
    try:
        import matplotlib
    except ImportError:
        raise CLIError(f"{option} needs matplotlib: {PLOT_EXTRA}") from None
    matplotlib.use("Agg")
    return matplotlib


def image_format(path, option):
    """The image format matplotlib infers from the extension, checked before any work."""
    matplotlib = _matplotlib(option)
    from matplotlib.backend_bases import FigureCanvasBase

    ext = os.path.splitext(path)[1][1:].lower()
    fmt = ext or matplotlib.rcParams["savefig.format"]
    supported = FigureCanvasBase.get_supported_filetypes()
    if fmt not in supported:
        raise CLIError(f"{option} {path}: unknown image format {fmt!r} "
                       f"(use one of {', '.join(sorted(supported))})")
    return fmt


def pyplot():
    _matplotlib("a figure")
    import matplotlib.pyplot as plt

    return plt


def _unique_in_order(values):
    try:
        return sorted(set(values.tolist()), key=lambda v: (float(v), v))
    except ValueError:
        return sorted(set(values.tolist()))


def _numeric(labels):
    try:
        return np.asarray(labels, dtype=np.float64)
    except ValueError:
        return None


def scatter(fig, ax, Z, labels, title, xlabel, ylabel, label_title=None, order=None):
    """Points coloured by label: a legend for a few classes, a colour bar for a
    numeric label with many values (a legend of hundreds of entries would not fit)."""
    if labels is None:
        ax.scatter(Z[:, 0], Z[:, 1], s=14, alpha=0.8, edgecolors="none")
    else:
        labels = np.asarray(labels)
        values = _numeric(labels)
        classes = _unique_in_order(labels) if order is None else list(order)
        if values is not None and len(classes) > MAX_LEGEND_ENTRIES:
            points = ax.scatter(Z[:, 0], Z[:, 1], c=values, cmap="viridis", s=16, alpha=0.85,
                                edgecolors="none")
            fig.colorbar(points, ax=ax, label=label_title)
        else:
            for k, value in enumerate(classes):
                mask = labels == value
                ax.scatter(Z[mask, 0], Z[mask, 1], s=16, alpha=0.85, label=str(value),
                           color=f"C{k % 10}", edgecolors="white", linewidths=0.3)
            if len(classes) <= MAX_LEGEND_ENTRIES:
                ax.legend(title=label_title, fontsize="small", title_fontsize="small",
                          framealpha=0.85)
            else:
                ax.text(0.99, 0.01, f"{len(classes)} classes of {label_title}",
                        transform=ax.transAxes, ha="right", va="bottom", fontsize="small")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.25)


def _metadata(fmt):
    # PDF and SVG embed the creation date unless told not to; without it the
    # same data give the same bytes.
    if fmt == "pdf":
        return {"CreationDate": None}
    if fmt == "svg":
        return {"Date": None}
    return None


def save(fig, out):
    """Lay out and write the figure to the reserved output; matplotlib's layout
    warnings are its business, not the user's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fig.tight_layout()
    with warnings.catch_warnings():
        # matplotlib warns when placing a loc="best" legend took over a second,
        # which a busy machine alone can cause; the figure is right either way.
        warnings.filterwarnings("ignore", message='Creating legend with loc="best"',
                                category=UserWarning)
        # Drawn in memory, then written in one go: some formats (PDF) seek in
        # their file, which a FIFO or a pipe cannot do.
        image = io.BytesIO()
        fig.savefig(image, dpi=120, format=out.format, metadata=_metadata(out.format))
    with out.open(binary=True) as f:
        f.write(image.getbuffer())
