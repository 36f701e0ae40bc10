"""Pictures of attention: heat maps of the weights, as images and as text; curves over seeds; the weights
over a text's words; the Transformer's sinusoidal positions."""

from .curves import line_style, plot_over_seeds
from .heatmap import alignment_text, plot_alignment, save_alignments
from .positions import plot_position_columns, plot_position_similarity
from .words import plot_word_weights

__all__ = ["alignment_text", "line_style", "plot_alignment", "plot_over_seeds", "plot_position_columns",
           "plot_position_similarity", "plot_word_weights", "save_alignments"]

from .explorer import AttentionExplorer, attention_explorer  # noqa: E402

__all__ += ["AttentionExplorer", "attention_explorer"]
