#include "model/subsampling_impl.h"

namespace mpiasr {

template class ConvSubsampling<float, float>;
template class ConvSubsampling<double, double>;

}  // namespace mpiasr
