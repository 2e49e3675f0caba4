"""kv_fidelity.py and synthetic_kv.py: the E4M3 rounding, the statistics, and the port of the
CLI's synthetic data (against the CLI itself, when TURBODECODE_CLI names a built binary).
Needs numpy; skips without it.

    python3 -m unittest -v test_kv_fidelity     (from bench/peers/)
"""
import json
import os
import subprocess
import unittest

try:
    import numpy as np

    import kv_fidelity as kf
except ImportError:  # numpy missing: every test skips
    np = None

CLI = os.environ.get("TURBODECODE_CLI", "")


@unittest.skipIf(np is None, "numpy is not installed")
class RoundingTest(unittest.TestCase):
    def test_e4m3_values_ties_and_saturation(self):
        x = np.array([0.0, 1.0, 1.0625, 1.1875, 448.0, 500.0, -3.3, 2.0**-9 * 1.5, 1e-6])
        expected = [0.0, 1.0, 1.0, 1.25, 448.0, 448.0, -3.25, 2.0**-8, 0.0]
        np.testing.assert_array_equal(kf.round_e4m3(x), expected)

    def test_every_e4m3_value_rounds_to_itself(self):
        mantissas = np.arange(8) / 8.0
        normal = [(1 + m) * 2.0**e for e in range(-6, 9) for m in mantissas]
        values = np.array([v for v in normal if v <= 448] + list(mantissas * 2.0**-6))
        np.testing.assert_array_equal(kf.round_e4m3(values), values)
        np.testing.assert_array_equal(kf.round_e4m3(-values), -values)

    def test_per_row_fp8_keeps_each_row_amax(self):
        rows = np.array([[0.5, -3.0, 1.0], [0.0, 0.0, 0.0]], dtype=np.float32)
        decoded = kf.fp8_per_row(rows)
        self.assertAlmostEqual(float(decoded[0, 1]), -3.0, places=6)
        np.testing.assert_array_equal(decoded[1], 0.0)


@unittest.skipIf(np is None, "numpy is not installed")
class FidelityTest(unittest.TestCase):
    def test_statistics(self):
        exact = np.array([[1.0, 0.0], [0.0, 2.0]])
        same = kf.fidelity(exact, exact)
        self.assertEqual((same["cosine_mean"], same["max_rel_err"]), (1.0, 0.0))
        off = kf.fidelity(np.array([[1.0, 0.1], [0.0, 2.0]]), exact)
        self.assertAlmostEqual(off["max_rel_err"], 0.1)
        self.assertAlmostEqual(off["cosine_min"], 1 / np.sqrt(1.01))
        bad = kf.fidelity(np.array([[np.nan, 0.0], [0.0, 2.0]]), exact)
        self.assertEqual((bad["cosine_min"], bad["max_rel_err"]), (-1.0, np.inf))

    def test_attention_sees_only_its_window(self):
        layer = kf.Layer("tiny", 2, 1, 4, 3)
        data = kf.LayerData.__new__(kf.LayerData)
        data.layer, data.positions = layer, [5]
        rows = np.zeros((6, 1, 4), dtype=np.float32)
        rows[:3] = 100.0  # outside the window of position 5 (positions 3, 4, 5)
        rows[3:, 0, 0] = [1.0, 2.0, 3.0]
        out = data.attend_all(np.zeros((1, 2, 4), dtype=np.float32), rows, rows)
        np.testing.assert_allclose(out[0, :, 0], [2.0, 2.0])  # uniform weights over 3 rows


@unittest.skipIf(np is None or not os.path.isfile(CLI),
                 "numpy or the CLI (TURBODECODE_CLI) missing")
class CliAgreementTest(unittest.TestCase):
    def test_f16_fidelity_equals_the_cli_on_the_same_data(self):
        context, steps, seed = 1500, 3, 7
        result = subprocess.run([CLI, "--json", "--context", str(context), "--steps", str(steps),
                                 "--seed", str(seed), "--v-formats", "f16"],
                                check=True, capture_output=True, text=True)
        cli = {layer["name"]: layer for layer in json.loads(result.stdout)["formats"][0]["layers"]}
        for data in kf.layer_datas(context, steps, seed):
            ours = kf.fidelity(kf.turbodecode_outputs(data, "f16", "f16"), data.exact)
            self.assertAlmostEqual(ours["max_rel_err"], cli[data.layer.name]["max_relative_error"],
                                   delta=1e-6)
            self.assertAlmostEqual(ours["cosine_mean"], cli[data.layer.name]["cosine_mean"],
                                   delta=1e-9)


if __name__ == "__main__":
    unittest.main()
