"""report_formats.py's pure functions (Python standard library only; ctest runs this file).

    python3 -m unittest -v test_report_formats     (from bench/; pytest runs it as well)
"""
import unittest

import report_formats as rf


def shape(batch=1, length=32768, head_dim=256, kv_heads=8, mixed=False):
    return {"n_heads": 16, "n_kv_heads": kv_heads, "head_dim": head_dim, "batch": batch,
            "max_length": length, "lengths": [length] * batch, "mixed": mixed}


def decode_row(k, v, eager, graph, **geometry):
    return dict(shape(**geometry), k_format=k, v_format=v, eager_us=eager, graph_us=graph)


def peer_result(best_us, **geometry):
    run = {"kv": "fp8", "tensor_cores": True, "page_size": 16, "best_us": best_us}
    return dict(shape(**geometry), best={"fp8": run}, best_page16={"fp8": run})


class BytesTest(unittest.TestCase):
    def test_side_bytes_follow_the_spec(self):
        d256 = {f: rf.side_bytes(f, 256) for f in rf.V_FORMATS}
        self.assertEqual(d256, {"f16": 512, "fp8": 260, "tq3": 100, "tq4": 132, "tq5": 164,
                                "tq6": 196, "tq8": 260})
        d512 = {f: rf.side_bytes(f, 512) for f in rf.V_FORMATS}
        self.assertEqual(d512, {"f16": 1024, "fp8": 516, "tq3": 200, "tq4": 264, "tq5": 328,
                                "tq6": 392, "tq8": 520})

    def test_pairs_match_the_cache_sizes_of_spec_1_3(self):
        self.assertEqual(rf.pair_bytes("f16", "f16", 256), 1024)
        self.assertEqual(rf.pair_bytes("f16", "tq8", 256), 772)
        self.assertEqual(rf.pair_bytes("tq8", "tq8", 256), 520)
        self.assertEqual(rf.pair_bytes("f16", "tq4", 256), 644)

    def test_flashinfer_fp8_has_no_per_row_scale(self):
        self.assertEqual(rf.flashinfer_bytes("fp8", 256), 512)
        self.assertEqual(rf.flashinfer_bytes("f16", 512), 2048)

    def test_unknown_format_is_an_error(self):
        with self.assertRaises(ValueError):
            rf.side_bytes("q8_0", 256)


class FidelityRowsTest(unittest.TestCase):
    CLI = {"k_format": "f16", "formats": [{"v_format": "tq8", "layers": [
        {"name": "sliding", "cosine_mean": 0.99998, "cosine_min": 0.9999,
         "max_relative_error": 8e-3}]}]}

    def test_reads_the_cli_main_job(self):
        rows = rf.fidelity_rows(self.CLI)
        self.assertEqual(rows, [{"system": "turbodecode", "method": "measured",
                                 "k_format": "f16", "v_format": "tq8", "layer": "sliding",
                                 "cosine_mean": 0.99998, "cosine_min": 0.9999,
                                 "max_rel_err": 8e-3}])

    def test_reads_flat_rows_and_skips_variants_that_did_not_run(self):
        flat = {"rows": [{"k_format": "fp8", "v_format": "tq4", "layer": "global",
                          "cosine_mean": 0.999, "cosine_min": 0.99, "max_rel_err": 0.03},
                         {"system": "FlashInfer", "k_format": "fp8", "v_format": "fp8",
                          "layer": "global", "error": "no kernel"}]}
        rows = rf.fidelity_rows(flat)
        self.assertEqual(len(rows), 1)
        self.assertEqual((rows[0]["k_format"], rows[0]["max_rel_err"]), ("fp8", 0.03))
        self.assertEqual(rf.fidelity_rows(None), [])

    def test_measured_rows_win_over_emulated_ones(self):
        emulated = {"system": "FlashInfer", "method": "emulated", "k_format": "fp8",
                    "v_format": "fp8", "layer": "sliding", "cosine_mean": 0.9,
                    "cosine_min": 0.8, "max_rel_err": 0.1}
        measured = dict(emulated, method="measured", max_rel_err=0.2)
        for order in ([emulated, measured], [measured, emulated]):
            index = rf.fidelity_index(order)
            self.assertEqual(index[("FlashInfer", "fp8", "fp8", "sliding")]["max_rel_err"], 0.2)


