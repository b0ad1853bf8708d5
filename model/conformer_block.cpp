#include "model/conformer_block_impl.h"

namespace mpiasr {

template class ConformerBlock<float, float>;
template class ConformerBlock<double, double>;

}  // namespace mpiasr
