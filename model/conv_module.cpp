#include "model/conv_module_impl.h"

namespace mpiasr {

template class ConvModule<float, float>;
template class ConvModule<double, double>;

}  // namespace mpiasr
