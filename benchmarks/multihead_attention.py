"""Multi-head self-attention forward+backward: the NumPy track's hand-written layer against torch's CPU autograd.

Shapes N=32, T=64, d_model=256, h=8, float32, self-attention without a mask (and, second, with the
decoder's causal mask). In the same run, with the same thread count: the NumPy track's
``MultiHeadAttention`` (forward, then its hand-written backward), ``torch.nn.MultiheadAttention``
(forward, then autograd) and the torch track's ``MultiHeadAttention`` (``F.scaled_dot_product_attention``,
then autograd). Each is also put against this machine's own large matrix product (GFLOP/s of a
2048 x 2048 float32 product, NumPy's BLAS for NumPy, torch's for torch).

    .venv/bin/python benchmarks/multihead_attention.py

Goal (issue 13): the NumPy layer within 2x of torch.nn.MultiheadAttention's time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np
import torch
from threadpoolctl import threadpool_info, threadpool_limits

from _timing import time_call
from attention_course.numpy_track.transformer import MultiHeadAttention as NumpyMultiHeadAttention
from attention_course.torch_track.transformer import MultiHeadAttention as TorchMultiHeadAttention


def matmul_gflops(size: int = 2048) -> tuple[float, float]:
    """GFLOP/s of a size x size float32 product: NumPy's, torch's."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((size, size)).astype(np.float32) for _ in range(2))
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    flops = 2 * size ** 3
    return (flops / time_call(lambda: a @ b, repeats=3, min_seconds=0.3) / 1e9,
            flops / time_call(lambda: ta @ tb, repeats=3, min_seconds=0.3) / 1e9)


def flop_count(N: int, T: int, d: int) -> float:
    """Forward: four (N T x d x d) projections and two (T x T x d_k) products per head; backward twice that."""
    forward = 4 * 2 * N * T * d * d + 2 * 2 * N * T * T * d
    return 3 * forward


def torch_reference(ours: NumpyMultiHeadAttention) -> torch.nn.MultiheadAttention:
    """torch.nn.MultiheadAttention with the NumPy layer's weights (float32)."""
    p = {name: torch.from_numpy(value) for name, value in ours.params.items()}
    reference = torch.nn.MultiheadAttention(ours.d_model, ours.num_heads, batch_first=True)
    with torch.no_grad():
        reference.in_proj_weight.copy_(torch.cat([p["W_q"], p["W_k"], p["W_v"]], dim=1).T)
        reference.in_proj_bias.copy_(torch.cat([p["b_q"], p["b_k"], p["b_v"]]))
        reference.out_proj.weight.copy_(p["W_o"].T)
        reference.out_proj.bias.copy_(p["b_o"])
    return reference


def measure(N: int, T: int, d: int, heads: int, causal: bool) -> dict:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, T, d)).astype(np.float32)
    d_out = rng.standard_normal((N, T, d)).astype(np.float32)
    ours = NumpyMultiHeadAttention(d, heads, rng=0, dtype=np.float32)
    reference = torch_reference(ours)
    track = TorchMultiHeadAttention(d, heads, rng=0)
    x_t, d_out_t = torch.from_numpy(x).requires_grad_(), torch.from_numpy(d_out)
    mask = torch.ones(T, T, dtype=torch.bool).triu(1) if causal else None  # torch.nn: True = leave out

    def numpy_step():
        ours.forward(x, causal=causal)
        ours.backward(d_out)

    def nn_step():
        out, _ = reference(x_t, x_t, x_t, attn_mask=mask, need_weights=False)
        out.backward(d_out_t)
        x_t.grad = None

    def track_step():
        track(x_t, causal=causal).backward(d_out_t)
        x_t.grad = None

    # Same answer first: a speed of a wrong result is worth nothing.
    out = ours.forward(x, causal=causal)
    expected, _ = reference(x_t, x_t, x_t, attn_mask=mask, need_weights=False)
    np.testing.assert_allclose(out, expected.detach().numpy(), rtol=1e-3, atol=1e-4)
    ours.backward(d_out)
    expected.backward(d_out_t)
    np.testing.assert_allclose(ours.grads["W_o"], reference.out_proj.weight.grad.T.numpy(), rtol=1e-3, atol=1e-3)
    x_t.grad = None
    seconds = {"numpy": time_call(numpy_step), "torch_nn": time_call(nn_step), "torch_track": time_call(track_step)}
    flops = flop_count(N, T, d)
    result = {f"{name}_ms": value * 1e3 for name, value in seconds.items()}
    result.update({f"{name}_gflops": flops / value / 1e9 for name, value in seconds.items()})
    result["numpy_over_torch_nn"] = seconds["numpy"] / seconds["torch_nn"]
    result["numpy_over_torch_track"] = seconds["numpy"] / seconds["torch_track"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--N", type=int, default=32)
    parser.add_argument("--T", type=int, default=64)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--out", type=Path, help="also write the results here as JSON (the book reads "
                                                 "book/results/multihead_attention.json)")
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} CPUs)")
    blas = [f"{info.get('internal_api')} {info.get('version')} ({info.get('num_threads')} threads)"
            for info in threadpool_info() if info.get("user_api") == "blas"]
    print(f"NumPy BLAS: {'; '.join(blas) or 'unknown'}; torch {torch.__version__} ({torch.get_num_threads()} threads)")
    print(f"shapes: N={args.N} T={args.T} d_model={args.d_model} h={args.heads} float32, forward+backward")
    default_threads = torch.get_num_threads()
    results = {}
    for label, threads in (("default threads", None), ("1 thread", 1)):
        torch.set_num_threads(threads or default_threads)
        with threadpool_limits(threads):  # None: leave NumPy's thread count as it is
            numpy_peak, torch_peak = matmul_gflops()
            for causal in (False, True):
                r = measure(args.N, args.T, args.d_model, args.heads, causal)
                r["numpy_matmul_gflops"], r["torch_matmul_gflops"] = numpy_peak, torch_peak
                r["numpy_share_of_matmul"] = r["numpy_gflops"] / numpy_peak
                r["torch_nn_share_of_matmul"] = r["torch_nn_gflops"] / torch_peak
                key = f"{label}, {'causal' if causal else 'no mask'}"
                results[key] = r
                print(f"[{key}] NumPy {r['numpy_ms']:.1f} ms, torch.nn.MultiheadAttention {r['torch_nn_ms']:.1f} ms, "
                      f"torch track (SDPA) {r['torch_track_ms']:.1f} ms: NumPy / torch.nn = "
                      f"{r['numpy_over_torch_nn']:.2f} (goal <= 2); NumPy {r['numpy_gflops']:.1f} GFLOP/s = "
                      f"{100 * r['numpy_share_of_matmul']:.0f}% of its matmul's {numpy_peak:.1f}; torch.nn "
                      f"{100 * r['torch_nn_share_of_matmul']:.0f}% of torch's {torch_peak:.1f}")
    torch.set_num_threads(default_threads)
    if args.out is not None:
        command = "benchmarks/multihead_attention.py " + " ".join(sys.argv[1:])
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"command": command.strip(), "load_average_before": [round(x, 2) for x in load],
                                        "cpus": os.cpu_count(), "torch": torch.__version__,
                                        "numpy": np.__version__, "results": results}, indent=1) + "\n")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
