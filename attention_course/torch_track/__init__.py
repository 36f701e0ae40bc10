"""The torch track: the course's layers as device-agnostic ``nn.Module``s.

Same module names, class names, parameter names, layouts and initial values as the NumPy
track, built from the same neutral core (``attention_course.core``); it imports nothing of
``numpy_track`` or ``testing``. ``attention_course.convert`` copies weights between the tracks.
Nothing here picks a device: build on the CPU, then ``.to("cuda")``.
"""

from ..core.configs import Seq2seqConfig
from .attention import (SCORE_FUNCTIONS, AdditiveScore, Attention, AttentionWeight, DotScore, GeneralScore,
                        ScaledDotScore, TimeAttention, WeightSum, make_score)
from .decoding import greedy_decode, greedy_translate
from .hard_attention import HardAttention
from .functional import scaled_dot_product_attention, scaled_dot_product_attention_reference
from .layers import Affine, Embedding, Softmax, SoftmaxCrossEntropy, masked_softmax, softmax
from .local_attention import LocalAttention
from .recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, Recurrent, RNNCell
from .seq2seq import (AttentionDecoder, AttentionEncoder, AttentionSeq2seq, BahdanauDecoder, Bridge, Decoder, Encoder,
                      Seq2seq, build_model, make_attention, make_recurrent)
from .ntm import NTM, LSTMBaseline, SigmoidCrossEntropy
from .wrappers import Bidirectional, Residual, Stacked
from .captioning import CaptionDecoder, GridAttention, CNNCaptioner, ConvEncoder
from .classifier import BinaryCrossEntropy, SequenceClassifier
from .memory import MemN2N
from .reader import AttentiveReader
from .kernel_regression import KernelRegression
from .pooling import AttentionPooling, LastStatePooling, MeanPooling
from .transformer import LayerNorm, MultiHeadAttention, TransformerSeq2seq

__all__ = [
    "KernelRegression", "AttentionPooling", "BinaryCrossEntropy", "CaptionDecoder", "GridAttention", "LastStatePooling", "MeanPooling", "MemN2N",
    "AttentiveReader", "SequenceClassifier", "CNNCaptioner", "ConvEncoder",
    "BahdanauDecoder", "HardAttention", "LocalAttention", "make_attention",
    "LSTMBaseline", "LayerNorm", "MultiHeadAttention", "NTM", "SigmoidCrossEntropy", "TransformerSeq2seq",
    "SCORE_FUNCTIONS", "AdditiveScore", "Affine", "Attention", "AttentionDecoder", "AttentionEncoder",
    "AttentionSeq2seq", "AttentionWeight", "Bidirectional", "Bridge", "Decoder", "DotScore", "Embedding", "Encoder",
    "GRU", "GRUCell", "GeneralScore", "LSTM", "LSTMCell", "RNN", "RNNCell", "Recurrent", "Residual",
    "ScaledDotScore", "Seq2seq", "Seq2seqConfig", "Softmax", "SoftmaxCrossEntropy", "Stacked", "TimeAttention",
    "WeightSum", "build_model", "greedy_decode", "greedy_translate", "make_recurrent", "make_score",
    "masked_softmax", "scaled_dot_product_attention", "scaled_dot_product_attention_reference", "softmax",
]
