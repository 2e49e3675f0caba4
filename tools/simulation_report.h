// How the main job shows its results: an aligned text report, or one JSON object (--json).
#pragma once

#include <nlohmann/json.hpp>

#include "decode_simulation.h"

namespace turbodecode::cli {

void print_simulation_report(const SimulationOutcome& outcome);
nlohmann::ordered_json simulation_json(const SimulationOutcome& outcome);

}  // namespace turbodecode::cli
