#!/usr/bin/env python3
"""FlashInfer's paged decode on F16 and FP8-E4M3 KV: the serving-engine peer of attention_bench.

For every decode geometry of `attention_bench --list-shapes` (query / KV heads, D, the batch's
lengths; the row formats of our shapes do not matter to the peer) it times
`flashinfer.BatchDecodeWithPagedKVCacheWrapper` (NHD layout, q and output f16) with K/V in F16
and in FP8-E4M3, with use_tensor_cores off (its CUDA-core decode kernel) and on (its FA2
prefill kernel), at several page sizes. Timing as ours: CUDA events, warm-up, median of eager
calls and of CUDA-graph replays (a graph of max(8, copies) calls, the wrapper planned in its
CUDA-graph mode), and the same L2 policy: when one copy of the paged K/V is under 200 MiB,
successive calls cycle through several copies (cuda_timing.rotation_copies). FP8 runs pass
k_scale (FlashInfer folds it into the logits scale) but not v_scale, which run() applies as a
separate multiply that an engine can fold into the output projection: the peer is timed at its
fastest. A variant FlashInfer cannot build or run (D 512 where it has no kernel) is recorded as
unsupported with its message.

With --fidelity it also runs each variant on the CLI main job's data (kv_fidelity.py: the same
layers, rows and queries) with the scales an engine passes (per-tensor amax / 448, v_scale
too) and records its attention error against exact attention, next to the emulated figures.

FlashInfer JIT-compiles each variant on first use. --jit-cache-in loads modules built by an
earlier run (a tarball of <uri>/<uri>.so, installed as FlashInfer's AOT modules, plus the
variants found unsupported); --jit-cache-out writes that tarball when this run built anything.

    flashinfer_peer.py --shapes shapes.json --json flashinfer.json [--quick] [--fidelity]
        [--page-sizes 16,32,64,128] [--jit-cache-in T] [--jit-cache-out T]
"""
import argparse
import io
import json
import math
import os
import subprocess
import sys
import tarfile

import numpy as np
import torch

from cuda_timing import median_event_us, median_graph_us, rotation_copies

KV_DTYPES = {"f16": torch.float16, "fp8": torch.float8_e4m3fn}
WORKSPACE_BYTES = 256 << 20
FIDELITY_PAGE_SIZE = 16
UNSUPPORTED_FILE = "unsupported.json"
ERROR_CHARS = 600  # of a build or run error kept in the JSON (the log has the whole message)
BUILD_FAILURE = "Ninja build failed"  # how FlashInfer's JIT reports a compile error


def variant_key(kv, tensor_cores, head_dim):
    return f"{kv} tc={int(tensor_cores)} D{head_dim}"


class VariantUnsupported(Exception):
    """FlashInfer could not build or plan a variant: no page size or geometry will run it."""


