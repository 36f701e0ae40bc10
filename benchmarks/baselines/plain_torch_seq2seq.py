"""A plain PyTorch seq2seq with additive attention on the dates task.

The reference point of the time-to-accuracy benchmark: the model an engineer would write
with ``torch.nn`` in an afternoon, trained the usual way, so the course's own models can be
compared with something ordinary rather than with a straw man.

    encoder   embedding, then a bidirectional GRU over the packed source (padding skipped)
    decoder   a GRUCell stepped through the target; at step t, with previous state s,
              the attention over the encoder states h_1..h_T_enc is

                  e_j = v^T tanh(W s + U h_j)          (additive, Bahdanau)
                  a   = softmax_j(e_j), padded j masked out
                  c   = sum_j a_j h_j

              then s' = GRUCell([emb(y_prev); c], s) and the logits are Linear([s'; c; emb])
    training  teacher forcing, cross entropy over the real target tokens, Adam, gradient
              clipping
    eval      batched greedy decoding of the whole test set, exact match of the strings

Run it as a script to print one JSON line::

    python benchmarks/baselines/plain_torch_seq2seq.py --seed 0
"""

import argparse
import json
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attention_course.data import build_vocabularies, encode_pairs, generate_dates, iterate_batches


@dataclass
class PlainSeq2SeqConfig:
    """Sizes and optimiser settings of the baseline.

    D: embedding width (source and target), H_enc: encoder GRU width per direction,
    H_dec: decoder GRU width, A: attention width.
    """

    embedding_dim: int = 64
    encoder_hidden: int = 128
    decoder_hidden: int = 256
    attention_dim: int = 128
    lr: float = 3e-3
    clip_norm: float = 1.0


class Encoder(nn.Module):
    """Bidirectional GRU over the source; padded positions are skipped by packing.

    Shapes:
        source:         (N, T_enc) int64
        source_mask:    (N, T_enc) bool, True on real tokens
        encoder_states: (N, T_enc, 2 H_enc), zero at padded positions
        final_state:    (N, 2 H_enc), last forward state and first backward state
    """

    def __init__(self, source_vocab_size, config, pad_id=0):
        super().__init__()
        self.embedding = nn.Embedding(source_vocab_size, config.embedding_dim, padding_idx=pad_id)
        self.gru = nn.GRU(config.embedding_dim, config.encoder_hidden,
                          batch_first=True, bidirectional=True)

    def forward(self, source, source_mask):
        N, T_enc = source.shape
        if source_mask.shape != source.shape:
            raise ValueError(f"source_mask: expected shape {tuple(source.shape)}, "
                             f"got {tuple(source_mask.shape)}")
        lengths = source_mask.sum(dim=1).cpu()
        embedded = self.embedding(source)  # (N, T_enc, D)
        packed = pack_padded_sequence(embedded, lengths, batch_first=True, enforce_sorted=False)
        packed_states, final = self.gru(packed)  # final: (2, N, H_enc)
        encoder_states, _ = pad_packed_sequence(packed_states, batch_first=True,
                                                total_length=T_enc)  # (N, T_enc, 2 H_enc)
        final_state = torch.cat([final[0], final[1]], dim=-1)  # (N, 2 H_enc)
        return encoder_states, final_state


