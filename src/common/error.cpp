#include "turbodecode/error.h"

#include <string>
#include <utility>

namespace turbodecode {

InvalidArgument::InvalidArgument(std::string argument, std::string rule)
    : Error("invalid argument '" + argument + "': " + rule),
      argument_(std::move(argument)),
      rule_(std::move(rule)) {}

CudaError::CudaError(std::string call, int code, const std::string& message)
    : Error("CUDA call " + call + " failed (" + std::to_string(code) + "): " + message),
      call_(std::move(call)),
      code_(code) {}

}  // namespace turbodecode
