#include "model/parameters.h"

#include <sstream>

#include "src/base/rng.h"

namespace mpiasr {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

double init_uniform(uint64_t seed, uint64_t index) {
  return unit_double(SplitMix64::at(seed, index));
}

template class ParameterStore<float, float>;
template class ParameterStore<double, double>;

}  // namespace mpiasr
