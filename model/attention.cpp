#include "model/attention_impl.h"

namespace mpiasr {

template class SelfAttention<float, float>;
template class SelfAttention<double, double>;

}  // namespace mpiasr
