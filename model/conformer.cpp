#include "model/conformer_impl.h"

namespace mpiasr {

template class Conformer<float, float>;
template class Conformer<double, double>;

}  // namespace mpiasr
