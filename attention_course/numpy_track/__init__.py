"""The NumPy track: every layer with a hand-written backward pass.

The layer protocol (see ``base``): ``params``/``grads`` dicts keyed by name, ``forward``,
``backward``, gradients written in place. It stands on ``attention_course.core`` (configs,
registries, initial values, shape checks) and imports nothing of ``torch_track`` or ``testing``.
"""

from ..core.configs import Seq2seqConfig
from .attention import (SCORE_FUNCTIONS, AdditiveScore, Attention, AttentionWeight, DotScore, GeneralScore,
                        ScaledDotScore, TimeAttention, WeightSum, make_score)
from .base import Layer
from .decoding import greedy_decode, greedy_translate
from .hard_attention import HardAttention
from .layers import Affine, Embedding, Softmax, SoftmaxCrossEntropy, masked_softmax, softmax, softmax_backward
from .optim import SGD, Adam, clip_grad_norm
from .local_attention import LocalAttention
from .recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, Recurrent, RNNCell
from .seq2seq import (AttentionDecoder, AttentionEncoder, AttentionSeq2seq, BahdanauDecoder, Bridge, Decoder, Encoder,
                      Seq2seq, build_model, make_attention, make_recurrent)
from .ntm import NTM, LSTMBaseline, SigmoidCrossEntropy
from .wrappers import Bidirectional, Residual, Stacked
from .captioning import CaptionDecoder, GridAttention
from .classifier import BinaryCrossEntropy, SequenceClassifier
from .memory import MemN2N
from .reader import AttentiveReader
from .kernel_regression import KernelRegression
from .pooling import AttentionPooling, LastStatePooling, MeanPooling
from .transformer import LayerNorm, MultiHeadAttention, TransformerSeq2seq

__all__ = [
    "KernelRegression", "AttentionPooling", "BinaryCrossEntropy", "CaptionDecoder", "GridAttention", "LastStatePooling", "MeanPooling", "MemN2N",
    "AttentiveReader", "SequenceClassifier",
    "BahdanauDecoder", "HardAttention", "LocalAttention", "make_attention",
    "LSTMBaseline", "LayerNorm", "MultiHeadAttention", "NTM", "SigmoidCrossEntropy", "TransformerSeq2seq",
    "SCORE_FUNCTIONS", "Adam", "AdditiveScore", "Affine", "Attention", "AttentionDecoder", "AttentionEncoder",
    "AttentionSeq2seq", "AttentionWeight", "Bidirectional", "Bridge", "Decoder", "DotScore", "Embedding", "Encoder",
    "GRU", "GRUCell", "GeneralScore", "LSTM", "LSTMCell", "Layer", "RNN", "RNNCell", "Recurrent", "Residual", "SGD",
    "ScaledDotScore", "Seq2seq", "Seq2seqConfig", "Softmax", "SoftmaxCrossEntropy", "Stacked", "TimeAttention",
    "WeightSum", "build_model", "clip_grad_norm", "greedy_decode", "greedy_translate", "make_recurrent",
    "make_score", "masked_softmax", "softmax", "softmax_backward",
]
