"""torch tensors and torch.ops.turbodecode: the same results as numpy, the custom-op contract
(opcheck), torch.compile(fullgraph=True) and CUDA-graph capture, on the CPU and on CUDA."""

from __future__ import annotations

import os

import numpy as np
import pytest
from conftest import TORCH_DEVICES, requires_cuda, requires_torch, torch
from decode_case import DecodeCase
from reference import relative_l2

import turbodecode as td

pytestmark = requires_torch

TOLERANCE = 5e-3


def decode_setup(rng, device: str, length: int = 70, slots: int = 2):
    """A cache on ``device`` ("cpu", "cuda" or "cuda:N") filled with ``length`` tokens."""
    config = td.KvCacheConfig(slots=slots, n_kv_heads=2, capacity=96, v_format="tq8",
                              device=device.split(":")[0])
    case = DecodeCase.make(rng, config, td.DecodeOptions(n_heads=4), length)
    cache = td.KvCache(config, backend="torch", device=device)
    case.fill(cache, lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(device))
    return case, cache


def twin_of(cache: td.KvCache) -> td.KvCache:
    """A copy of a cache's storage, to follow it step by step with eager calls."""
    parts = (cache.k, cache.k_norms, cache.v, cache.v_norms)
    return td.KvCache.from_arrays(cache.config, *(None if p is None else p.clone() for p in parts))


def to_torch(device, *arrays):
    return tuple(torch.from_numpy(a).to(device) for a in arrays)


@pytest.mark.parametrize("device", TORCH_DEVICES)
def test_decode_matches_reference(rng, device):
    case, cache = decode_setup(rng, device)
    q, slots, positions = case.queries(rng, [1, 0, 1], [69, 12, 40])
    plan = td.plan_decode(case.config, case.options, 3)
    out = td.run_decode(plan, cache, *to_torch(device, q, slots, positions))
    assert out.device.type == device and out.shape == (3, 4, 256)
    expected, _ = case.reference(q, slots, positions)
    assert relative_l2(out.cpu().numpy(), expected) <= TOLERANCE


def test_cpu_tensors_give_the_numpy_results_bitwise(rng):
    case, cache = decode_setup(rng, "cpu")
    numpy_cache = td.KvCache(case.config)
    case.fill(numpy_cache)
    np.testing.assert_array_equal(cache.v.numpy(), numpy_cache.v)
    q, slots, positions = case.queries(rng, [1, 0], [69, 33])
    plan = td.plan_decode(case.config, case.options, 2)
    out = td.run_decode(plan, cache, *to_torch("cpu", q, slots, positions))
    np.testing.assert_array_equal(out.numpy(), td.run_decode(plan, numpy_cache, q, slots,
                                                             positions))


@pytest.mark.parametrize("device", TORCH_DEVICES)
def test_bfloat16_and_float8_storage(rng, device):
    """bf16 K/V inputs, and an FP8 cache held as float8_e4m3fn tensors (bytes to the library)."""
    config = td.KvCacheConfig(slots=1, n_kv_heads=2, capacity=8, k_format="fp8", v_format="fp8",
                              device=device)
    cache = td.KvCache(config, backend="torch")
    as_fp8 = td.KvCache.from_arrays(config, cache.k.view(torch.float8_e4m3fn), cache.k_norms,
                                    cache.v.view(torch.float8_e4m3fn), cache.v_norms)
    x = torch.from_numpy(rng.standard_normal((1, 2, 256)).astype(np.float32)).to(device)
    index = torch.zeros(1, dtype=torch.int32, device=device)
    td.append_kv(as_fp8, x.to(torch.bfloat16), x.to(torch.bfloat16), index, index)
    codes, scales = td.encode_rows(td.CodecParams(format="fp8"), x[0].to(torch.bfloat16))
    assert torch.equal(cache.k[0, :, 0], codes) and torch.equal(cache.v_norms[0, :, 0], scales)