class TimesTest(unittest.TestCase):
    def test_our_times_take_the_better_mode_and_skip_errors(self):
        ours = {"decode": [decode_row("fp8", "tq4", 120.0, 100.0),
                           dict(decode_row("fp8", "tq6", 1.0, 1.0), error="boom"),
                           dict(decode_row("f16", "tq8", 90.0, 80.0), page_size=16)]}
        times = rf.our_times(ours)
        g = rf.geometry(shape())
        self.assertEqual(times, {(g, "fp8", "tq4"): 100.0, (g, "f16", "tq8@p16"): 80.0})
        self.assertEqual(rf.our_times(None), {})

    def test_our_times_leave_out_runs_of_several_query_tokens(self):
        ours = {"decode": [decode_row("f16", "tq8", 100.0, 90.0),
                           dict(decode_row("f16", "tq8", 150.0, 140.0), query_tokens=4)]}
        self.assertEqual(rf.our_times(ours), {(rf.geometry(shape()), "f16", "tq8"): 90.0})

    def test_sdpa_takes_the_best_of_a_geometry_repeated_per_format(self):
        sdpa = {"results": [dict(shape(), best={"best_us": 50.0}),
                            dict(shape(), best={"best_us": 40.0}), dict(shape(), best=None)]}
        self.assertEqual(rf.sdpa_times(sdpa), {rf.geometry(shape()): 40.0})


class TargetsTest(unittest.TestCase):
    def test_tq4_target_compares_with_flashinfer_fp8_at_32k_tokens_and_more(self):
        ours = rf.our_times({"decode": [
            decode_row("fp8", "tq4", 80.0, 74.0, batch=8, length=32768),
            decode_row("fp8", "tq4", 80.0, 90.0, batch=1, length=131072),
            decode_row("fp8", "tq4", 10.0, 10.0, batch=1, length=4096)]})
        peer = rf.flashinfer_times({"results": [peer_result(100.0, batch=8, length=32768),
                                                peer_result(100.0, batch=1, length=131072),
                                                peer_result(100.0, batch=1, length=4096)]})
        lines = rf.target_lines(ours, peer, {}, {})
        self.assertEqual(len(lines), 2)  # the 4K-token shape is below the targets' range
        self.assertTrue(any("B=8 L=32768" in l and "0.74×" in l and ": met" in l
                            for l in lines))
        self.assertTrue(any("B=1 L=131072" in l and "0.80×" in l and "not met" in l
                            for l in lines))

    def test_d512_target_uses_the_best_peer_including_sdpa(self):
        ours = rf.our_times({"decode": [decode_row("f16", "tq8", 60.0, 60.0, head_dim=512,
                                                   kv_heads=2)]})
        peer = rf.flashinfer_times({"results": [peer_result(200.0, head_dim=512, kv_heads=2)]})
        sdpa = {rf.geometry(shape(head_dim=512, kv_heads=2)): 100.0}
        (line,) = rf.target_lines(ours, peer, sdpa, {})
        self.assertIn("0.60× the best peer's time (100.0 µs)", line)
        self.assertIn("not met", line)


class ReportTest(unittest.TestCase):
    def test_nothing_measured_still_gives_every_pair_with_its_bytes(self):
        lines, points, device = rf.report_lines(None, None, None, [])
        table = [l for l in lines if l.startswith("| ")]
        self.assertEqual(len(table), 1 + len(rf.PAIRS) + len(rf.FLASHINFER_KV))
        self.assertIn("| fp8 | tq4 | 392 | 780 | 38% | – |", "\n".join(table))
        self.assertEqual(points, [])
        self.assertIsNone(device)

    def test_a_point_needs_both_time_and_error(self):
        ours = rf.our_times({"decode": [decode_row("fp8", "tq4", 100.0, 100.0, batch=8),
                                        decode_row("fp8", "tq4", 400.0, 400.0, batch=1,
                                                   length=131072),
                                        decode_row("fp8", "tq6", 100.0, 100.0)]})
        index = rf.fidelity_index(rf.fidelity_rows([
            {"k_format": "fp8", "v_format": "tq4", "layer": "sliding", "cosine_mean": 0.999,
             "cosine_min": 0.99, "max_rel_err": 0.02}]))
        points = rf.tradeoff_points(ours, {}, index)
        self.assertEqual(len(points), 1)
        label, head_dim, us, error, count = points[0]
        self.assertEqual((label, head_dim, count, error), ("K fp8 V tq4", 256, 2, 0.02))
        self.assertAlmostEqual(us, 200.0)  # geometric mean of 100 and 400


if __name__ == "__main__":
    unittest.main()