class JitModules:
    """FlashInfer's JIT modules for the variants of this run: the cache loaded from an earlier
    run, the modules built now, and the variants that cannot be built or run."""

    def __init__(self, flashinfer, cache_in):
        self.flashinfer = flashinfer
        self.aot_dir = flashinfer.jit.env.FLASHINFER_AOT_DIR
        self.unsupported = {}  # variant key -> error
        self.variants = []  # (kv, tensor cores, head dim) of this run
        self.built_now = False
        if cache_in and os.path.exists(cache_in):
            with tarfile.open(cache_in) as tar:
                members = [m for m in tar.getmembers() if m.name.endswith(".so")]
                tar.extractall(self.aot_dir, members=members, filter="data")
                if UNSUPPORTED_FILE in tar.getnames():
                    self.unsupported = json.load(tar.extractfile(UNSUPPORTED_FILE))
            print(f"JIT cache {cache_in}: {len(members)} modules, "
                  f"{len(self.unsupported)} unsupported variants")

    def uri_and_spec(self, kv, tensor_cores, head_dim):
        """The module `plan()` loads for a variant (decode.py: get_batch_decode_module, or
        get_batch_prefill_module("fa2", …) with tensor cores), with the same arguments."""
        jit = self.flashinfer.jit
        args = (torch.float16, KV_DTYPES[kv], torch.float16, torch.int32, head_dim, head_dim,
                0, False, False)  # no position encoding, no window, no soft cap
        if tensor_cores:
            args = ("fa2",) + args + (False,)  # no f16 qk reduction
            return jit.get_batch_prefill_uri(*args), lambda: jit.gen_batch_prefill_module(*args)
        return jit.get_batch_decode_uri(*args), lambda: jit.gen_batch_decode_module(*args)

    def prebuild(self, variants):
        """Compiles the missing modules in one ninja run that goes on past failures (as
        flashinfer.jit.build_jit_specs, which stops at the first), so their compiles run in
        parallel; a module that did not build is unsupported."""
        self.variants = variants
        missing = {}
        for kv, tensor_cores, head_dim in variants:
            if variant_key(kv, tensor_cores, head_dim) in self.unsupported:
                continue
            uri, make_spec = self.uri_and_spec(kv, tensor_cores, head_dim)
            if not (self.aot_dir / uri / f"{uri}.so").exists():
                missing[(kv, tensor_cores, head_dim)] = make_spec()
        if not missing:
            return
        print(f"JIT: compiling {len(missing)} modules", flush=True)
        self.built_now = True
        jit_dir = self.flashinfer.jit.env.FLASHINFER_JIT_DIR
        jit_dir.mkdir(parents=True, exist_ok=True)
        ninja_file = jit_dir / "peer_prebuild.ninja"
        ninja_file.write_text("\n".join(["ninja_required_version = 1.3"] + [
            f"subninja {spec.ninja_path}" for spec in missing.values()]) + "\n")
        build = subprocess.run(["ninja", "-k", "0", "-C", str(jit_dir), "-f", str(ninja_file)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if build.returncode != 0:
            print(build.stdout, flush=True)
        if "interrupted" in build.stdout:  # killed, not failed: planning compiles the rest
            return
        for (kv, tensor_cores, head_dim), spec in missing.items():
            if not spec.jit_library_path.exists():
                self.mark_unsupported(kv, tensor_cores, head_dim, short_error(RuntimeError(
                    f"{BUILD_FAILURE}: {spec.name}: {build.stdout[-2 * ERROR_CHARS:]}")))

    def planned(self, kv, tensor_cores, head_dim, plan):
        """plan() (which builds or loads the variant's module); a cached module that does not
        load is deleted and compiled instead. Raises VariantUnsupported when nothing works."""
        try:
            return plan()
        except Exception as e:
            uri = self.uri_and_spec(kv, tensor_cores, head_dim)[0]
            cached = self.aot_dir / uri / f"{uri}.so"
            if not cached.exists():
                raise VariantUnsupported(short_error(e)) from e
            print(f"JIT cache: {uri} did not load ({short_error(e)}); compiling it", flush=True)
            cached.unlink()
            self.built_now = True
        try:
            return plan()
        except Exception as e:
            raise VariantUnsupported(short_error(e)) from e

    def mark_unsupported(self, kv, tensor_cores, head_dim, error):
        self.unsupported[variant_key(kv, tensor_cores, head_dim)] = error
        self.built_now = True

    def save(self, path):
        """Writes <uri>/<uri>.so of every module of this run's variants that exists, loaded or
        compiled, and the variants that did not compile (other failures are cheap to meet
        again, and may be passing ones)."""
        jit_dir = self.flashinfer.jit.env.FLASHINFER_JIT_DIR
        modules = 0
        with tarfile.open(path, "w:xz") as tar:
            for variant in self.variants:
                uri = self.uri_and_spec(*variant)[0]
                for folder in (self.aot_dir, jit_dir):
                    library = folder / uri / f"{uri}.so"
                    if library.exists():
                        tar.add(library, arcname=f"{uri}/{uri}.so")
                        modules += 1
                        break
            failed_builds = {key: error for key, error in self.unsupported.items()
                             if BUILD_FAILURE in error and "interrupted" not in error}
            data = json.dumps(failed_builds, indent=2).encode()
            info = tarfile.TarInfo(UNSUPPORTED_FILE)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        print(f"JIT cache written: {path} ({os.path.getsize(path) / 2**20:.1f} MiB, "
              f"{modules} modules)")


class PagedCache:
    """Rotated copies of one geometry's paged K/V in one dtype. Each sequence owns a run of
    consecutive tokens padded to a multiple of every page size, so one flat buffer
    [tokens, H, D] serves each page size P as [tokens / P, P, H, D]."""

    def __init__(self, shape, kv, page_sizes):
        self.lengths = shape["lengths"]
        self.h, self.d = shape["n_kv_heads"], shape["head_dim"]
        unit = math.lcm(*page_sizes)
        padded = [-(-length // unit) * unit for length in self.lengths]
        self.offsets = np.concatenate([[0], np.cumsum(padded)[:-1]]).astype(np.int64)
        tokens = int(sum(padded))
        self.cache_bytes = 2 * tokens * self.h * self.d * KV_DTYPES[kv].itemsize
        self.copies = []
        for _ in range(rotation_copies(self.cache_bytes)):
            k = torch.randn(tokens, self.h, self.d, device="cuda", dtype=torch.float16)
            v = torch.randn(tokens, self.h, self.d, device="cuda", dtype=torch.float16)
            self.copies.append((k.to(KV_DTYPES[kv]), v.to(KV_DTYPES[kv])))
            del k, v
        visible = sum(self.lengths) * self.h * self.d * KV_DTYPES[kv].itemsize
        self.bytes = 2 * visible + 2 * 2 * len(self.lengths) * shape["n_heads"] * self.d

    def page_table(self, page_size):
        """indptr, indices, last_page_len (int32, on the GPU) for pages of page_size."""
        pages = [-(-length // page_size) for length in self.lengths]
        indices = np.concatenate([np.arange(pages[b]) + self.offsets[b] // page_size
                                  for b in range(len(pages))])
        last = [length - (n - 1) * page_size for length, n in zip(self.lengths, pages)]
        as_tensor = lambda values: torch.tensor(np.asarray(values), dtype=torch.int32,
                                                device="cuda")
        return (as_tensor(np.concatenate([[0], np.cumsum(pages)])), as_tensor(indices),
                as_tensor(last))

    def paged(self, copy, page_size):
        k, v = self.copies[copy % len(self.copies)]
        return (k.view(-1, page_size, self.h, self.d), v.view(-1, page_size, self.h, self.d))


def planned_wrapper(flashinfer, workspace, table, shape, kv, tensor_cores, page_size,
                    cuda_graph):
    indptr, indices, last = table
    graph_buffers = dict(paged_kv_indptr_buffer=indptr, paged_kv_indices_buffer=indices,
                         paged_kv_last_page_len_buffer=last) if cuda_graph else {}
    wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(
        workspace, "NHD", use_cuda_graph=cuda_graph, use_tensor_cores=tensor_cores,
        **graph_buffers)
    wrapper.plan(indptr, indices, last, shape["n_heads"], shape["n_kv_heads"],
                 shape["head_dim"], page_size, q_data_type=torch.float16,
                 kv_data_type=KV_DTYPES[kv])
    return wrapper


def time_variant(modules, workspace, shape, cache, kv, tensor_cores, page_size, args):
    wrapper = modules.planned(kv, tensor_cores, shape["head_dim"], lambda: planned_wrapper(
        modules.flashinfer, workspace, cache.page_table(page_size), shape, kv, tensor_cores,
        page_size, cuda_graph=True))
    batch = len(shape["lengths"])
    q = torch.randn(batch, shape["n_heads"], shape["head_dim"], device="cuda",
                    dtype=torch.float16)
    out = torch.empty_like(q)
    k_scale = 1.0 if kv == "fp8" else None

    def launch(i):
        wrapper.run(q, cache.paged(i, page_size), k_scale=k_scale, out=out)

    counter = iter(range(1 << 30))
    launch(0)
    torch.cuda.synchronize()
    if not torch.isfinite(out).all():
        raise RuntimeError("non-finite output")
    eager_us = median_event_us(lambda: launch(next(counter)), args.warmup, args.reps)
    graph_us = median_graph_us(launch, max(len(cache.copies), 8), args.reps)
    best = min(eager_us, graph_us)
    return {"kv": kv, "tensor_cores": tensor_cores, "page_size": page_size,
            "eager_us": eager_us, "graph_us": graph_us, "best_us": best, "bytes": cache.bytes,
            "gbps": cache.bytes / (best * 1e3), "rotated_copies": len(cache.copies),
            "cache_bytes": cache.cache_bytes}


def short_error(e):
    """The error's start and end (a failed build says what failed at the end of its output)."""
    text = f"{type(e).__name__}: {e}"
    if len(text) <= ERROR_CHARS:
        return text
    return f"{text[:ERROR_CHARS // 3]} … {text[-2 * ERROR_CHARS // 3:]}"


def run_geometry(modules, workspace, shape, args):
    runs = []
    for kv in KV_DTYPES:
        cache = PagedCache(shape, kv, args.page_sizes)
        for tensor_cores in (False, True):
            key = variant_key(kv, tensor_cores, shape["head_dim"])
            if key in modules.unsupported:
                runs.append({"kv": kv, "tensor_cores": tensor_cores,
                             "unsupported": modules.unsupported[key]})
                continue
            for page_size in args.page_sizes:
                try:
                    runs.append(time_variant(modules, workspace, shape, cache, kv, tensor_cores,
                                             page_size, args))
                except VariantUnsupported as e:
                    print(f"  {key}: unsupported: {e}", flush=True)
                    modules.mark_unsupported(kv, tensor_cores, shape["head_dim"], str(e))
                    runs.append({"kv": kv, "tensor_cores": tensor_cores, "unsupported": str(e)})
                    break
                except Exception as e:
                    print(f"  {key} page {page_size}: {short_error(e)}", flush=True)
                    runs.append({"kv": kv, "tensor_cores": tensor_cores, "page_size": page_size,
                                 "error": short_error(e)})
        del cache
        torch.cuda.empty_cache()
    return runs


def best_runs(runs, page_size=None):
    """The fastest run per KV dtype (over both tensor-core settings), at one page size or at
    any."""
    best = {}
    for r in runs:
        if "best_us" in r and page_size in (None, r["page_size"]):
            if r["kv"] not in best or r["best_us"] < best[r["kv"]]["best_us"]:
                best[r["kv"]] = r
    return best


def geometry_shapes(shapes):
    """One shape per decode geometry: our shapes repeat each geometry for several formats."""
    unique = {}
    for s in shapes:
        key = (s["n_heads"], s["n_kv_heads"], s["head_dim"], tuple(s["lengths"]), s["mixed"])
        unique.setdefault(key, {k: s[k] for k in ("n_heads", "n_kv_heads", "head_dim",
                                                  "batch", "max_length", "lengths", "mixed")})
    return list(unique.values())


def geometry_label(s):
    length = f"L<={s['max_length']}" if s["mixed"] else f"L={s['max_length']}"
    mixed = "mixed " if s["mixed"] else ""
    return f"{s['n_heads']}/{s['n_kv_heads']} D{s['head_dim']} {mixed}B={s['batch']} {length}"


def fidelity_table(data):
    """Page table and token index of the main job's steps as a batch: row b holds the rows
    step b sees, in pages of FIDELITY_PAGE_SIZE (padding repeats row 0, past last_page_len)."""
    seen = [np.arange(data.layer.first_visible(p), p + 1) for p in data.positions]
    pages = [-(-len(rows) // FIDELITY_PAGE_SIZE) for rows in seen]
    index = np.concatenate([np.pad(rows, (0, n * FIDELITY_PAGE_SIZE - len(rows)))
                            for rows, n in zip(seen, pages)])
    last = [len(rows) - (n - 1) * FIDELITY_PAGE_SIZE for rows, n in zip(seen, pages)]
    as_tensor = lambda values: torch.tensor(np.asarray(values), dtype=torch.int32,
                                            device="cuda")
    table = (as_tensor(np.concatenate([[0], np.cumsum(pages)])), as_tensor(np.arange(sum(pages))),
             as_tensor(last))
    return table, torch.from_numpy(index).cuda()


def stored_fidelity_kv(rows, kv, index, layer):
    """(paged K or V as FlashInfer reads it, its scale or None, how many of the layer's FP8
    codes differ from kv_fidelity's E4M3 emulation). Rows are gathered in f32 and converted
    after, so no indexing runs on FP8 tensors."""
    from kv_fidelity import round_e4m3, tensor_scale

    rows_gpu = torch.from_numpy(rows).cuda()
    paged = rows_gpu[index]
    if kv == "f16":
        stored, scale, mismatches = paged.half(), None, 0
    else:
        scale = tensor_scale(rows)
        stored = (paged / scale).to(KV_DTYPES[kv])
        codes = (rows_gpu / scale).to(KV_DTYPES[kv]).float()
        emulated = torch.from_numpy(round_e4m3(rows / scale).astype(np.float32)).cuda()
        mismatches = int((codes != emulated).sum())
    return stored.view(-1, FIDELITY_PAGE_SIZE, layer.n_kv_heads, layer.head_dim), scale, mismatches


def fidelity_rows(modules, workspace, datas):
    """Each variant's output on the main job's layers against exact attention (the kernel
    itself, with the scales an engine passes), and the emulated figures beside them."""
    from kv_fidelity import emulated_rows, fidelity

    rows = emulated_rows(datas)
    for data in datas:
        layer = data.layer
        table, index = fidelity_table(data)
        q = torch.from_numpy(data.queries).cuda().half()
        shape = {"n_heads": layer.n_heads, "n_kv_heads": layer.n_kv_heads,
                 "head_dim": layer.head_dim}
        for kv in KV_DTYPES:
            (k, k_scale, k_mismatches), (v, v_scale, v_mismatches) = (
                stored_fidelity_kv(data.keys.rows, kv, index, layer),
                stored_fidelity_kv(data.values.rows, kv, index, layer))
            for tensor_cores in (False, True):
                if variant_key(kv, tensor_cores, layer.head_dim) in modules.unsupported:
                    continue
                row = {"system": "FlashInfer", "method": "measured", "k_format": kv,
                       "v_format": kv, "layer": layer.name, "tensor_cores": tensor_cores}
                try:
                    wrapper = modules.planned(kv, tensor_cores, layer.head_dim, lambda: (
                        planned_wrapper(modules.flashinfer, workspace, table, shape, kv,
                                        tensor_cores, FIDELITY_PAGE_SIZE, False)))
                    out = wrapper.run(q, (k, v), k_scale=k_scale, v_scale=v_scale)
                    row.update(fidelity(out.double().cpu().numpy(), data.exact))
                except Exception as e:
                    row["error"] = short_error(e)
                if kv == "fp8":
                    row["e4m3_emulation_mismatches"] = k_mismatches + v_mismatches
                rows.append(row)
            del k, v
        torch.cuda.empty_cache()
    return rows


def print_result(result):
    cells = []
    for best in (result["best"], result["best_page16"]):
        for kv in KV_DTYPES:
            r = best.get(kv)
            cells.append(f"{r['best_us']:8.1f}" if r else f"{'-':>8}")
            if best is result["best"]:
                cells.append(f"({int(r['tensor_cores'])},{r['page_size']})".rjust(10)
                             if r else f"{'-':>10}")
    print(f"{result['label']:<28} {' '.join(cells)}", flush=True)


def print_fidelity(rows):
    for row in rows:
        stats = (f"cos {row['cosine_mean']:.9f} max rel {row['max_rel_err']:.3e}"
                 if "cosine_mean" in row else row.get("error", ""))
        print(f"fidelity {row['system']} {row['method']} K {row['k_format']} V "
              f"{row['v_format']} {row['layer']} tc={row.get('tensor_cores', '-')}: {stats}")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", required=True, help="JSON from attention_bench --list-shapes")
    parser.add_argument("--json", required=True, help="where to write the results")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions and page sizes")
    parser.add_argument("--page-sizes", help="comma-separated (default 16,32,64,128; quick 16)")
    parser.add_argument("--fidelity", action="store_true",
                        help="also measure attention error on the CLI main job's data")
    parser.add_argument("--context", type=int, default=8192, help="fidelity: main job context")
    parser.add_argument("--steps", type=int, default=32, help="fidelity: main job steps")
    parser.add_argument("--seed", type=int, default=20261129, help="fidelity: the CLI's seed")
    parser.add_argument("--jit-cache-in", help="tarball of modules from an earlier run")
    parser.add_argument("--jit-cache-out", help="write the modules here when any was built")
    args = parser.parse_args()
    args.warmup, args.reps = (3, 10) if args.quick else (5, 30)
    default_pages = "16" if args.quick else "16,32,64,128"
    args.page_sizes = [int(p) for p in (args.page_sizes or default_pages).split(",")]
    return args


def main():
    args = parse_args()
    if not torch.cuda.is_available():
        print("flashinfer_peer: no CUDA device", file=sys.stderr)
        return 1
    import flashinfer

    modules = JitModules(flashinfer, args.jit_cache_in)
    with open(args.shapes) as f:
        shapes = geometry_shapes(json.load(f))
    head_dims = sorted({s["head_dim"] for s in shapes})
    modules.prebuild([(kv, tc, d) for kv in KV_DTYPES for tc in (False, True)
                      for d in head_dims])
    # Saved now and again at the end: a run stopped while timing keeps what it compiled.
    if args.jit_cache_out and modules.built_now:
        modules.save(args.jit_cache_out)
    workspace = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device="cuda")
    report = {"peer": "flashinfer.BatchDecodeWithPagedKVCacheWrapper",
              "flashinfer": flashinfer.__version__, "torch": torch.__version__,
              "device": torch.cuda.get_device_name(), "layout": "NHD", "q_dtype": "float16",
              "page_sizes": args.page_sizes, "unsupported": modules.unsupported, "results": []}
    print(f"{'geometry':<28} {'F16 us':>8} {'(tc,page)':>10} {'FP8 us':>8} {'(tc,page)':>10} "
          f"{'F16 p16':>8} {'FP8 p16':>8}")
    for shape in shapes:
        runs = run_geometry(modules, workspace, shape, args)
        report["results"].append(dict(shape, label=geometry_label(shape), runs=runs,
                                      best=best_runs(runs), best_page16=best_runs(runs, 16)))
        print_result(report["results"][-1])
        with open(args.json, "w") as f:  # after each geometry, so a stopped run keeps them
            json.dump(report, f, indent=2)
    if args.fidelity:
        from kv_fidelity import layer_datas

        report["fidelity"] = fidelity_rows(modules, workspace,
                                           layer_datas(args.context, args.steps, args.seed))
        print_fidelity(report["fidelity"])
    with open(args.json, "w") as f:
        json.dump(report, f, indent=2)
    if args.jit_cache_out and modules.built_now:
        modules.save(args.jit_cache_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
