"""What the Python layer costs over the C++ calls underneath it.

Eager: the host time of one call through
  direct   turbodecode._turbodecode.<op> (the nanobind binding: the C++ call plus the
           conversion of its arguments),
  op       torch.ops.turbodecode.<op>.default (torch's dispatcher, then the C++ kernel of
           libturbodecode_torch.so, or the binding where the operators are registered from
           Python: printed as "operators"),
  api      turbodecode.<op> (the Python function users call, outputs given: in eager mode on
           plain tensors it skips the dispatcher and calls the binding; under torch.compile it
           emits the op).
The target (issue 19) is op - direct <= 5 us (and api - direct, what an eager user pays).
Each call is timed alone, on an idle GPU (synchronised before it), the three paths taking
turns, and the median over EAGER_CALLS calls is reported: the time of one path never includes
a kernel that the call before it left running. run_decode on CUDA copies the query indices to
the host to check them, the same round trip on every path; hc_pre's time is its host issue
time.

CUDA graph: the same run_decode calls captured through the op and through the binding, replayed;
the kernel time per call must be the same, and the C++ benchmark's (attention_bench, the same
shape) is the reference.

    python bench/python_overhead.py [--device cuda|cpu] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

import turbodecode as td
from turbodecode import _turbodecode as binding

EAGER_CALLS = 1000  # timed eager calls per path
GRAPH_CALLS = 200  # calls captured in one CUDA graph
REPEATS = 7  # graph replays


def host_times_us(device: str, paths: dict) -> dict:
    """Median host time of one call per path: each call alone on an idle device, the paths
    taking turns so that drift in clocks or caches affects them alike."""
    times = {name: [] for name in paths}
    for _ in range(EAGER_CALLS):
        for name, call in paths.items():
            if device == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            call()
            times[name].append((time.perf_counter() - start) * 1e6)
    if device == "cuda":
        torch.cuda.synchronize()
    return {name: float(np.median(t)) for name, t in times.items()}


def decode_problem(device: str, length: int, head_dim: int, n_heads: int, n_kv_heads: int):
    config = td.KvCacheConfig(slots=1, n_kv_heads=n_kv_heads, capacity=length, head_dim=head_dim,
                              v_format="tq8", device=device)
    cache = td.KvCache(config, backend="torch")
    cache.k.normal_()  # any rows do: the time does not depend on the values
    cache.v.random_(0, 256)
    cache.v_norms.fill_(16.0)
    plan = td.plan_decode(config, td.DecodeOptions(n_heads=n_heads), max_queries=1)
    q = torch.randn(1, n_heads, head_dim, device=device)
    slots = torch.zeros(1, dtype=torch.int32, device=device)
    seq_pos = torch.full((1,), length - 1, dtype=torch.int32, device=device)
    out = torch.empty(1, n_heads, head_dim, device=device)
    workspace = torch.zeros(plan.workspace_bytes, dtype=torch.uint8, device=device)
    args = (plan.key, cache.k, cache.k_norms, cache.v, cache.v_norms, None, q, slots, seq_pos,
            out, None, workspace)
    paths = {
        "direct": lambda: binding.run_decode(*args),
        "op": lambda: torch.ops.turbodecode.run_decode.default(*args),
        "api": lambda: td.run_decode(plan, cache, q, slots, seq_pos, out=out,
                                     workspace=workspace),
    }
    return paths


def hc_pre_problem(device: str, rows: int):
    params = td.HcParams(n_hc=4, embd=4096)
    plan = td.plan_hc_pre(params, max_rows=rows, device=device)
    x = torch.randn(rows, 4, 4096, device=device)
    weight = (torch.randn(params.mix_width, 4 * 4096, device=device) * 0.01).half()
    scale, base = torch.ones(3, device=device), torch.zeros(params.mix_width, device=device)
    norm_weight = torch.ones(4096, device=device)
    mix, split = (torch.empty(rows, params.mix_width, device=device) for _ in range(2))
    collapsed, normed = (torch.empty(rows, 4096, device=device) for _ in range(2))
    workspace = torch.zeros(max(plan.workspace_bytes, 1), dtype=torch.uint8, device=device)
    workspace = workspace if plan.workspace_bytes else None
    args = (plan.key, x, weight, scale, base, norm_weight, mix, split, collapsed, normed,
            workspace)
    return {
        "direct": lambda: binding.hc_pre(*args),
        "op": lambda: torch.ops.turbodecode.hc_pre.default(*args),
        "api": lambda: td.hc_pre(plan, x, weight, scale, base, norm_weight, mix, split,
                                 collapsed, normed, workspace),
    }


def graph_time_us(call) -> float:
    """Kernel time per call of GRAPH_CALLS calls captured in one CUDA graph (median of REPEATS)."""
    call()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(GRAPH_CALLS):
            call()
    graph.replay()
    times = []
    for _ in range(REPEATS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / GRAPH_CALLS)
    return float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    operators = "C++" if td._torch_ops.NATIVE else "Python"
    results = {"device": args.device, "torch": torch.__version__, "operators": operators,
               "eager_calls": EAGER_CALLS, "graph_calls": GRAPH_CALLS, "eager": {}, "graph": {}}

    problems = {
        "run_decode D256 16/8 L4096 tq8": decode_problem(args.device, 4096, 256, 16, 8),
        "run_decode D512 16/2 L4096 tq8": decode_problem(args.device, 4096, 512, 16, 2),
        "hc_pre T1": hc_pre_problem(args.device, 1),
    }
    print(f"eager host time per call, us ({args.device}, torch {torch.__version__}, "
          f"operators registered in {operators})")
    print(f"{'problem':34} {'direct':>8} {'op':>8} {'api':>8} {'op-direct':>10} "
          f"{'api-direct':>11}")
    for name, paths in problems.items():
        for call in paths.values():
            call()  # warm-up: plans, first launches, lazy imports
        t = host_times_us(args.device, paths)
        results["eager"][name] = t
        print(f"{name:34} {t['direct']:8.2f} {t['op']:8.2f} {t['api']:8.2f} "
              f"{t['op'] - t['direct']:10.2f} {t['api'] - t['direct']:11.2f}")

    if args.device == "cuda":
        print("\nCUDA graph, kernel time per call, us (the same kernels; compare attention_bench)")
        print(f"{'problem':34} {'direct':>8} {'op':>8} {'api':>8}")
        for name, paths in problems.items():
            t = {path: graph_time_us(call) for path, call in paths.items()}
            results["graph"][name] = t
            print(f"{name:34} {t['direct']:8.2f} {t['op']:8.2f} {t['api']:8.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
