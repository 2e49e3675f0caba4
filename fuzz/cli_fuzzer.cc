// The CLI's argument and file handling, in process. An input is a command line, one argument
// per line, then files, each introduced by kFileMark, its name and a newline:
//
//   attention\n--q\nq.npy\n--k\nk.npy ... <kFileMark>q.npy\n<bytes of q.npy><kFileMark>k.npy\n...
//
// The files are written to a private directory that is the working directory, so arguments
// name them as typed. Arguments with '/' are skipped: nothing is read or written elsewhere.
// The `attention` and `encode` subcommands run; the main job and `hc` only parse (they read no
// files and run for seconds). Findings: a crash or sanitizer report, an exception other than
// the CLI's own errors, an error that names something the user did not type (every
// InvalidArgument must name a flag or a file given on the command line), or a failed run that
// changed a file.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "cli.h"

namespace {

constexpr std::string_view kFileMark(
    "\0\xf0"
    "FILE:",
    7);
constexpr std::size_t kMaxArguments = 64;
constexpr std::string_view kErrorPrefix = "turbodecode: error: ";
constexpr std::string_view kInvalidArgument = "invalid argument '";

// Splits `text` at every '\n'.
std::vector<std::string> lines_of(std::string_view text) {
  std::vector<std::string> lines;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find('\n', begin), text.size());
    lines.emplace_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return lines;
}

bool safe_file_name(std::string_view name) {
  if (name.empty() || name.size() > 64 || name[0] == '.') return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

void remove_files_in_working_directory() {
  DIR* dir = opendir(".");
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') unlink(entry->d_name);
  }
  closedir(dir);
}

// Name -> bytes of every file in the working directory.
std::map<std::string, std::string> files_in_working_directory() {
  std::map<std::string, std::string> files;
  DIR* dir = opendir(".");
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream in(entry->d_name, std::ios::binary);
    files[entry->d_name] = std::string(std::istreambuf_iterator<char>(in), {});
  }
  closedir(dir);
  return files;
}

// Writes the input's files; false when the input should be skipped.
bool write_files(std::string_view parts) {
  while (!parts.empty()) {
    parts.remove_prefix(kFileMark.size());
    const std::size_t next = parts.find(kFileMark);
    const std::string_view part = parts.substr(0, next);
    parts = next == std::string_view::npos ? std::string_view() : parts.substr(next);
    const std::size_t newline = part.find('\n');
    if (newline == std::string_view::npos) return false;
    const std::string name(part.substr(0, newline));
    if (!safe_file_name(name)) return false;
    const std::string_view bytes = part.substr(newline + 1);
    std::ofstream(name, std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  return true;
}

// Every "turbodecode: error: invalid argument 'NAME': ..." must name a flag or an argument.
void check_errors_name_what_was_typed(const std::string& errors,
                                      const std::vector<std::string>& arguments) {
  for (const std::string& line : lines_of(errors)) {
    if (!line.starts_with(kErrorPrefix)) continue;
    const std::string_view message = std::string_view(line).substr(kErrorPrefix.size());
    if (!message.starts_with(kInvalidArgument)) __builtin_trap();  // not the CLI's own error
    const std::string_view rest = message.substr(kInvalidArgument.size());
    const std::string name(rest.substr(0, rest.find("': ")));
    if (name.starts_with("--")) continue;
    bool typed = false;
    for (const std::string& argument : arguments) typed = typed || argument == name;
    if (!typed) {
      std::fprintf(stderr, "error names '%s', which was not typed\n", name.c_str());
      __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // One worker thread: runs are reproducible and cheap to start.
  setenv("TURBODECODE_THREADS", "1", 1);
  char dir[] = "/dev/shm/turbodecode_cli_fuzz.XXXXXX";
  if (mkdtemp(dir) == nullptr || chdir(dir) != 0) std::abort();
  // Reports go to stdout; keep libFuzzer's output readable.
  const int null = open("/dev/null", O_WRONLY);
  dup2(null, STDOUT_FILENO);
  close(null);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t files_at = input.find(kFileMark);
  std::vector<std::string> arguments = lines_of(input.substr(0, files_at));
  if (arguments.size() > kMaxArguments) return -1;
  for (const std::string& argument : arguments) {
    if (argument.find('/') != std::string::npos || argument.find('\0') != std::string::npos) {
      return -1;
    }
  }
  remove_files_in_working_directory();
  if (files_at != std::string_view::npos && !write_files(input.substr(files_at))) return -1;

  std::vector<const char*> argv = {"turbodecode"};
  for (const std::string& argument : arguments) argv.push_back(argument.c_str());
  const std::map<std::string, std::string> files_before = files_in_working_directory();
  std::ostringstream errors;
  turbodecode::cli::Cli cli(turbodecode::cli::InputLimits{.cache_bytes = std::int64_t{16} << 20});
  std::optional<int> status = cli.parse(static_cast<int>(argv.size()), argv.data(), errors);
  if (!status) {
    const std::string command = cli.command();
    if (command == "attention" || command == "encode") status = cli.run(errors);
  }
  check_errors_name_what_was_typed(errors.str(), arguments);
  if (status.value_or(0) != 0 && files_in_working_directory() != files_before) {
    std::fprintf(stderr, "a failed run changed a file\n");
    __builtin_trap();
  }
  return 0;
}
