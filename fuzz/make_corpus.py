#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target into fuzz/corpus/<target>/ (small files: valid
inputs of each kind, and a few near misses). Deterministic; rerun after changing a seed."""
import json
import pathlib
import random
import struct

import numpy as np

CORPUS = pathlib.Path(__file__).resolve().parent / "corpus"
FILE_MARK = b"\0\xf0FILE:"  # fuzz/cli_fuzzer.cc: kFileMark


def npy_bytes(array, version=1, fortran=False):
    descr = np.lib.format.dtype_to_descr(array.dtype)
    header = "{'descr': %r, 'fortran_order': %s, 'shape': %r, }" % (
        descr, fortran, tuple(array.shape))
    length_bytes = 2 if version == 1 else 4
    prefix = 6 + 2 + length_bytes
    header += " " * ((64 - (prefix + len(header) + 1) % 64) % 64) + "\n"
    length = struct.pack("<H" if version == 1 else "<I", len(header))
    return b"\x93NUMPY" + bytes([version, 0]) + length + header.encode() + array.tobytes()


def safetensors_bytes(tensors, metadata=None):
    header, data = {}, b""
    for name, (dtype, array) in tensors.items():
        raw = array.tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def cli_input(arguments, files):
    body = "\n".join(arguments).encode()
    for name, content in files.items():
        assert FILE_MARK not in content, name
        body += FILE_MARK + name.encode() + b"\n" + content
    return body


def write(target, name, content):
    directory = CORPUS / target
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_bytes(content)


def npy_seeds(rng):
    write("npy", "f32_2x3", npy_bytes(rng.standard_normal((2, 3)).astype("<f4")))
    write("npy", "f16_256", npy_bytes(rng.standard_normal(256).astype("<f2")))
    write("npy", "u8_5", npy_bytes(np.arange(5, dtype="|u1")))
    write("npy", "i32_scalar", npy_bytes(np.array(7, dtype="<i4")))
    write("npy", "f32_empty", npy_bytes(np.zeros((0, 4), dtype="<f4")))
    write("npy", "version2", npy_bytes(np.arange(3, dtype="<i4"), version=2))
    write("npy", "fortran", npy_bytes(np.zeros((2, 2), dtype="<f4"), fortran=True))
    write("npy", "float64", npy_bytes(np.zeros(2, dtype="<f8")))


def safetensors_seeds(rng):
    write("safetensors", "two_tensors", safetensors_bytes(
        {"q": ("F32", rng.standard_normal((2, 4)).astype("<f4")),
         "pos": ("I32", np.arange(3, dtype="<i4"))}, metadata={"format": "pt"}))
    write("safetensors", "bf16_u8", safetensors_bytes(
        {"b": ("BF16", np.arange(4, dtype="<u2")), "c": ("U8", np.arange(6, dtype="u1"))}))
    write("safetensors", "f16_empty", safetensors_bytes(
        {"e": ("F16", np.zeros((0, 3), dtype="<f2"))}))
    write("safetensors", "no_tensors", safetensors_bytes({}))


def cli_seeds(rng):
    d = 256
    q = npy_bytes(rng.standard_normal((1, 2, d)).astype("<f2"))
    k = npy_bytes(rng.standard_normal((3, 1, d)).astype("<f2"))
    v = npy_bytes(rng.standard_normal((3, 1, d)).astype("<f2"))
    files = {"q.npy": q, "k.npy": k, "v.npy": v}
    write("cli", "attention_npy", cli_input(
        ["attention", "--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--v-format", "tq4",
         "--output", "o.npy", "--json"], files))
    write("cli", "attention_indices", cli_input(
        ["attention", "--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--kv-slot", "s.npy",
         "--kv-pos", "p.npy", "--q-slot", "qs.npy", "--q-pos", "qp.npy", "--layer", "ring",
         "--window", "2", "--k-format", "tq8"],
        dict(files, **{"s.npy": npy_bytes(np.array([0, 1, 1], dtype="<i4")),
                       "p.npy": npy_bytes(np.array([0, 0, 1], dtype="<i4")),
                       "qs.npy": npy_bytes(np.array([1], dtype="<i4")),
                       "qp.npy": npy_bytes(np.array([1], dtype="<i4"))})))
    bundle = safetensors_bytes({
        "q": ("F32", rng.standard_normal((2, d)).astype("<f4")),
        "k": ("F16", rng.standard_normal((2, d)).astype("<f2")),
        "v": ("BF16", np.zeros((2, d), dtype="<u2"))})
    write("cli", "attention_bundle", cli_input(
        ["attention", "--inputs", "step.safetensors", "--mask", "sliding-linear", "--window",
         "1", "--softcap", "50", "--scale", "1", "--rotated-output", "--output",
         "o.safetensors"], {"step.safetensors": bundle}))
    x = npy_bytes(rng.standard_normal((1, 512)).astype("<f2"))
    write("cli", "encode_npy", cli_input(
        ["encode", "x.npy", "--bits", "4", "--scale-factor-d512", "2", "--output",
         "c.safetensors"], {"x.npy": x}))
    write("cli", "encode_named", cli_input(
        ["encode", "b.safetensors", "--name", "v", "--format", "tq8", "--json"],
        {"b.safetensors": safetensors_bytes(
            {"v": ("F32", rng.standard_normal((1, d)).astype("<f4"))})}))
    write("cli", "hc", cli_input(["hc", "--n-hc", "4", "--embd", "256", "--rows", "3",
                                  "--shared-width", "64", "--repeats", "2"], {}))
    write("cli", "main_job", cli_input(["--context", "300", "--steps", "3", "--v-formats",
                                        "tq4,f16", "--threads", "1", "--seed", "5"], {}))
    write("cli", "help", cli_input(["attention", "--help"], {}))


def api_seeds(rng):
    rand = random.Random(20261202)
    for i, size in enumerate([0, 16, 48, 96, 160, 256, 400, 640]):
        write("api", "random_%d" % i, bytes(rand.getrandbits(8) for _ in range(size)))


def main():
    rng = np.random.default_rng(20261202)
    npy_seeds(rng)
    safetensors_seeds(rng)
    cli_seeds(rng)
    api_seeds(rng)


if __name__ == "__main__":
    main()
