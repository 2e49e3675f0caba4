"""Double-precision numpy references for the Python tests (the formulas of SPEC §2 and §3).

They check that the package passes every argument where it belongs; the C++ tests check the
kernels themselves against the library's oracles.
"""

from __future__ import annotations

import numpy as np


def relative_l2(actual: np.ndarray, expected: np.ndarray) -> float:
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    if not np.all(np.isfinite(actual)):
        return float("inf")
    return float(np.linalg.norm(actual - expected) / max(np.linalg.norm(expected), 1e-30))


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of matching rows."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return np.sum(a * b, -1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def visible_positions(mask: str, seq_pos: int, capacity: int, window: int) -> range:
    """Absolute positions a query at ``seq_pos`` sees (SPEC §2.2)."""
    first = 0
    if mask == "sliding_ring":
        first = max(first, seq_pos + 1 - capacity)
    if mask != "causal" and window > 0:
        first = max(first, seq_pos + 1 - window)
    return range(first, seq_pos + 1)


def attention(q: np.ndarray, keys: np.ndarray, values: np.ndarray, scale: float,
              softcap: float) -> tuple[np.ndarray, np.ndarray]:
    """One query row of every head over ``keys``/``values`` [positions, heads, D] (already the
    KV head of each query head): (out [heads, D], lse [heads])."""
    q = q.astype(np.float64)
    if keys.shape[0] == 0:
        return np.zeros_like(q), np.full(q.shape[0], -np.inf)
    scores = np.einsum("hd,phd->hp", q, keys.astype(np.float64)) * scale
    if softcap > 0:
        scores = softcap * np.tanh(scores / softcap)
    top = scores.max(-1, keepdims=True)
    weights = np.exp(scores - top)
    total = weights.sum(-1, keepdims=True)
    out = np.einsum("hp,phd->hd", weights / total, values.astype(np.float64))
    return out, (top + np.log(total))[:, 0]


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def hc_split(mix, scale, base, n, iters, eps):
    """SPEC §3.1 for rows of mix [T, M] -> split [T, M]."""
    mix = mix.astype(np.float64)
    out = np.empty_like(mix)
    out[:, :n] = sigmoid(mix[:, :n] * scale[0] + base[:n]) + eps
    out[:, n:2 * n] = 2.0 * sigmoid(mix[:, n:2 * n] * scale[1] + base[n:2 * n])
    z = (mix[:, 2 * n:] * scale[2] + base[2 * n:]).reshape(-1, n, n)
    c = np.exp(z - z.max(-1, keepdims=True))
    c = c / c.sum(-1, keepdims=True) + eps
    c = c / (c.sum(-2, keepdims=True) + eps)
    for _ in range(iters - 1):
        c = c / (c.sum(-1, keepdims=True) + eps)
        c = c / (c.sum(-2, keepdims=True) + eps)
    out[:, 2 * n:] = c.reshape(-1, n * n)
    return out


def hc_collapse(x, pre):
    """u[t][d] = Σ_h pre[t][h]·x[t][h][d]."""
    return np.einsum("th,thd->td", pre.astype(np.float64), x.astype(np.float64))


def rms_norm(u, weight, eps):
    u = u.astype(np.float64)
    return u / np.sqrt(np.mean(u * u, -1, keepdims=True) + eps) * weight


def hc_expand(block, add, x, post, comb):
    """out[t][c][d] = (block + add)[t][d]·post[t][c] + Σ_r comb[t][r][c]·x[t][r][d]."""
    b = block.astype(np.float64) + (0.0 if add is None else add.astype(np.float64))
    return (np.einsum("td,tc->tcd", b, post.astype(np.float64))
            + np.einsum("trc,trd->tcd", comb.astype(np.float64), x.astype(np.float64)))


def norm_mix(x, weight, eps):
    """mix[t][k] = ρ·Σ_i W[k][i]·x[t][i], ρ = 1/sqrt(mean(x²) + eps) over the whole row."""
    flat = x.reshape(x.shape[0], -1).astype(np.float64)
    rho = 1.0 / np.sqrt(np.mean(flat * flat, -1, keepdims=True) + eps)
    return (flat * rho) @ weight.astype(np.float64).T


def q8_dequantize(blocks: np.ndarray, cols: int) -> np.ndarray:
    """Q8_0 rows uint8 [rows, cols/32·34] -> f64 [rows, cols]."""
    b = blocks.reshape(blocks.shape[0], cols // 32, 34)
    d = b[:, :, :2].copy().view(np.float16).astype(np.float64)
    q = b[:, :, 2:].view(np.int8).astype(np.float64)
    return (d * q).reshape(blocks.shape[0], cols)
