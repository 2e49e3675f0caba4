"""CUDA-event timing shared by the PyTorch peers: warm-up, then the median of many runs, and
the benchmark's L2 policy (how many copies of an input to rotate through)."""
import statistics

import torch

# attention_bench's rule (kRotationBytes, kMaxRotation): a cache under 200 MiB could stay in
# the 60 MB L2 between calls, so successive calls cycle through enough copies for ≥ 200 MiB.
ROTATION_BYTES = 200 << 20
MAX_ROTATION = 32


def rotation_copies(cache_bytes):
    """Copies of a cache of `cache_bytes` that successive calls rotate through."""
    if cache_bytes >= ROTATION_BYTES:
        return 1
    return min(MAX_ROTATION, max(2, -(-ROTATION_BYTES // cache_bytes)))


def median_event_us(fn, warmup, reps):
    """Median µs of fn() between two CUDA events, after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
             for _ in range(reps)]
    for start, stop in pairs:
        start.record()
        fn()
        stop.record()
    torch.cuda.synchronize()
    return statistics.median(1000.0 * start.elapsed_time(stop) for start, stop in pairs)


def median_graph_us(launch, calls, reps):
    """Captures launch(0), …, launch(calls − 1) into one CUDA graph (launch(i) may rotate
    inputs); returns the median µs per call of its replays."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm up off the capture, as torch.cuda.graphs requires
        for i in range(3):
            launch(i)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            launch(i)
    return median_event_us(graph.replay, 2, reps) / calls
