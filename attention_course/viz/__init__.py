"""Pictures of attention: heat maps of the weights, as images and as text."""

from .heatmap import alignment_text, plot_alignment, save_alignments

__all__ = ["alignment_text", "plot_alignment", "save_alignments"]

from .explorer import AttentionExplorer, attention_explorer  # noqa: E402

__all__ += ["AttentionExplorer", "attention_explorer"]
