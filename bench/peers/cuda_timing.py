"""CUDA-event timing shared by the PyTorch peers: warm-up, then the median of many runs."""
import statistics

import torch


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
