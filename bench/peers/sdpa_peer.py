#!/usr/bin/env python3
"""PyTorch SDPA decode attention on F16 K/V: the peer of bench/attention_bench (SPEC §6).

For every shape of `attention_bench --list-shapes` it times one decode step (one query token
per sequence) with each SDPA backend that accepts the shape: flash, cuDNN and memory-efficient;
math only where none of those runs. GQA: enable_gqa=True first (K/V keep their KV heads, so the
peer reads the same K/V bytes as we do); only when a backend refuses that, K/V are expanded to
the query heads beforehand (not timed; the run is marked "expanded" and reads more bytes).
The mixed batch (different lengths per row) runs one SDPA call per row, since SDPA has no
ragged decode path. Timing: CUDA events, warm-up, median, eager and CUDA-graph replay, caches
rotated so that ≥ 200 MB of K/V are cycled (inputs larger than L2).

    sdpa_peer.py --shapes shapes.json --json peer.json [--quick]
"""
import argparse
import json
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from cuda_timing import median_event_us, median_graph_us, rotation_copies

FUSED_BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
}


class DecodeInputs:
    """Rotated copies of q, K, V for one shape; `step(i, backend)` runs decode on copy i."""

    def __init__(self, shape, expanded):
        self.shape = shape
        self.expanded = expanded
        d, hq, hkv = shape["head_dim"], shape["n_heads"], shape["n_kv_heads"]
        kv_heads = hq if expanded else hkv
        kv_bytes = 2 * 2 * kv_heads * d * sum(shape["lengths"])
        self.bytes = kv_bytes + 2 * 2 * hq * d * len(shape["lengths"])
        self.copies = []
        for _ in range(rotation_copies(kv_bytes)):
            if shape["mixed"]:
                rows = [self._tensors(1, length, hq, kv_heads, d) for length in shape["lengths"]]
            else:
                rows = [self._tensors(len(shape["lengths"]), shape["max_length"], hq, kv_heads, d)]
            self.copies.append(rows)

    @staticmethod
    def _tensors(batch, length, hq, kv_heads, d):
        q = torch.randn(batch, hq, 1, d, device="cuda", dtype=torch.float16)
        k = torch.randn(batch, kv_heads, length, d, device="cuda", dtype=torch.float16)
        v = torch.randn(batch, kv_heads, length, d, device="cuda", dtype=torch.float16)
        return q, k, v

    def step(self, i):
        for q, k, v in self.copies[i % len(self.copies)]:
            F.scaled_dot_product_attention(q, k, v, enable_gqa=not self.expanded)


def time_backend(shape, name, backend, args):
    """Times one backend, trying enable_gqa first and expanded K/V heads second."""
    errors = []
    for expanded in (False, True):
        inputs = None
        try:
            inputs = DecodeInputs(shape, expanded)
            counter = iter(range(1 << 30))
            with sdpa_kernel(backend):
                step = lambda: inputs.step(next(counter))
                step()
                torch.cuda.synchronize()
                eager_us = median_event_us(step, args.warmup, args.reps)
                try:
                    graph_us = median_graph_us(lambda _: step(), max(len(inputs.copies), 8),
                                               args.reps)
                except Exception as e:  # some backends refuse capture; eager still counts
                    graph_us, errors = None, errors + [f"graph: {e}".splitlines()[0]]
            best = min(us for us in (eager_us, graph_us) if us is not None)
            return {"backend": name, "gqa": "expanded" if expanded else "enable_gqa",
                    "eager_us": eager_us, "graph_us": graph_us, "best_us": best,
                    "bytes": inputs.bytes, "gbps": inputs.bytes / (best * 1e3),
                    "rotated_copies": len(inputs.copies), "notes": errors}
        except Exception as e:
            errors.append(f"{'expanded' if expanded else 'enable_gqa'}: {e}".splitlines()[0])
        finally:
            inputs = None  # frees this attempt's tensors before the next one allocates
            torch.cuda.empty_cache()
    return {"backend": name, "error": "; ".join(errors)}


def run_shape(shape, args):
    runs = [time_backend(shape, name, backend, args) for name, backend in FUSED_BACKENDS.items()]
    ok = [r for r in runs if "error" not in r]
    if not ok:
        runs.append(time_backend(shape, "math", SDPBackend.MATH, args))
        ok = [r for r in runs if "error" not in r]
    result = dict(shape)
    result["runs"] = runs
    result["best"] = min(ok, key=lambda r: r["best_us"]) if ok else None
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", required=True, help="JSON from attention_bench --list-shapes")
    parser.add_argument("--json", required=True, help="where to write the results")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    args.warmup, args.reps = (3, 10) if args.quick else (5, 30)
    if not torch.cuda.is_available():
        print("sdpa_peer: no CUDA device", file=sys.stderr)
        return 1
    with open(args.shapes) as f:
        shapes = json.load(f)
    results = []
    print(f"{'shape':<34} {'best us':>9} {'backend':>10} {'gqa':>11} {'GB/s':>7}")
    for shape in shapes:
        result = run_shape(shape, args)
        results.append(result)
        best = result["best"]
        if best:
            print(f"{shape['label']:<34} {best['best_us']:9.1f} {best['backend']:>10} "
                  f"{best['gqa']:>11} {best['gbps']:7.0f}", flush=True)
        else:
            print(f"{shape['label']:<34} no backend ran: "
                  f"{[r.get('error') for r in result['runs']]}", flush=True)
    report = {"peer": "torch.nn.functional.scaled_dot_product_attention",
              "torch": torch.__version__, "device": torch.cuda.get_device_name(),
              "dtype": "float16", "results": results}
    with open(args.json, "w") as f:
        json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