@pytest.mark.parametrize("device", TORCH_DEVICES)
def test_strided_views_give_the_numpy_results(rng, device):
    """pre weights sliced out of split rows (strides 24, 1), read in place."""
    params = td.HcParams(n_hc=4, embd=128)
    x = rng.standard_normal((3, 4, 128)).astype(np.float32)
    split = rng.uniform(0.1, 1.0, (3, 24)).astype(np.float32)
    expected = td.hc_collapse(params, x, split[:, :4])
    tx, tsplit = to_torch(device, x, split)
    got = td.hc_collapse(params, tx, tsplit[:, :4]).cpu().numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def opcheck_arguments(rng, device):
    """One call of each operator (its schema order), for torch.library.opcheck."""
    case, cache = decode_setup(rng, device, length=40)
    q, slots, positions = to_torch(device, *case.queries(rng, [0, 1], [39, 20]))
    plan = td.plan_decode(case.config, case.options, 2)
    x = torch.from_numpy(rng.standard_normal((2, 2, 256)).astype(np.float32)).to(device)
    params = td.HcParams(n_hc=4, embd=256)
    hx = torch.from_numpy(rng.standard_normal((2, 4, 256)).astype(np.float32)).to(device)
    mix = torch.from_numpy(rng.standard_normal((2, 24)).astype(np.float32)).to(device)
    scale = torch.ones(3, device=device)
    base = torch.zeros(24, device=device)
    split = torch.rand(2, 24, device=device)
    empty = torch.empty
    codec = td.CodecParams(format="tq8")
    rows = x.reshape(4, 256)
    pre_plan = td.plan_hc_pre(params, max_rows=2, device=device)
    pre_workspace = (torch.zeros(pre_plan.workspace_bytes, dtype=torch.uint8, device=device)
                     if pre_plan.workspace_bytes else None)
    mix_weight = (torch.randn(24, 4 * 256, device=device) * 0.05).half()
    return {
        "append_kv": (case.config.key, cache.k, cache.k_norms, cache.v, cache.v_norms, None,
                      x, x, slots, torch.tensor([40, 40], dtype=torch.int32, device=device)),
        "run_decode": (plan.key, cache.k, cache.k_norms, cache.v, cache.v_norms, None, q, slots,
                       positions, empty(2, 4, 256, device=device), None,
                       torch.zeros(plan.workspace_bytes, dtype=torch.uint8, device=device)),
        "encode_rows": (256, "tq8", 1.0, rows, empty(4, codec.row_bytes, dtype=torch.uint8,
                                                        device=device),
                        empty(4, 1, device=device)),
        "rotate_rows": (256, rows, empty(4, 256, device=device)),
        "hc_split": (params.key, mix, scale, base, split),
        "hc_expand": (params.key, hx[:, 0], None, hx, split[:, 4:8], split[:, 8:].view(2, 4, 4),
                      empty(2, 4, 256, device=device)),
        "hc_pre": (pre_plan.key, hx, mix_weight, scale, base, torch.ones(256, device=device),
                   empty(2, 24, device=device), empty(2, 24, device=device),
                   empty(2, 256, device=device), empty(2, 256, device=device), pre_workspace),
    }


def test_the_operator_library_defines_and_implements_every_operator():
    """With libturbodecode_torch.so in the package, each operator's schema and its kernels are
    the C++ library's (unboxed kernels, registered in library.cpp), not Python ones."""
    from turbodecode import _torch_ops

    if not _torch_ops.OPERATOR_LIBRARY.exists():
        pytest.skip("this build has no operator library: the operators are Python's")
    if os.environ.get("TURBODECODE_TORCH_OPS") == "python":
        pytest.skip("TURBODECODE_TORCH_OPS=python: the operators are Python's")
    assert _torch_ops.NATIVE
    keys = ["CPU"] + (["CUDA"] if torch.cuda.is_available() else [])
    for name in td._turbodecode.OPERATOR_SCHEMAS:
        lines = torch._C._dispatch_dump(f"turbodecode::{name}").splitlines()
        assert any(line.startswith("debug: ") and "library.cpp" in line for line in lines), name
        for key in keys:
            kernel = next(line for line in lines if line.startswith(f"{key}: "))
            assert "library.cpp" in kernel and "unboxed" in kernel, kernel


@pytest.mark.parametrize("device", TORCH_DEVICES)
def test_operator_errors_name_the_argument_and_write_nothing(rng, device):
    """Through torch.ops, InvalidArgument arrives as a ValueError (turbodecode.InvalidArgument
    with the Python registration) and an unsupported dtype as a TypeError, with the library's
    message."""
    case, cache = decode_setup(rng, device, length=40)
    q, slots, positions = to_torch(device, *case.queries(rng, [0, 1], [39, 20]))
    plan = td.plan_decode(case.config, case.options, 2)
    out = torch.full((2, 4, 256), float("nan"), device=device)
    workspace = torch.zeros(plan.workspace_bytes, dtype=torch.uint8, device=device)

    def run(q, slots):
        torch.ops.turbodecode.run_decode(plan.key, cache.k, cache.k_norms, cache.v, cache.v_norms,
                                         None, q, slots, positions, out, None, workspace)

    with pytest.raises(ValueError, match="slot_ids"):
        run(q, slots + 2)
    with pytest.raises(TypeError, match="'q'.*dtype"):
        run(q.double(), slots)
    with pytest.raises(ValueError, match="params"):
        torch.ops.turbodecode.hc_split("n_hc=4", q, q, q, out)
    assert torch.isnan(out).all()


@pytest.mark.parametrize("device", TORCH_DEVICES)
def test_operators_pass_opcheck(rng, device):
    for name, args in opcheck_arguments(rng, device).items():
        torch.library.opcheck(getattr(torch.ops.turbodecode, name).default, args)