class AdditiveAttention(nn.Module):
    """e_j = v^T tanh(W s + U h_j), softmax over the real source positions, c = sum_j a_j h_j.

    ``U h`` does not depend on the decoder step, so ``project_keys`` computes it once per batch.

    Shapes:
        encoder_states: (N, T_enc, 2 H_enc)   h
        keys:           (N, T_enc, A)         U h
        state:          (N, H_dec)            s
        source_mask:    (N, T_enc) bool
        context:        (N, 2 H_enc)          c
        weights:        (N, T_enc)            a
    """

    def __init__(self, encoder_dim, decoder_dim, attention_dim):
        super().__init__()
        self.W = nn.Linear(decoder_dim, attention_dim, bias=False)
        self.U = nn.Linear(encoder_dim, attention_dim)
        self.v = nn.Linear(attention_dim, 1, bias=False)

    def project_keys(self, encoder_states):
        return self.U(encoder_states)

    def forward(self, state, keys, encoder_states, source_mask):
        scores = self.v(torch.tanh(self.W(state).unsqueeze(1) + keys)).squeeze(-1)  # (N, T_enc)
        scores = scores.masked_fill(~source_mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        context = torch.bmm(weights.unsqueeze(1), encoder_states).squeeze(1)  # (N, 2 H_enc)
        return context, weights


class PlainSeq2Seq(nn.Module):
    """Bidirectional GRU encoder, GRUCell decoder with additive attention.

    Shapes:
        source:        (N, T_enc) int64
        source_mask:   (N, T_enc) bool
        decoder_input: (N, T_dec) int64, BOS then the target
        logits:        (N, T_dec, V_tgt)
    """

    def __init__(self, source_vocab_size, target_vocab_size, config=None, pad_id=0):
        super().__init__()
        config = config or PlainSeq2SeqConfig()
        self.config = config
        encoder_dim = 2 * config.encoder_hidden
        self.encoder = Encoder(source_vocab_size, config, pad_id)
        self.init_state = nn.Linear(encoder_dim, config.decoder_hidden)
        self.embedding = nn.Embedding(target_vocab_size, config.embedding_dim, padding_idx=pad_id)
        self.attention = AdditiveAttention(encoder_dim, config.decoder_hidden, config.attention_dim)
        self.cell = nn.GRUCell(config.embedding_dim + encoder_dim, config.decoder_hidden)
        self.output = nn.Linear(config.decoder_hidden + encoder_dim + config.embedding_dim,
                                target_vocab_size)

    def encode(self, source, source_mask):
        """Return what every decoder step needs: states, their projections, the first s."""
        encoder_states, final_state = self.encoder(source, source_mask)
        keys = self.attention.project_keys(encoder_states)  # (N, T_enc, A)
        state = torch.tanh(self.init_state(final_state))  # (N, H_dec)
        return encoder_states, keys, state

    def step(self, previous_tokens, state, encoder_states, keys, source_mask):
        """One decoder step: returns (logits (N, V_tgt), new state (N, H_dec), weights)."""
        embedded = self.embedding(previous_tokens)  # (N, D)
        context, weights = self.attention(state, keys, encoder_states, source_mask)
        state = self.cell(torch.cat([embedded, context], dim=-1), state)
        logits = self.output(torch.cat([state, context, embedded], dim=-1))
        return logits, state, weights

    def forward(self, source, source_mask, decoder_input):
        """Teacher-forced logits for every target step."""
        encoder_states, keys, state = self.encode(source, source_mask)
        logits = []
        for t in range(decoder_input.shape[1]):
            step_logits, state, _ = self.step(decoder_input[:, t], state, encoder_states, keys,
                                              source_mask)
            logits.append(step_logits)
        return torch.stack(logits, dim=1)  # (N, T_dec, V_tgt)

    @torch.no_grad()
    def greedy_decode(self, source, source_mask, bos_id, eos_id, max_length):
        """Feed back the arg-max token until every row has produced EOS or max_length steps.

        Returns (N, <= max_length) int64; rows are read up to their first EOS.
        """
        N = source.shape[0]
        encoder_states, keys, state = self.encode(source, source_mask)
        tokens = torch.full((N,), bos_id, dtype=torch.long, device=source.device)
        finished = torch.zeros(N, dtype=torch.bool, device=source.device)
        outputs = []
        for _ in range(max_length):
            logits, state, _ = self.step(tokens, state, encoder_states, keys, source_mask)
            tokens = logits.argmax(dim=-1)
            outputs.append(tokens)
            finished |= tokens == eos_id
            if bool(finished.all()):
                break
        return torch.stack(outputs, dim=1)


def to_tensors(batch, device="cpu"):
    """The numpy fields of an encoded batch as torch tensors on ``device``."""
    return {
        "source": torch.from_numpy(np.ascontiguousarray(batch.source)).long().to(device),
        "source_mask": torch.from_numpy(np.ascontiguousarray(batch.source_mask)).bool().to(device),
        "decoder_input": torch.from_numpy(np.ascontiguousarray(batch.decoder_input)).long().to(device),
        "decoder_target": torch.from_numpy(np.ascontiguousarray(batch.decoder_target)).long().to(device),
    }


def train_step(model, optimizer, tensors, pad_id, clip_norm):
    """One teacher-forced Adam step on a batch; returns the mean token cross entropy."""
    model.train()
    logits = model(tensors["source"], tensors["source_mask"], tensors["decoder_input"])
    loss = F.cross_entropy(logits.flatten(0, 1), tensors["decoder_target"].flatten(),
                           ignore_index=pad_id)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    optimizer.step()
    return loss.item()


def exact_match(model, pairs, tensors, tgt_vocab, batch_size=1000):
    """Fraction of pairs whose greedy decoding equals the target string exactly."""
    model.eval()
    max_length = tensors["decoder_target"].shape[1]
    correct = 0
    for start in range(0, len(pairs), batch_size):
        stop = min(start + batch_size, len(pairs))
        decoded = model.greedy_decode(tensors["source"][start:stop],
                                      tensors["source_mask"][start:stop],
                                      tgt_vocab.bos_id, tgt_vocab.eos_id, max_length)
        for ids, (_, target) in zip(decoded.tolist(), pairs[start:stop]):
            correct += tgt_vocab.decode(ids) == target
    return correct / len(pairs)


def train_plain_torch(train_pairs, test_pairs, *, seed=0, target_accuracy=0.99,
                      max_seconds=300.0, max_steps=5000, eval_every=25, batch_size=128,
                      config=None, log=print, device="cpu"):
    """Train the baseline until its test exact match reaches ``target_accuracy``.

    Training stops at the first evaluation (every ``eval_every`` steps) that reaches the
    target, or after ``max_steps`` steps or ``max_seconds`` of training, whichever comes
    first; a run that stops between evaluations is evaluated once more. ``train_seconds``
    is the wall time from the first step to the stop, evaluations included.

    Returns a dict with test_exact_match, train_seconds, steps, reached, final_loss, lr and
    n_parameters.
    """
    config = config or PlainSeq2SeqConfig()
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    src_vocab, tgt_vocab = build_vocabularies(train_pairs + test_pairs)
    train_batch = encode_pairs(train_pairs, src_vocab, tgt_vocab)
    test_tensors = to_tensors(encode_pairs(test_pairs, src_vocab, tgt_vocab), device)

    model = PlainSeq2Seq(len(src_vocab), len(tgt_vocab), config, pad_id=tgt_vocab.pad_id).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)

    def batches():
        while True:
            yield from iterate_batches(len(train_pairs), batch_size, rng)

    steps, loss, accuracy = 0, float("nan"), 0.0
    start = time.perf_counter()
    for indices in batches():
        loss = train_step(model, optimizer, to_tensors(train_batch.subset(indices), device),
                          tgt_vocab.pad_id, config.clip_norm)
        steps += 1
        elapsed = time.perf_counter() - start
        out_of_budget = steps >= max_steps or elapsed >= max_seconds
        if steps % eval_every == 0 or out_of_budget:
            accuracy = exact_match(model, test_pairs, test_tensors, tgt_vocab)
            log(f"step {steps:5d}  loss {loss:.4f}  test exact match {accuracy:.4f}  "
                f"{time.perf_counter() - start:6.1f} s")
            if accuracy >= target_accuracy or out_of_budget:
                break
    train_seconds = time.perf_counter() - start

    return {
        "test_exact_match": accuracy,
        "train_seconds": train_seconds,
        "steps": steps,
        "reached": accuracy >= target_accuracy,
        "final_loss": loss,
        "lr": config.lr,
        "n_parameters": sum(p.numel() for p in model.parameters()),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-train", type=int, default=20000)
    parser.add_argument("--n-test", type=int, default=1000)
    parser.add_argument("--target-accuracy", type=float, default=0.99)
    parser.add_argument("--max-seconds", type=float, default=300.0)
    parser.add_argument("--max-steps", type=int, default=5000)
    parser.add_argument("--lr", type=float, default=PlainSeq2SeqConfig.lr)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)

    train, test = generate_dates(args.n_train, args.n_test, seed=args.seed)
    result = train_plain_torch(
        train, test, seed=args.seed, target_accuracy=args.target_accuracy,
        max_seconds=args.max_seconds, max_steps=args.max_steps,
        config=PlainSeq2SeqConfig(lr=args.lr), device=args.device,
        log=lambda line: print(line, file=sys.stderr, flush=True),
    )
    result.update(seed=args.seed, n_train=args.n_train, n_test=args.n_test, device=args.device)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
