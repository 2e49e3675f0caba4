"""The CLI main job's synthetic K, V and queries (tools/synthetic_kv.cpp), in numpy.

The same generator, draw for draw: splitmix64 streams seeded per head, per-channel scales with
four outlier channels 10-50x larger, a slow sinusoid and AR(1) noise along the sequence, and
queries that lean towards the current key. With the same seed the rows equal the CLI's up to
the last bits of the double-precision sinusoid (the C++ build may fuse multiply-adds), so a
peer's fidelity measured on them is comparable with the CLI's per-format figures.
"""
import numpy as np

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
NOISE_CORRELATION = 0.9
OUTLIERS_PER_HEAD = 4
OUTLIER_MIN_FACTOR, OUTLIER_MAX_FACTOR = 10.0, 50.0
QUERY_KEY_WEIGHT, QUERY_GAIN = 0.35, 1.5
DRAWS_PER_CHANNEL = 15  # scale noise (4), offset noise (4), amplitude, omega, phase, noise (4)
POSITION_CHUNK = 1024  # positions whose noise draws are made at once (bounds the memory)


def _splitmix(states):
    z = states
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def draws(seed, first, count):
    """Outputs first … first + count − 1 (0-based) of the splitmix64 stream seeded with seed."""
    with np.errstate(over="ignore"):
        n = np.arange(first + 1, first + count + 1, dtype=np.uint64)
        return _splitmix(np.uint64(seed) + n * GOLDEN)


def uniforms(seed, first, count):
    return (draws(seed, first, count) >> np.uint64(11)).astype(np.float64) * 2.0**-53


def noises(seed, first, count):
    """count unit-variance values, each the sum of four consecutive uniforms."""
    u = uniforms(seed, first, 4 * count).reshape(count, 4)
    return (u[:, 0] + u[:, 1] + u[:, 2] + u[:, 3] - 2.0) * np.sqrt(3.0)


def mix_seed(seed, stream):
    with np.errstate(over="ignore"):
        mixed = np.uint64(seed) ^ (np.uint64(stream) * np.uint64(0xD1B54A32D192ED03))
    return int(draws(mixed, 0, 1)[0])


class _HeadStream:
    """One head's generator state: its per-channel parameters, drawn as the CLI draws them,
    and where its per-position noise draws begin."""

    def __init__(self, dim, seed):
        self.seed, self.dim = seed, dim
        per_channel = uniforms(seed, 0, DRAWS_PER_CHANNEL * dim).reshape(dim, DRAWS_PER_CHANNEL)

        def noise_of(first):
            return (per_channel[:, first] + per_channel[:, first + 1] +
                    per_channel[:, first + 2] + per_channel[:, first + 3] - 2.0) * np.sqrt(3.0)

        self.scale = np.exp(0.4 * noise_of(0)).astype(np.float32)
        self.offset = 0.5 * noise_of(4)
        self.amplitude = 0.5 + per_channel[:, 8]
        omega = 1e-3 * np.exp(per_channel[:, 9] * np.log(0.2 / 1e-3))
        phase = 2.0 * np.pi * per_channel[:, 10]
        self.noise = noise_of(11)
        self.cos_step, self.sin_step = np.cos(omega), np.sin(omega)
        self.phase_cos, self.phase_sin = np.cos(phase), np.sin(phase)
        first = DRAWS_PER_CHANNEL * dim
        for _ in range(OUTLIERS_PER_HEAD):
            # C++17 evaluates the right side of `a[i] *= b` first: the uniform, then the index.
            factor = OUTLIER_MIN_FACTOR + (OUTLIER_MAX_FACTOR - OUTLIER_MIN_FACTOR) * uniforms(
                seed, first, 1)[0]
            channel = int(draws(seed, first + 1, 1)[0] % np.uint64(dim))
            self.scale[channel] = np.float32(self.scale[channel] * np.float32(factor))
            first += 2
        self.first_noise_draw = first

    def innovations(self, first_position, count):
        """The noise innovations of positions first_position … + count − 1, [count, dim]."""
        first = self.first_noise_draw + 4 * first_position * self.dim
        return noises(self.seed, first, count * self.dim).reshape(count, self.dim)


def _stacked(heads, name):
    return np.stack([getattr(head, name) for head in heads])


class SyntheticRows:
    """One layer's K or V rows: `rows` [positions, n_kv_heads, head_dim] f32 and the channel
    scales [n_kv_heads, head_dim], as the CLI's SyntheticRows(n_kv_heads, head_dim, positions,
    seed)."""

    def __init__(self, n_kv_heads, head_dim, positions, seed):
        heads = [_HeadStream(head_dim, mix_seed(seed, h)) for h in range(n_kv_heads)]
        self.scales = _stacked(heads, "scale")
        offset, amplitude = _stacked(heads, "offset"), _stacked(heads, "amplitude")
        cos_step, sin_step = _stacked(heads, "cos_step"), _stacked(heads, "sin_step")
        phase_cos, phase_sin = _stacked(heads, "phase_cos"), _stacked(heads, "phase_sin")
        noise = _stacked(heads, "noise")
        innovation = np.sqrt(1.0 - NOISE_CORRELATION**2)
        self.rows = np.empty((positions, n_kv_heads, head_dim), dtype=np.float32)
        # All heads advance together, one position at a time (the sinusoid and the noise are
        # recurrences along the sequence).
        for chunk in range(0, positions, POSITION_CHUNK):
            count = min(POSITION_CHUNK, positions - chunk)
            innovations = np.stack([head.innovations(chunk, count) for head in heads], axis=1)
            for i in range(count):
                noise = NOISE_CORRELATION * noise + innovation * innovations[i]
                self.rows[chunk + i] = self.scales * (offset + amplitude * phase_sin +
                                                      noise).astype(np.float32)
                next_cos = phase_cos * cos_step - phase_sin * sin_step
                phase_sin = phase_sin * cos_step + phase_cos * sin_step
                phase_cos = next_cos


def synthetic_query(keys, n_heads, position, seed):
    """Queries [n_heads, head_dim] (f32) of the token at `position`, as the CLI's
    synthetic_query(keys, n_heads, position, seed)."""
    n_kv_heads, dim = keys.scales.shape
    group = n_heads // n_kv_heads
    noise = noises(mix_seed(seed, position), 0, n_heads * dim).reshape(n_heads, dim)
    scale = np.repeat(keys.scales.astype(np.float64), group, axis=0)
    key = np.repeat(keys.rows[position].astype(np.float64), group, axis=0)
    own_weight = np.sqrt(1.0 - QUERY_KEY_WEIGHT**2)
    query = QUERY_GAIN * (QUERY_KEY_WEIGHT * (key / scale) + own_weight * noise) / scale
    return query.astype(np.float32)
