#include "model/optimizer.h"

namespace mpiasr {

template class Optimizer<float, float>;
template class Optimizer<double, double>;

}  // namespace mpiasr
