"""Pictures of attention: heat maps of the weights, as images and as text; curves over seeds."""

from .curves import line_style, plot_over_seeds
from .heatmap import alignment_text, plot_alignment, save_alignments

__all__ = ["alignment_text", "line_style", "plot_alignment", "plot_over_seeds", "save_alignments"]

from .explorer import AttentionExplorer, attention_explorer  # noqa: E402

__all__ += ["AttentionExplorer", "attention_explorer"]
