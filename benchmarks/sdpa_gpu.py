"""The course's scaled-dot attention against ``F.scaled_dot_product_attention`` on a GPU.

Shape (batch 16, 8 heads, 1024 positions, head width 64), bfloat16, forward+backward, with and
without a padding mask; timed with CUDA events (median of repeats) in the same run. Also the
from-scratch version (the one to read), and the course's ``TimeAttention(score="scaled_dot")``
module in its fast path.

    python3 benchmarks/sdpa_gpu.py

Goal (issue 3): the course's attention within 1.1x of ``F.scaled_dot_product_attention``.
"""

from __future__ import annotations

import json
import statistics

import torch
import torch.nn.functional as F

from attention_course.torch_track import TimeAttention, scaled_dot_product_attention, \
    scaled_dot_product_attention_reference


def cuda_time(fn, repeats: int = 30, inner: int = 10) -> float:
    """Median milliseconds per call, CUDA events around ``inner`` calls."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) / inner)
    return statistics.median(samples)


def main() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("sdpa_gpu.py needs a CUDA GPU (run it on the device machine)")
    B, h, T, d = 16, 8, 1024, 64
    device, dtype = "cuda", torch.bfloat16
    generator = torch.Generator(device=device).manual_seed(0)
    q, k, v = (torch.randn(B, h, T, d, device=device, dtype=dtype, generator=generator).requires_grad_()
               for _ in range(3))
    grad = torch.randn(B, h, T, d, device=device, dtype=dtype, generator=generator)
    lengths = torch.randint(T // 2, T + 1, (B,), device=device, generator=generator)
    mask = (torch.arange(T, device=device)[None, :] < lengths[:, None])[:, None, None, :]  # (B, 1, 1, T)

    def fwd_bwd(attention):
        def run():
            out = attention()
            torch.autograd.backward(out, grad)
        return run

    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "shape": [B, h, T, d],
               "dtype": "bfloat16"}
    for label, m in (("no mask", None), ("padding mask", mask)):
        torch_ms = cuda_time(fwd_bwd(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=m)))
        ours_ms = cuda_time(fwd_bwd(lambda: scaled_dot_product_attention(q, k, v, m)))
        reference_ms = cuda_time(fwd_bwd(lambda: scaled_dot_product_attention_reference(q, k, v, m)[0]), repeats=10)
        results[label] = {"F.sdpa_ms": torch_ms, "course_ms": ours_ms, "ratio": ours_ms / torch_ms,
                          "from_scratch_ms": reference_ms}
        print(f"[{label}] F.scaled_dot_product_attention {torch_ms:.3f} ms, course {ours_ms:.3f} ms: "
              f"ratio {ours_ms / torch_ms:.3f} (goal <= 1.10); from scratch {reference_ms:.3f} ms")
        with torch.no_grad():
            expected = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
            got = scaled_dot_product_attention(q, k, v, m)
            assert torch.allclose(expected.float(), got.float(), atol=2e-2), "the course's attention differs"

    # The module, one head: (N, T_dec, H) queries over (N, T_enc, H) keys/values.
    module = TimeAttention("scaled_dot", d * h, d * h).to(device=device, dtype=dtype)
    encoder = torch.randn(B, T, d * h, device=device, dtype=dtype, generator=generator).requires_grad_()
    decoder = torch.randn(B, T, d * h, device=device, dtype=dtype, generator=generator).requires_grad_()
    grad2 = torch.randn(B, T, d * h, device=device, dtype=dtype, generator=generator)
    source_mask = mask[:, 0, 0, :]
    module_ms = cuda_time(lambda: torch.autograd.backward(
        module(encoder, decoder, source_mask, need_weights=False), grad2))
    direct_ms = cuda_time(lambda: torch.autograd.backward(
        F.scaled_dot_product_attention(decoder, encoder, encoder, attn_mask=source_mask[:, None, :]), grad2))
    results["TimeAttention module"] = {"module_ms": module_ms, "F.sdpa_ms": direct_ms, "ratio": module_ms / direct_ms}
    print(f"[TimeAttention(scaled_dot), (16, 1024, 512)] module {module_ms:.3f} ms vs F.sdpa {direct_ms:.3f} ms: "
          f"ratio {module_ms / direct_ms:.3f}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
