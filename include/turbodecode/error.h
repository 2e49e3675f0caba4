// Errors raised by every public entry point.
#pragma once

#include <stdexcept>
#include <string>

namespace turbodecode {

// Base of every exception the library throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A public call was given an argument that breaks a rule (SPEC §7). Nothing was written.
class InvalidArgument : public Error {
 public:
  InvalidArgument(std::string argument, std::string rule);
  const std::string& argument() const { return argument_; }
  const std::string& rule() const { return rule_; }

 private:
  std::string argument_;
  std::string rule_;
};

// A CUDA runtime call or kernel launch failed; `call` names it.
class CudaError : public Error {
 public:
  CudaError(std::string call, int code, const std::string& message);
  const std::string& call() const { return call_; }
  int code() const { return code_; }

 private:
  std::string call_;
  int code_;
};

}  // namespace turbodecode
