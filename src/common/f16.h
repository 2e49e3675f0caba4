// The library's half and bfloat16 conversions are the public ones.
#pragma once

#include "turbodecode/f16.h"