def decode_step(plan, cache):
    def step(q, k, v, slots, positions):
        td.append_kv(cache, k, v, slots, positions)
        return td.run_decode(plan, cache, q, slots, positions)

    return step


@pytest.mark.parametrize("device", TORCH_DEVICES)
def test_compiled_step_equals_eager_and_writes_the_cache_in_place(rng, device):
    from torch._inductor.utils import run_and_get_code

    case, cache = decode_setup(rng, device)
    twin = twin_of(cache)
    plan = td.plan_decode(case.config, case.options, 2)
    q, slots, positions = to_torch(device, *case.queries(rng, [0, 1], [70, 70]))
    k, v = (torch.from_numpy(rng.standard_normal((2, 2, 256)).astype(np.float32)).to(device)
            for _ in range(2))
    compiled = torch.compile(decode_step(plan, cache), fullgraph=True)
    out, code = run_and_get_code(compiled, q, k, v, slots, positions)
    expected = decode_step(plan, twin)(q, k, v, slots, positions)
    assert torch.equal(out, expected)
    assert torch.equal(cache.v, twin.v) and torch.equal(cache.k, twin.k)
    assert "copy_" not in "".join(code)  # no copy of the cache back into itself


@requires_cuda
def test_cuda_graph_replays_with_new_positions_and_tokens(rng):
    case, cache = decode_setup(rng, "cuda", length=40)
    twin = twin_of(cache)
    plan = td.plan_decode(case.config, case.options, 2)
    q, slots, positions = to_torch("cuda", *case.queries(rng, [0, 1], [40, 40]))
    k, v = torch.zeros(2, 2, 256, device="cuda"), torch.zeros(2, 2, 256, device="cuda")
    workspace = torch.zeros(plan.workspace_bytes, dtype=torch.uint8, device="cuda")
    out = torch.empty(2, 4, 256, device="cuda")

    def step(target):
        td.append_kv(target, k, v, slots, positions)
        td.run_decode(plan, target, q, slots, positions, out=out, workspace=workspace)

    step(twin)  # warm up on the twin, which then follows the graph's cache step by step
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step(cache)
    for position in range(40, 45):
        positions.fill_(position)
        k.normal_()
        v.normal_()
        q.normal_()
        graph.replay()
        replayed = out.clone()
        step(twin)
        assert torch.equal(replayed, out), f"position {position}"
    torch.cuda.synchronize()
    assert torch.equal(cache.v, twin.v)


@requires_cuda
def test_compile_with_cuda_graphs(rng):
    case, cache = decode_setup(rng, "cuda", length=40)
    plan = td.plan_decode(case.config, case.options, 2)
    step = torch.compile(decode_step(plan, cache), mode="reduce-overhead", fullgraph=True)
    q, slots, _ = to_torch("cuda", *case.queries(rng, [0, 1], [40, 40]))
    for position in range(40, 44):
        k, v = (torch.from_numpy(rng.standard_normal((2, 2, 256)).astype(np.float32)).cuda()
                for _ in range(2))
        case.k = np.concatenate([case.k, k.cpu().numpy()[:, None]], axis=1)
        case.v = np.concatenate([case.v, v.cpu().numpy()[:, None]], axis=1)
        positions = torch.full((2,), position, dtype=torch.int32, device="cuda")
        out = step(q, k, v, slots, positions).clone()
        expected, _ = case.reference(q.cpu().numpy(), slots.cpu().numpy(),
                                     positions.cpu().numpy())
        assert relative_l2(out.cpu().numpy(), expected) <= TOLERANCE


@pytest.mark.skipif(not torch or not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                    reason="needs two CUDA devices")
def test_tensors_on_another_device_than_the_current_one(rng):
    torch.cuda.set_device(0)
    case, cache = decode_setup(rng, "cuda:1")
    q, slots, positions = case.queries(rng, [1, 0], [69, 12])
    plan = td.plan_decode(case.config, case.options, 2)
    out = td.run_decode(plan, cache, *to_torch("cuda:1", q, slots, positions))
    expected, _ = case.reference(q, slots, positions)
    assert out.device.index == 1 and relative_l2(out.cpu().numpy(), expected) <= TOLERANCE


def test_modes_and_fake_tensors_see_the_operators():
    """Plain eager calls skip the dispatcher; dispatch modes and fake tensors still get it."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    x = torch.randn(2, 256)
    with Recorder() as recorder:
        td.rotate_rows(256, x)
    assert "turbodecode.rotate_rows.default" in recorder.ops
    with FakeTensorMode():
        y = td.rotate_rows(256, torch.empty(2, 256))  # the fake implementation runs
    assert tuple(y.shape) == (2, 256)
