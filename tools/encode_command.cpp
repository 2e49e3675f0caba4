// `turbodecode encode`: round trip of a user tensor's rows through the row codec (encode,
// decode, and for TurboQuant-HB un-rotate) with quality statistics per quantized format,
// optionally saving codes, side values (TQ norms, FP8 scales) and the decoded tensor.
#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "argument_check.h"
#include "commands.h"
#include "device_tensor.h"
#include "fidelity.h"
#include "global_options.h"
#include "option_checks.h"
#include "tensor_files.h"
#include "turbodecode/tq_codec.h"

namespace turbodecode::cli {
namespace {

struct EncodeOptions {
  std::string input;
  std::string name;
  std::string format = "all";
  int bits = 0;
  float scale_factor_d512 = 1.0f;
  std::string output;
};

struct FormatRoundTrip {
  RowFormat format;
  Fidelity fidelity;
  HostTensor codes, norms, decoded;
};

std::vector<RowFormat> chosen_formats(const EncodeOptions& options) {
  if (options.bits != 0) {
    check_arg(options.format == "all", "--bits", "give either --bits or --format, not both");
    return {parse_format("tq" + std::to_string(options.bits))};
  }
  std::vector<RowFormat> formats;
  if (options.format == "all") {
    for (RowFormat format : kRowFormats) {
      if (is_quantized(format)) formats.push_back(format);
    }
    return formats;
  }
  const RowFormat format = parse_format(options.format);
  check_arg(is_quantized(format), "--format",
            "must be a quantized format (fp8, tq3, tq4, tq5, tq6, tq8)");
  return {format};
}

// The name of a format's f32 side values in reports and files.
const char* side_values_name(RowFormat format) {
  return is_turboquant(format) ? "norms" : "scales";
}

std::int64_t stored_row_bytes(RowFormat format, int dim) {
  return row_bytes(format, dim) + 4 * row_scales(format, dim);
}

FormatRoundTrip round_trip(const CodecParams& params, const DeviceTensor& x,
                           const std::vector<float>& original) {
  const std::int64_t rows = x.view().shape[0];
  const int dim = params.head_dim;
  DeviceTensor codes(x.view().device, DType::u8, {rows, row_bytes(params.format, dim)});
  DeviceTensor norms(x.view().device, DType::f32, {rows, row_scales(params.format, dim)});
  DeviceTensor decoded(x.view().device, DType::f32, {rows, dim});
  encode_rows(params, x.view(), codes.view(), norms.view());
  decode_rows(params, codes.view(), norms.view(), decoded.view());
  if (is_turboquant(params.format)) unrotate_rows(dim, decoded.view(), decoded.view());
  synchronize();
  FormatRoundTrip result{params.format, {}, codes.to_host(), norms.to_host(), decoded.to_host()};
  result.fidelity.add_rows(reinterpret_cast<const float*>(result.decoded.bytes.data()),
                           original.data(), rows, dim);
  return result;
}

nlohmann::ordered_json round_trip_json(const FormatRoundTrip& trip, int dim) {
  return {{"format", format_name(trip.format)},
          {"bytes_per_row", stored_row_bytes(trip.format, dim)},
          {"cosine_mean", trip.fidelity.mean_cosine()},
          {"cosine_min", trip.fidelity.min_cosine()},
          {"relative_l2", trip.fidelity.relative_l2()},
          {"max_abs_error", trip.fidelity.max_abs_error()}};
}

void report(const EncodeOptions& options, const HostTensor& input,
            const std::vector<FormatRoundTrip>& trips, int dim) {
  const std::int64_t rows = input.numel() / dim;
  if (global_options().json) {
    nlohmann::ordered_json json = {
        {"input", options.input}, {"dtype", dtype_name(input.dtype)},
        {"shape", input.shape},   {"head_dim", dim},
        {"rows", rows},           {"device", device_name(global_options().device)}};
    for (const FormatRoundTrip& trip : trips) json["formats"].push_back(round_trip_json(trip, dim));
    fmt::print("{}\n", json.dump(2));
    return;
  }
  fmt::print("{}: {} {} rows of D {} ({}), round trip encode -> decode (-> un-rotate for TQ)\n",
             options.input, rows, dtype_name(input.dtype), dim,
             device_name(global_options().device));
  fmt::print("{:<6} {:>10} {:>12} {:>12} {:>10} {:>12}\n", "format", "bytes/row", "cosine mean",
             "cosine min", "rel L2", "max abs err");
  for (const FormatRoundTrip& trip : trips) {
    fmt::print("{:<6} {:>10} {:>12.6f} {:>12.6f} {:>10.3e} {:>12.4e}\n", format_name(trip.format),
               stored_row_bytes(trip.format, dim), trip.fidelity.mean_cosine(),
               trip.fidelity.min_cosine(), trip.fidelity.relative_l2(),
               trip.fidelity.max_abs_error());
  }
}

// Codes and side values keep the input's leading dimensions; the decoded tensor has its full
// shape.
void write_outputs(const std::string& path, const HostTensor& input,
                   std::vector<FormatRoundTrip>& trips) {
  std::vector<std::int64_t> leading(input.shape.begin(), input.shape.end() - 1);
  NamedTensors tensors;
  for (FormatRoundTrip& trip : trips) {
    const std::string prefix = std::string(format_name(trip.format)) + ".";
    std::vector<std::int64_t> codes_shape = leading, norms_shape = leading;
    codes_shape.push_back(trip.codes.shape.back());
    norms_shape.push_back(trip.norms.shape.back());
    tensors.emplace_back(prefix + "codes", reshaped(std::move(trip.codes), codes_shape, "codes"));
    const std::string side = side_values_name(trip.format);
    tensors.emplace_back(prefix + side, reshaped(std::move(trip.norms), norms_shape, side));
    tensors.emplace_back(prefix + "decoded",
                         reshaped(std::move(trip.decoded), input.shape, "decoded"));
  }
  write_tensor_file(path, tensors);
}

void run_encode(const EncodeOptions& options) {
  check_arg(options.output.empty() || options.output.ends_with(".safetensors"), "--output",
            "must be a .safetensors file");
  const HostTensor input = read_tensor_file(options.input, options.name);
  check_arg(!input.shape.empty(), options.input, "needs at least one dimension (rows of D values)");
  check_arg(input.shape.back() == 256 || input.shape.back() == 512, options.input,
            "last dimension (D) must be 256 or 512");
  const auto dim = static_cast<int>(input.shape.back());
  const std::int64_t rows = input.numel() / dim;
  check_arg(rows > 0, options.input, "holds no rows");
  const std::vector<float> original = values_as_f32(input, options.input);
  // The file's own dtype goes to the device: the encoder widens f16/bf16 itself.
  const DeviceTensor x(global_options().device, reshaped(input, {rows, dim}, options.input));

  std::vector<FormatRoundTrip> trips;
  for (RowFormat format : chosen_formats(options)) {
    trips.push_back(round_trip({dim, format, options.scale_factor_d512}, x, original));
  }
  report(options, input, trips, dim);
  if (!options.output.empty()) write_outputs(options.output, input, trips);
}

}  // namespace

Command register_encode_command(CLI::App& app) {
  auto options_ptr = std::make_shared<EncodeOptions>();
  EncodeOptions& options = *options_ptr;
  CLI::App* command = add_command(
      app, "encode",
      "Round-trip a tensor's rows (last dimension D = 256 or 512) through the row codec "
      "(FP8 and TurboQuant-HB formats) and report cosine, relative L2 and max abs error per "
      "format");
  command->add_option("input", options.input, "Input tensor file (.npy or .safetensors)")
      ->required()
      ->check(CLI::ExistingFile);
  command->add_option("--name", options.name,
                      "Tensor to read from a .safetensors file (optional if it holds one)");
  command->add_option("--format", options.format, "fp8, tq3, tq4, tq5, tq6, tq8, or all")
      ->check(CLI::IsMember({"all"}) | row_format_name())
      ->capture_default_str();
  command->add_option("--bits", options.bits, "Shorthand for --format tqBITS")
      ->check(CLI::IsMember({3, 4, 5, 6, 8}));
  command
      ->add_option("--scale-factor-d512", options.scale_factor_d512,
                   "Scale factor sf of D = 512 rows (SPEC 1.2)")
      ->check(finite_positive())
      ->capture_default_str();
  command->add_option("--output", options.output,
                      "Write <format>.codes, <format>.norms (FP8: <format>.scales) and "
                      "<format>.decoded to this .safetensors file");
  return {command, [options_ptr] { run_encode(*options_ptr); }};
}

}  // namespace turbodecode::cli
